"""Which quantizer replaces each `QuantPoint` of a built model (A2Q / degree-aware), mirroring the A2Q code:

| layer | ``q_input``                           | ``q_xw``                     | ``q_aggregate``      |
|-------|---------------------------------------|------------------------------|----------------------|
| GCN   | per-node feature (learned bits)       | per-channel step, fixed bits | not quantized        |
| GAT   | per-node feature                      | per-node feature (q_gat_fea) | not quantized        |
| GIN   | per-channel step, fixed bits (q_xw)   | --                           | per-node (MLP input) |
| SAGE  | per-node feature                      | --                           | per-node feature     |

plus every weight (per output channel, fixed bits), GAT attention vectors and edge scores (per head, fixed bits).
A2Q's GIN code also quantizes, per node, the input of the MLP's second ``QLinear`` (after batch norm and ReLU):
``quantize_mlp_hidden=True`` does the same through the ``"hidden"`` point of ``gin_mlp``; it is off by default (the
results tables were trained without it).
The first layer's input is left in FP32 unless ``quantize_first_input`` (A2Q: binary bag-of-words features).
GCN / GAT aggregation outputs feed the next layer's quantized input, so A2Q does not quantize them.
"Per-node feature" becomes the ``node`` scheme (node tasks), ``nns`` (A2Q on graph tasks) or ``degree``
(degree-aware). Post-ReLU tensors (inputs of layers >= 2 of GCN/GIN/SAGE, sums and means of them) are unsigned.
Degree-Quant replaces every point.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from gnn.conv import QuantPoint
from gnn.models import CONVS
from quant.archs import ARCHS


@dataclass(frozen=True)
class PointSpec:
    """One quantization point: where it lives and what replaces it (``scheme`` None: keep FP32)."""

    name: str  # fully qualified module name of the QuantPoint
    parent: nn.Module
    attr: str
    role: str
    kind: str
    layer: int  # index of the enclosing conv in model.convs, -1 outside them (e.g. the graph-level head)
    arch: str  # the enclosing conv's arch (gnn.models.CONVS), "other" outside convs
    scheme: str | None  # "feature" | "channel" | "row" | "head" | None
    unsigned: bool
    width: int  # channels of a "channel" / "row" scheme, heads of a "head" scheme


def _arch_of_layer() -> dict[type, str]:
    """Conv class -> its arch name (the registered FP32 layer types, gnn.models.CONVS)."""
    return {s.layer: name for name, s in CONVS.items()}


def _node_scheme(arch: str, role: str) -> str | None:
    """The scheme of a "node"-kind point: the architecture's ``point_schemes`` (quant.archs), else "feature"."""
    spec = ARCHS.get(arch)
    return spec.point_schemes.get(role, "feature") if spec is not None else "feature"


def _conv_of(model: nn.Module) -> dict[str, tuple[int, nn.Module]]:
    """Qualified name of each message-passing layer -> (index in model.convs, module)."""
    convs = getattr(model, "convs", None)
    index = {id(c): i for i, c in enumerate(convs)} if convs is not None else {}
    out, layer_types = {}, _arch_of_layer()
    for name, m in model.named_modules():
        if type(m) in layer_types:
            out[name] = (index.get(id(m), -1), m)
    return out


def plan_points(model: nn.Module, quantize_first_input: bool, first_input_nonneg: bool,
                quantize_mlp_hidden: bool = False, learn_xw_bits: bool = False) -> list[PointSpec]:
    """Every `QuantPoint` of ``model`` with the A2Q scheme that replaces it (``"hidden"`` points: only with
    ``quantize_mlp_hidden``; they are post-ReLU, so unsigned; ``learn_xw_bits``: per-channel XW points become
    per-node features with learned bits)."""
    convs, layer_types = _conv_of(model), _arch_of_layer()
    specs = []
    for name, point in model.named_modules():
        if not isinstance(point, QuantPoint):
            continue
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        owner = max((c for c in convs if name.startswith(c + ".")), key=len, default=None)
        layer, conv = convs[owner] if owner is not None else (-1, None)
        arch = layer_types[type(conv)] if conv is not None else "other"
        relu_between = arch in CONVS and CONVS[arch].activation == "relu"
        unsigned, width = False, 0
        if point.kind == "weight":
            scheme, width = "row", parent.out_dim
        elif point.kind in ("vector", "edge"):
            scheme, width = "head", getattr(conv, "heads", 1)
        else:
            scheme = _node_scheme(arch, point.role)
            if scheme == "channel" and point.role == "xw" and learn_xw_bits:
                scheme = "feature"
            if scheme == "channel":
                width = conv.lin.out_dim if point.role == "xw" else conv.in_dim
            post_relu = (layer > 0 and relu_between and point.role in ("input", "aggregate")
                         or point.role == "hidden")
            unsigned = post_relu or (layer == 0 and first_input_nonneg and point.role in ("input", "aggregate")
                                     and arch != "other")
            if layer == 0 and point.role == "input" and not quantize_first_input:
                scheme = None
            if point.role == "hidden" and not quantize_mlp_hidden:
                scheme = None
        specs.append(PointSpec(name=name, parent=parent, attr=attr, role=point.role, kind=point.kind,
                               layer=layer, arch=arch, scheme=scheme, unsigned=unsigned and scheme == "feature",
                               width=width))
    return specs
