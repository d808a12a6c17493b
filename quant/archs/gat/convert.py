"""Trained quantized GAT -> integer model (:class:`quant.archs.gat.integer.QuantizedGAT`).

Input: a ``gnn.models.GNN`` with ``arch="gat"`` (node task, no norm, no residual; ELU between layers) quantized by
``quant.qat.api.quantize_`` with ``method="a2q"`` or ``"degree-aware"``. Mapping per layer ``l`` (``quant.qat.plan``):

* ``x_steps``, ``x_bits`` <- ``convs[l].q_input`` (per node: node scheme or the degree table's rows); layer 0 keeps
  A2Q's FP32 input, whose codes come from :func:`quant.convert.input_codes`;
* ``w_codes``, ``w_steps`` <- ``convs[l].lin.q_weight``; ``xw_steps``, ``xw_bits`` <- ``convs[l].q_xw`` (per node);
* ``att_src_codes``, ``att_dst_codes``, ``att_steps`` <- ``convs[l].q_att`` applied to ``att_src`` / ``att_dst``
  (per head, one bitwidth); ``score_steps``, ``score_bits`` <- ``convs[l].q_score`` (per head);
* ``q_aggregate`` must stay FP32 (A2Q's GAT plan); ``bias``, ``heads``, ``concat``, ``negative_slope`` as built;
* ``out_steps`` <- ``convs[l + 1].q_input``; None on the last layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gnn.conv import QuantPoint
from gnn.ops import in_degree
from quant.archs.gat.integer import QuantizedGAT, QuantizedGATLayer
from quant.convert import ConvertedModel, check_convertible, learned_per_node, node_layer_input, weight_codes
from quant.qat.a2q import A2QQuantizer
from quant.qat.quantizers import STEP_EPS, a2q_quantize

FN = "to_quantized_gat"


@dataclass(frozen=True, kw_only=True)
class ConvertedGAT(ConvertedModel):
    """A converted GAT: ``degree_tables`` keyed (layer, ``"input"`` / ``"xw"``)."""


def _head_quantizer(q: nn.Module, who: str) -> tuple[np.ndarray, int]:
    """(steps (H,), the one bitwidth) of a per-head quantizer."""
    if not (isinstance(q, A2QQuantizer) and q.scheme == "head"):
        raise ValueError(f"{FN}: {who} must be a per-head A2Q quantizer, got {type(q).__name__}")
    bits = q.rounded_bits().unique()
    if bits.numel() != 1:
        raise ValueError(f"{FN}: {who} has bitwidths {bits.tolist()} per head; the integer layer takes one")
    return q.step.detach().abs().clamp_min(STEP_EPS).view(-1).double().cpu().numpy(), int(bits[0])


def _attention_codes(conv: nn.Module, li: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    q = conv.q_att
    steps, bits = _head_quantizer(q, f"convs[{li}].q_att")
    step = q.step.detach().abs().clamp_min(STEP_EPS)  # (1, H, 1)
    codes = [a2q_quantize(a.detach(), step, q.rounded_bits())[0][0].cpu().numpy().astype(np.int8)
             for a in (conv.att_src, conv.att_dst)]  # (H, C) each
    return codes[0], codes[1], steps, bits


def to_quantized_gat(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor, frac_bits: int = 20,
                     psum_bits: int = 32) -> ConvertedGAT:
    """Integer golden model of a trained quantized GAT on ``(x (N, F_in) dense, edge_index (2, E))``
    (``quant/FIXED_POINT.md``, section GAT).

    ``frac_bits`` defaults to 20, not 14 as for the other layers: a GAT whose features all fall to 1 bit (Cora at a
    1.7-bit target) outputs its bias alone, and the classes' logits then differ by 1e-7 to 1e-4; with 14 fractional
    bits (an accumulator unit of ~3e-5) the bias rounding reordered them on 2 of 8 such seeds (31.9 % -> 13 %).
    20 bits keep every register within 32 bits (partial sums <= 2^20 qmax)."""
    check_convertible(model, "gat", FN)
    convs = list(model.convs)
    in_deg = in_degree(edge_index, x.size(0)).cpu()
    x_np = x.detach().double().cpu().numpy()
    layers, schemes, tables, exact = [], [], {}, True
    for li, conv in enumerate(convs):
        if not QuantPoint.is_identity(conv.q_aggregate):
            raise ValueError(f"{FN}: convs[{li}].q_aggregate is quantized; A2Q's GAT keeps the aggregate in FP32 and "
                             "the integer layer has no aggregate quantizer")
        inp = node_layer_input(conv.q_input, li, x_np, in_deg, FN, tables)
        x_steps, x_bits = inp.steps, inp.bits
        schemes.append(inp.scheme)
        if li == 0:
            x_codes, exact = inp.codes, inp.exact
        w_codes, w_steps, w_bits = weight_codes(conv.lin, f"{FN}: convs[{li}].lin")
        xw_steps, xw_bits = learned_per_node(conv.q_xw, in_deg, f"{FN}: convs[{li}].q_xw", tables, (li, "xw"))
        att_src, att_dst, att_steps, att_bits = _attention_codes(conv, li)
        score_steps, score_bits = _head_quantizer(conv.q_score, f"convs[{li}].q_score")
        out_steps = out_bits = None
        if li + 1 < len(convs):
            out_steps, out_bits = learned_per_node(convs[li + 1].q_input, in_deg, f"{FN}: convs[{li + 1}].q_input", {},
                                                  (0, ""))
        layers.append(QuantizedGATLayer(
            x_steps=x_steps, x_bits=x_bits, w_codes=w_codes, w_steps=w_steps, w_bits=w_bits, xw_steps=xw_steps,
            xw_bits=xw_bits, heads=conv.heads, att_src_codes=att_src, att_dst_codes=att_dst, att_steps=att_steps,
            att_bits=att_bits, score_steps=score_steps, score_bits=score_bits, negative_slope=conv.negative_slope,
            concat=conv.concat, bias=None if conv.bias is None else conv.bias.detach().double().cpu().numpy(),
            out_steps=out_steps, out_bits=out_bits, frac_bits=frac_bits, psum_bits=psum_bits))
    return ConvertedGAT(model=QuantizedGAT(x_codes=x_codes, layers=tuple(layers)),
                        edge_index=edge_index.detach().cpu().numpy().astype(np.int64),
                        in_degree=in_deg.numpy().astype(np.int64), input_exact=exact, x_schemes=tuple(schemes),
                        degree_tables=tables)


__all__ = ["ConvertedGAT", "to_quantized_gat"]
