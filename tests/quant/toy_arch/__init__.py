"""A toy architecture, complete from FP32 layer to ``.qgraph`` export: the walkthrough of ``docs/quant.md``.

``ToyConv`` is a node-wise linear layer ``X' = q_input(X) W^T + b`` (it ignores the edges: the smallest layer that
still has a quantized input and quantized weights). Registering it takes two lines, one per side::

    gnn.models.register_conv(CONV)     # ModelConfig(arch="toy") builds it; A2Q / degree-aware train it
    quant.archs.register(SPEC)         # convert, integer golden model, export, read back, verify

The modules beside this file follow ``quant.archs.spec``'s convention: ``integer`` (numpy golden model), ``convert``
(trained model -> integer model), ``export`` (arrays and per-layer manifest entries), ``reader`` (numpy)."""

from __future__ import annotations

from quant.archs.spec import ArchSpec

NAME = "toy"

SPEC = ArchSpec(
    name=NAME, display_name="toy linear", package=__name__,
    point_schemes={"input": "feature"},  # the learned per-node input quantizer (A2Q's "feature" scheme)
    converter="to_quantized_toy",
    layer_meta={"in_dim": "dim", "out_dim": "dim", "w_bits": "bits", "relu": bool},
    layer_weights=(("w_codes", "w_bits", lambda m: (m["out_dim"], m["in_dim"])),))
