"""Trained quantized GIN -> integer model (:class:`quant.archs.gin.integer.QuantizedGIN`).

Input: a ``gnn.models.GNN`` with ``arch="gin"`` (node task, no norm between layers, no residual) quantized by
``quant.qat.api.quantize_`` with ``method="a2q"`` or ``"degree-aware"``, with or without ``quantize_mlp_hidden``
(``python -m gnn.train ... --quantize-mlp-hidden``). Each layer's MLP must be :func:`gnn.conv.gin.gin_mlp` (Linear,
BatchNorm1d, ReLU, quantization point, Linear). Mapping per layer ``l`` (``quant.qat.plan``):

* ``x_steps``, ``x_bits`` <- ``convs[l].q_input``: channel scheme (A2Q's GIN: per-channel step, fixed bits) or
  node / degree scheme; layer 0 keeps A2Q's FP32 input, whose per-node codes come from
  :func:`quant.convert.input_codes` (exact for binary and row-normalised bag-of-words rows);
* ``eps`` <- ``convs[l].eps``; ``agg_steps``, ``agg_bits`` <- ``convs[l].q_aggregate`` (per node);
* ``w1_codes``, ``w1_steps`` <- ``mlp[0].q_weight``; the eval batch norm ``mlp[1]`` becomes ``bn_scale`` =
  ``gamma / sqrt(running_var + eps_bn)`` and the bias ``bn_scale (b1 - running_mean) + beta``;
* ``hid_steps``, ``hid_bits`` <- ``mlp[3]`` (the ``"hidden"`` point, per node). Without the hidden quantizer
  (``mlp[3]`` is the bare quantization point) the second linear map takes a full-precision input; the integer path
  then carries it in ``HIDDEN_FIXED_BITS``-bit (16) fixed point with per-node steps calibrated on the model's own
  hidden activation for the given input, ``max_f z_if / (2^15 - 1)`` (:func:`fixed_point_hidden_steps`; one eval
  forward), so only a value above the calibration input's row maximum is clipped;
* ``w2_codes``, ``w2_steps``, ``b2`` <- ``mlp[4]``;
* ``out_steps`` <- ``convs[l + 1].q_input`` (its scheme gives ``out_scheme``); None on the last layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from gnn.conv import QuantPoint
from gnn.conv.linear import Linear
from gnn.ops import in_degree
from quant.archs.gin.integer import HIDDEN_FIXED_BITS, QuantizedGIN, QuantizedGINLayer
from quant.convert import (
    ConvertedModel,
    check_convertible,
    fold_affine,
    graph_level,
    layer_input,
    learned_per_node,
    norm_affine,
    weight_codes,
)
from quant.formats.fixed_point import code_limit
from quant.qat.a2q import A2QQuantizer
from quant.qat.quantizers import STEP_EPS

FN = "to_quantized_gin"


@dataclass(frozen=True, kw_only=True)
class ConvertedGIN(ConvertedModel):
    """A converted GIN: ``x_schemes`` may also be "channel"; ``hidden_schemes``: per layer, where the hidden
    activation's steps come from ("node", "degree": its quantizer; "fixed": no quantizer, ``HIDDEN_FIXED_BITS``-bit
    fixed point calibrated on the input); ``degree_tables`` keyed (layer, ``"aggregate"`` / ``"hidden"`` /
    ``"input"``)."""

    hidden_schemes: tuple[str, ...]


def _features(q: nn.Module, in_deg: torch.Tensor, who: str, tables: dict, key: tuple[int, str]
              ) -> tuple[np.ndarray, np.ndarray, str]:
    """(steps, signed bits, "node" | "channel") of a quantized feature tensor; per node for node/degree schemes."""
    if isinstance(q, A2QQuantizer) and q.scheme == "channel":
        return (q.step.detach().abs().clamp_min(STEP_EPS).view(-1).double().cpu().numpy(),
                q.rounded_bits().view(-1).long().cpu().numpy(), "channel")
    steps, bits = learned_per_node(q, in_deg, f"{FN}: {who}", tables, key)
    return steps, bits, "node"


def _mlp_parts(conv: nn.Module, li: int) -> tuple[Linear, nn.BatchNorm1d | None, nn.Module, Linear]:
    """(first linear, batch norm or None, hidden quantizer or bare ``QuantPoint``, second linear) of a ``gin_mlp``;
    refuses other MLPs."""
    mlp = conv.mlp
    parts = list(mlp) if isinstance(mlp, nn.Sequential) else []
    shape_ok = (len(parts) == 5 and isinstance(parts[0], Linear) and isinstance(parts[1], (nn.BatchNorm1d, nn.Identity))
                and isinstance(parts[2], nn.ReLU) and isinstance(parts[4], Linear))
    if not shape_ok:
        raise ValueError(f"{FN}: convs[{li}].mlp must be gnn.conv.gin.gin_mlp (Linear, BatchNorm1d, ReLU, hidden "
                         f"quantization point, Linear); got {mlp}")
    bn = parts[1] if isinstance(parts[1], nn.BatchNorm1d) else None
    if bn is not None and (bn.running_mean is None or bn.training):
        raise ValueError(f"{FN}: convs[{li}].mlp[1] must be a batch norm in eval mode with running statistics "
                         "(call model.eval(); track_running_stats=True)")
    return parts[0], bn, parts[3], parts[4]


def fixed_point_hidden_steps(hidden: np.ndarray, bits: int = HIDDEN_FIXED_BITS) -> np.ndarray:
    """Per-node steps of a full-precision hidden activation carried in ``bits``-bit fixed point: the row maximum of
    ``hidden`` (N, H) (post-ReLU, >= 0) lands on the largest code ``2^(bits-1) - 1``; an all-zero row gets step 1.
    Returns (N,) float64 > 0."""
    row_max = np.asarray(hidden, dtype=np.float64).max(axis=1, initial=0.0)
    return np.where(row_max > 0, row_max / float(code_limit(bits)), 1.0)


def _hidden_inputs(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor) -> dict[int, np.ndarray]:
    """What enters each layer's bare hidden point ``mlp[3]`` (the ReLU output, (N, H) float64) in one forward of the
    model as it is (eval mode); layers with a hidden quantizer are not captured."""
    bare = [li for li, conv in enumerate(model.convs) if isinstance(conv.mlp[3], QuantPoint)]
    if not bare:
        return {}
    if model.training:
        raise ValueError(f"{FN}: the hidden activation is calibrated on an eval forward; call model.eval() first "
                         "(dropout would change it)")
    captured: dict[int, np.ndarray] = {}
    hooks = [model.convs[li].mlp[3].register_forward_hook(
        lambda _m, inputs, _out, li=li: captured.__setitem__(li, inputs[0].detach().double().cpu().numpy()))
        for li in bare]
    try:
        with torch.no_grad():
            model(x, edge_index)
    finally:
        for h in hooks:
            h.remove()
    return captured


def _fold_norm(first: Linear, bn: nn.BatchNorm1d | None) -> tuple[np.ndarray, np.ndarray | None]:
    """``(alpha (H,), bias after the norm (H,) or None)`` of ``BN(z + b1) = alpha z + alpha (b1 - mu) + beta``."""
    b1 = None if first.bias is None else first.bias.detach().double().cpu().numpy()
    if bn is None:
        return np.ones(first.out_dim), b1
    alpha, shift = norm_affine(bn, first.out_dim, f"{FN}: mlp[1]")
    return alpha, alpha * (0.0 if b1 is None else b1) + shift


def to_quantized_gin(model: nn.Module, x: torch.Tensor, edge_index: torch.Tensor, frac_bits: int = 14,
                     psum_bits: int = 32) -> ConvertedGIN:
    """Integer golden model of a trained quantized GIN on ``(x (N, F_in) dense, edge_index (2, E))``.

    ``frac_bits``: fractional bits of the sum's coefficients and of the accumulators; ``psum_bits``: width of the
    sum's partial sums (``quant/FIXED_POINT.md``, section GIN). GIN sums without normalising, so a partial sum grows
    with the in-degree: ``|psum_i| <= (deg_i + 1 + eps) qmax 2^frac``; with the defaults and 8-bit codes 32 bits
    hold in-degrees up to about 1000, beyond that it saturates (``gin_forward_int(..., on_overflow="raise")``
    reports it; lower ``frac_bits`` or widen ``psum_bits``).
    """
    check_convertible(model, "gin", FN, graph_level=True)
    convs = list(model.convs)
    in_deg = in_degree(edge_index, x.size(0)).cpu()
    x_np = x.detach().double().cpu().numpy()
    parts = [_mlp_parts(conv, li) for li, conv in enumerate(convs)]
    hidden_in = _hidden_inputs(model, x, edge_index)
    layers, schemes, hid_schemes, tables, exact = [], [], [], {}, True
    for li, conv in enumerate(convs):
        first, bn, q_hidden, second = parts[li]
        inp = layer_input(conv.q_input, li, x_np,
                          lambda q, li=li: _features(q, in_deg, f"convs[{li}].q_input", tables, (li, "input")))
        x_steps, x_bits, x_scheme = inp.steps, inp.bits, inp.step_scheme
        schemes.append(inp.scheme)
        if li == 0:
            x_codes, exact = inp.codes, inp.exact
        agg_steps, agg_bits, agg_scheme = _features(conv.q_aggregate, in_deg, f"convs[{li}].q_aggregate", tables,
                                                    (li, "aggregate"))
        if li in hidden_in:  # no hidden quantizer: fixed point calibrated on this input
            hid_steps, hid_scheme = fixed_point_hidden_steps(hidden_in[li]), "fixed"
            hid_bits = np.full(x.size(0), HIDDEN_FIXED_BITS, dtype=np.int64)
        else:
            hid_steps, hid_bits, hid_scheme = _features(q_hidden, in_deg, f"convs[{li}].mlp[3]", tables,
                                                        (li, "hidden"))
            hid_scheme = "degree" if (li, "hidden") in tables else hid_scheme
        hid_schemes.append(hid_scheme)
        if "channel" in (agg_scheme, hid_scheme):
            raise ValueError(f"{FN}: convs[{li}] quantizes its aggregate or hidden activation per channel; the integer "
                             "GIN takes them per node (A2Q / degree-aware plan)")
        w1_codes, w1_steps, w1_bits = weight_codes(first, f"{FN}: convs[{li}].mlp[0]")
        w2_codes, w2_steps, w2_bits = weight_codes(second, f"{FN}: convs[{li}].mlp[4]")
        if w1_bits != w2_bits:
            raise ValueError(f"{FN}: convs[{li}] MLP weights have {w1_bits} and {w2_bits} bits; the integer layer has "
                             "one weight bitwidth")
        bn_scale, b1 = _fold_norm(first, bn)
        b2 = None if second.bias is None else second.bias.detach().double().cpu().numpy()
        w2_codes, w2_steps, b2 = fold_affine(w2_codes, w2_steps, b2, *norm_affine(model.norms[li], w2_codes.shape[0],
                                                                                  f"{FN}: norms[{li}]"))
        out_steps = out_bits = None
        out_scheme = "channel"
        if li + 1 < len(convs):
            out_steps, out_bits, out_scheme = _features(convs[li + 1].q_input, in_deg, f"convs[{li + 1}].q_input",
                                                        {}, (0, ""))
        layers.append(QuantizedGINLayer(
            x_steps=x_steps, x_bits=x_bits, x_scheme=x_scheme, eps=float(conv.eps.detach().view(-1)[0]),
            agg_steps=agg_steps, agg_bits=agg_bits, w1_codes=w1_codes, w1_steps=w1_steps, bn_scale=bn_scale, b1=b1,
            hid_steps=hid_steps, hid_bits=hid_bits, w2_codes=w2_codes, w2_steps=w2_steps, w_bits=w1_bits,
            b2=b2, out_steps=out_steps, out_bits=out_bits, out_scheme=out_scheme,
            relu=li + 1 < len(convs) or graph_level(model), frac_bits=frac_bits,
            psum_bits=psum_bits))
    return ConvertedGIN(model=QuantizedGIN(x_codes=x_codes, layers=tuple(layers)),
                        edge_index=edge_index.detach().cpu().numpy().astype(np.int64),
                        in_degree=in_deg.numpy().astype(np.int64), input_exact=exact, x_schemes=tuple(schemes),
                        hidden_schemes=tuple(hid_schemes), degree_tables=tables)


__all__ = ["ConvertedGIN", "fixed_point_hidden_steps", "to_quantized_gin"]
