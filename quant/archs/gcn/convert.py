"""Trained quantized GCN -> integer golden model (:class:`quant.archs.gcn.integer.QuantizedGCN`).

Input: a ``gnn.models.GNN`` with ``arch="gcn"`` (node task: ``pool="none"``, no norm, no residual) quantized by
``quant.qat.api.quantize_`` with ``method="a2q"`` or ``"degree-aware"`` and trained (or only calibrated). Mapping of the
quantizer modules (``quant.qat.a2q.A2QQuantizer``) onto the integer layer, per GCN layer ``l``:

* ``x_steps``, ``x_bits`` <- ``convs[l].q_input``: node scheme ``|s_i|``, ``round(|b_i|)``; degree scheme: the
  table row of ``bucket(indeg_i)`` (the table itself is kept in ``ConvertedGCN.degree_tables``);
* ``w_codes``, ``w_steps`` <- ``convs[l].lin.q_weight`` (scheme row): codes ``round_haz(clamp(W / t_f))`` computed
  by the model's own quantizer, per-output-channel ``t_f``;
* ``xw_steps``, ``xw_bits`` <- ``convs[l].q_xw``: channel scheme -> per-channel ``u_f`` (``xw_scheme="channel"``);
  node / degree scheme -> per node;
* ``agg_steps`` <- ``convs[l].q_aggregate``: the identity (A2Q's GCN) -> None; node / degree -> per node;
* ``out_steps`` <- ``convs[l + 1].q_input`` as ``x_steps`` of the next layer; None on the last layer.

The first layer's input is FP32 in A2Q (``quantize_first_input=False``). The export then derives integer codes
from the features: each row ``x_i`` with ``x_i / max|x_i|`` in ``{-1, 0, 1}`` (binary and row-normalised
bag-of-words, e.g. Cora) is *exactly* ``codes * step`` with 2-bit codes and step ``max|x_i|``; any other row gets
8-bit codes with step ``max|x_i| / 127`` and ``ConvertedGCN.input_exact`` is False (an approximation the fake-quant
model does not make). All-zero rows get bitwidth 1 (A2Q's all-zero width).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gnn.ops import in_degree
from quant.archs.gcn.integer import QuantizedGCN, QuantizedGCNLayer
from quant.convert import (
    ConvertedModel,
    _step,
    check_convertible,
    degree_table,
    fold_affine,
    graph_level,
    input_codes,
    norm_affine,
    per_node,
    weight_codes,
)
from quant.integer import fake_quant
from quant.qat.a2q import FEATURE_SCHEMES, A2QQuantizer


@dataclass(frozen=True, kw_only=True)
class ConvertedGCN(ConvertedModel):
    """A converted GCN: ``degree_tables`` keyed by layer index (its degree-aware input quantizer), each
    ``{"bucket_scheme", "min_degree" (D,), "max_degree" (D,) (-1 = unbounded), "bits" (D,) signed widths,
    "step" (D,)}``."""

def to_quantized_gcn(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor, frac_bits: int = 14,
                     psum_bits: int = 32) -> ConvertedGCN:
    """Integer golden model of a trained quantized GCN on the graph ``(x (N, F_in), edge_index (2, E))``.

    ``frac_bits`` / ``psum_bits``: fixed-point format of the edge coefficients and aggregation partial sums
    (``quant/FIXED_POINT.md``); the defaults keep the coefficient error of high-degree nodes small and rule out
    partial-sum saturation on Cora-sized graphs.
    """
    check_convertible(model, "gcn", "to_quantized_gcn", graph_level=True)
    convs = list(model.convs)
    in_deg = in_degree(edge_index, x.size(0)).cpu()
    layers, schemes, tables = [], [], {}
    exact = True
    for li, conv in enumerate(convs):
        q_in = conv.q_input
        if isinstance(q_in, A2QQuantizer):
            x_steps, x_bits = per_node(q_in, in_deg, f"to_quantized_gcn: convs[{li}].q_input")
            schemes.append(q_in.scheme)
            if q_in.scheme == "degree":
                tables[li] = degree_table(q_in)
        elif li == 0:
            x_codes, x_steps, x_bits, exact = input_codes(x.detach().cpu().numpy())
            schemes.append("input")
        else:
            raise ValueError(f"to_quantized_gcn: convs[{li}].q_input is not quantized; the integer path needs "
                             "quantized hidden features")
        if li == 0 and isinstance(q_in, A2QQuantizer):
            x_codes = fake_quant(x.detach().double().cpu().numpy(), x_steps[:, None], x_bits[:, None]).astype(np.int8)
        codes, w_steps, w_bits = weight_codes(conv.lin, f"to_quantized_gcn: convs[{li}].lin")
        qxw = conv.q_xw
        if isinstance(qxw, A2QQuantizer) and qxw.scheme == "channel":
            xw_steps, xw_bits, xw_scheme = (_step(qxw).view(-1).double().numpy(),
                                            qxw.rounded_bits().view(-1).long().numpy(), "channel")
        elif isinstance(qxw, A2QQuantizer) and qxw.scheme in FEATURE_SCHEMES:
            (xw_steps, xw_bits), xw_scheme = per_node(qxw, in_deg, f"to_quantized_gcn: convs[{li}].q_xw"), "node"
        else:
            raise ValueError(f"to_quantized_gcn: convs[{li}].q_xw must be quantized (A2Q channel or node scheme)")
        bias = None if conv.bias is None else conv.bias.detach().double().cpu().numpy()
        alpha, shift = norm_affine(model.norms[li], codes.shape[0], f"to_quantized_gcn: norms[{li}]")
        if not np.all(alpha == 1.0):  # the norm's scale multiplies the XW codes' per-channel step
            if xw_scheme != "channel":
                raise ValueError(f"to_quantized_gcn: norms[{li}] is a batch norm, which the integer GCN folds into a "
                                 "per-channel XW step; convs[{li}].q_xw quantizes per node")
            xw_steps = xw_steps * np.abs(alpha)
        codes, w_steps, bias = fold_affine(codes, w_steps, bias, alpha, shift)
        qa = conv.q_aggregate
        agg_steps = agg_bits = None
        if isinstance(qa, A2QQuantizer) and not np.all(alpha == 1.0):
            raise ValueError(f"to_quantized_gcn: convs[{li}] quantizes its aggregate and norms[{li}] scales it per "
                             "channel after that; the integer GCN folds a norm only without q_aggregate")
        if isinstance(qa, A2QQuantizer):
            agg_steps, agg_bits = per_node(qa, in_deg, f"to_quantized_gcn: convs[{li}].q_aggregate")
        elif isinstance(qa, nn.Module) and type(qa).__name__ != "QuantPoint":
            raise ValueError(f"to_quantized_gcn: convs[{li}].q_aggregate is a {type(qa).__name__}; expected an "
                             "A2Q quantizer or the identity QuantPoint")
        out_steps = out_bits = None
        if li + 1 < len(convs):
            nxt = convs[li + 1].q_input
            if not isinstance(nxt, A2QQuantizer):
                raise ValueError(f"to_quantized_gcn: convs[{li + 1}].q_input is not quantized")
            out_steps, out_bits = per_node(nxt, in_deg, f"to_quantized_gcn: convs[{li + 1}].q_input")
        layers.append(QuantizedGCNLayer(
            x_steps=x_steps, x_bits=x_bits, w_codes=codes, w_steps=w_steps, w_bits=w_bits, xw_steps=xw_steps,
            xw_bits=xw_bits, xw_scheme=xw_scheme, agg_steps=agg_steps, agg_bits=agg_bits,
            bias=bias, out_steps=out_steps, out_bits=out_bits, relu=li + 1 < len(convs) or graph_level(model),
            frac_bits=frac_bits,
            psum_bits=psum_bits))
    return ConvertedGCN(model=QuantizedGCN(x_codes=x_codes, layers=tuple(layers)),
                        edge_index=edge_index.detach().cpu().numpy().astype(np.int64),
                        in_degree=in_deg.numpy().astype(np.int64), input_exact=exact, x_schemes=tuple(schemes),
                        degree_tables=tables)
