"""Trained quantized GraphSAGE -> integer model (:class:`quant.archs.sage.integer.QuantizedSAGE`).

Input: a ``gnn.models.GNN`` with ``arch="sage"`` (node task, no norm, no residual) quantized by
``quant.qat.api.quantize_`` with ``method="a2q"`` or ``"degree-aware"``. Mapping per layer ``l`` (``quant.qat.plan``):

* ``x_steps``, ``x_bits`` <- ``convs[l].q_input`` (per node: node scheme, or the degree table's row of the node's
  in-degree bucket); layer 0 keeps A2Q's FP32 input, whose codes come from :func:`quant.convert.input_codes`
  (exact for binary and row-normalised bag-of-words rows);
* ``agg_steps``, ``agg_bits`` <- ``convs[l].q_aggregate`` (per node; it must be quantized: an FP32 mean would feed
  a full-precision value into the integer product);
* ``wn_codes``, ``wn_steps`` <- ``convs[l].lin_neigh.q_weight``; ``wr_codes``, ``wr_steps`` <- ``lin_root.q_weight``
  (per output channel, one bitwidth); ``bias`` <- ``lin_neigh.bias``;
* ``out_steps`` <- ``convs[l + 1].q_input``; None on the last layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gnn.ops import in_degree
from quant.archs.sage.integer import QuantizedSAGE, QuantizedSAGELayer
from quant.convert import ConvertedModel, check_convertible, learned_per_node, node_layer_input, weight_codes

FN = "to_quantized_sage"


@dataclass(frozen=True, kw_only=True)
class ConvertedSAGE(ConvertedModel):
    """A converted GraphSAGE: ``degree_tables`` keyed (layer, ``"input"`` / ``"aggregate"``)."""


def to_quantized_sage(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor, frac_bits: int = 14,
                      psum_bits: int = 32) -> ConvertedSAGE:
    """Integer golden model of a trained quantized GraphSAGE on ``(x (N, F_in), edge_index (2, E))``.

    ``frac_bits``: fractional bits of the mean coefficients and of the output accumulator; ``psum_bits``: width of
    the mean's partial sums (``quant/FIXED_POINT.md``, section GraphSAGE).
    """
    check_convertible(model, "sage", FN)
    convs = list(model.convs)
    in_deg = in_degree(edge_index, x.size(0)).cpu()
    x_np = x.detach().double().cpu().numpy()
    layers, schemes, tables, exact = [], [], {}, True
    for li, conv in enumerate(convs):
        inp = node_layer_input(conv.q_input, li, x_np, in_deg, FN, tables)
        x_steps, x_bits = inp.steps, inp.bits
        schemes.append(inp.scheme)
        if li == 0:
            x_codes, exact = inp.codes, inp.exact
        agg_steps, agg_bits = learned_per_node(conv.q_aggregate, in_deg, f"{FN}: convs[{li}].q_aggregate", tables,
                                         (li, "aggregate"))
        wn_codes, wn_steps, wn_bits = weight_codes(conv.lin_neigh, f"{FN}: convs[{li}].lin_neigh")
        wr_codes, wr_steps, wr_bits = weight_codes(conv.lin_root, f"{FN}: convs[{li}].lin_root")
        if wn_bits != wr_bits:
            raise ValueError(f"{FN}: convs[{li}] neighbour and root weights have {wn_bits} and {wr_bits} bits; the "
                             "integer layer has one weight bitwidth")
        out_steps = out_bits = None
        if li + 1 < len(convs):
            out_steps, out_bits = learned_per_node(convs[li + 1].q_input, in_deg, f"{FN}: convs[{li + 1}].q_input",
                                                   {}, (0, ""))
        bias = conv.lin_neigh.bias
        layers.append(QuantizedSAGELayer(
            x_steps=x_steps, x_bits=x_bits, agg_steps=agg_steps, agg_bits=agg_bits, wn_codes=wn_codes,
            wn_steps=wn_steps, wr_codes=wr_codes, wr_steps=wr_steps, w_bits=wn_bits,
            bias=None if bias is None else bias.detach().double().cpu().numpy(), out_steps=out_steps,
            out_bits=out_bits, relu=li + 1 < len(convs), frac_bits=frac_bits, psum_bits=psum_bits))
    return ConvertedSAGE(model=QuantizedSAGE(x_codes=x_codes, layers=tuple(layers)),
                         edge_index=edge_index.detach().cpu().numpy().astype(np.int64),
                         in_degree=in_deg.numpy().astype(np.int64), input_exact=exact, x_schemes=tuple(schemes),
                         degree_tables=tables)


__all__ = ["ConvertedSAGE", "to_quantized_sage"]
