"""Quantization of built GNNs and its way to the accelerator, in four parts (``docs/quant.md``):

* ``quant.qat``      -- quantization-aware training: ``QuantConfig`` (A2Q, degree-aware, Degree-Quant), ``quantize_``,
  the quantizers, which quantizer replaces each ``QuantPoint`` (``plan``) and the training hooks;
* ``quant.formats``  -- storage formats, numpy only: fixed point, bit packing, Adaptive-Package, measured storage;
* ``quant.integer``  -- the integer machinery every golden model shares (numpy); ``quant.convert`` the torch side of
  turning a trained model into one;
* ``quant.archs``    -- one ``ArchSpec`` per architecture (GCN, GraphSAGE, GIN, GAT, graph transformer), each a
  folder with its converter, integer golden model, export arrays and reader;
* ``quant.qgraph``   -- the ``.qgraph`` export format, read and written with numpy only; ``python -m quant.export``
  converts and writes a trained run.

Methods (one call on a built FP32 model; the layer code is untouched)::

    from quant.qat.api import QuantConfig, quantize_, quant_param_groups, quant_penalty, quant_summary
    quantize_(model, QuantConfig(method="a2q", target_bits=4.0), data)   # data=None for graph tasks

Bits: learned bitwidths are signed widths clamped to [1, 8]; post-ReLU tensors are reported without their sign
bit (``avg_bits``, A2Q's headline convention) and with it (``avg_bits_with_sign``).
"""
