"""Integer-only forward of a quantized GCN (the golden model of the accelerator) and its float64 fake-quant twin.

One layer of :class:`gnn.conv.GCNConv`, ``X' = relu(q_agg(Â q_xw(q_in(X) q_w(W)^T)) + b)``, in integers
(widths and rounding in ``quant/FIXED_POINT.md``):

1. ``acc = x_codes @ w_codes^T`` (int64, checked/saturated to 32 bits); real value ``s_j t_f acc[j, f]``.
2. XW requant to per-node codes (step ``u_j``, ``xw_bits[j]``): multiplier ``s_j t_f / u_j`` per (j, f).
3. Aggregation with fixed-point per-edge coefficients ``c_e = round(w_e (u_src / U) 2^frac_bits)``, where ``w_e`` is
   the GCN weight ``1/sqrt(d_i d_j)`` (self loops counted) and ``U = 2^ceil(log2 max_j u_j)`` is a per-layer power of
   two, so a coefficient also absorbs the source node's XW step and the sum of codes is well defined; partial sums
   saturate at ``psum_bits``. Unit of ``psum``: ``U 2^-frac_bits``.
4. Optional ``q_aggregate`` requant (per-node step ``g_i``); the accumulator unit becomes ``g_i 2^-frac_bits``.
5. Bias in accumulator units ``round(b_f / unit_i)``, ReLU, requant to the next layer's codes (multiplier
   ``unit_i / s'_i``), or, for the last layer, dequantised logits ``acc * unit_i``.

:func:`gcn_layer_reference` computes the same layer in float64 with fake-quant (A2Q's round-half-away-from-zero
quantizer). With ``exact_constants=False`` it uses the integer path's snapped normalisation and bias, and then
equals the integer path exactly when all scales are powers of two (and no partial sum saturates); with the true
normalisation and bias the codes agree within one step.

Converting a trained model (``gnn.models.GNN`` with ``arch="gcn"`` whose quant points were calibrated by
``quant.api``; done by the exporter, not here): per layer ``x_steps``/``x_bits`` = ``q_input``'s per-node step
``|s_i|`` and ``round(|b_i|)`` (A2Q skips the first layer on binary features: use step 1, 2 bits and the 0/1 features
as codes); ``w_codes``, ``w_steps`` = ``lin.q_weight``'s codes ``round_haz(clamp(W/t_f))`` and per-output-channel steps
``t_f``; ``xw_steps``/``xw_bits`` = ``q_xw``; ``agg_steps``/``agg_bits`` = ``q_aggregate`` (or None when it is
an identity); ``bias`` = ``conv.bias``; ``out_steps``/``out_bits`` = the *next* layer's ``q_input`` (None on the last).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant.fixed_point import (
    aggregate_int,
    code_limit,
    csr_from_edge_index,
    edge_coefficients,
    quantize_multiplier,
    requantize,
    saturate,
)

ACC_BITS = 32


def round_half_away(v: np.ndarray) -> np.ndarray:
    """``floor(|v| + 0.5) * sign(v)`` (A2Q's rounding), float64."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def fake_quant(v: np.ndarray, step: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Codes ``clamp(round_haz(v / step), -qmax, qmax)`` (float64). step, bits broadcast against v."""
    qmax = code_limit(bits)
    return np.clip(round_half_away(v / step), -qmax, qmax)


@dataclass(frozen=True, kw_only=True)
class QuantizedGCNLayer:
    """Integer parameters of one GCN layer. Shapes: N nodes, F_in -> F_out; steps float64 > 0, bits int.

    x_steps (N,), x_bits (N,): input codes' per-node steps and bitwidths. w_codes (F_out, F_in) int8,
    w_steps (F_out,), w_bits: weight codes per output channel. xw_steps (N,), xw_bits (N,): XW quantizer.
    agg_steps, agg_bits (N,) or None: aggregation-output quantizer. bias (F_out,) or None.
    out_steps, out_bits (N,) or None: the next layer's input quantizer (None = last layer, returns logits).
    """

    x_steps: np.ndarray
    x_bits: np.ndarray
    w_codes: np.ndarray
    w_steps: np.ndarray
    w_bits: int = 4
    xw_steps: np.ndarray
    xw_bits: np.ndarray
    agg_steps: np.ndarray | None = None
    agg_bits: np.ndarray | None = None
    bias: np.ndarray | None = None
    out_steps: np.ndarray | None = None
    out_bits: np.ndarray | None = None
    relu: bool = True
    frac_bits: int = 8
    psum_bits: int = 16

    def __post_init__(self) -> None:
        for name in ("x_steps", "w_steps", "xw_steps", "agg_steps", "bias", "out_steps"):
            if getattr(self, name) is not None:  # frozen: normalise dtypes once, here
                object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
        for name in ("x_bits", "xw_bits", "agg_bits", "out_bits"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64))
        object.__setattr__(self, "w_codes", np.asarray(self.w_codes, dtype=np.int8))
        n = self.x_steps.shape[0]
        f_out, _ = self.w_codes.shape
        for name, arr, shape in [("x_bits", self.x_bits, (n,)), ("w_steps", self.w_steps, (f_out,)),
                                 ("xw_steps", self.xw_steps, (n,)), ("xw_bits", self.xw_bits, (n,)),
                                 ("agg_steps", self.agg_steps, (n,)), ("agg_bits", self.agg_bits, (n,)),
                                 ("bias", self.bias, (f_out,)), ("out_steps", self.out_steps, (n,)),
                                 ("out_bits", self.out_bits, (n,))]:
            if arr is not None and np.shape(arr) != shape:
                raise ValueError(f"QuantizedGCNLayer: {name} has shape {np.shape(arr)}, expected {shape}")
        if (self.agg_steps is None) != (self.agg_bits is None) or (self.out_steps is None) != (self.out_bits is None):
            raise ValueError("QuantizedGCNLayer: give agg_steps with agg_bits and out_steps with out_bits")
        steps = [self.x_steps, self.w_steps, self.xw_steps, self.agg_steps, self.out_steps]
        if any(s is not None and np.any(~(np.asarray(s) > 0)) for s in steps):
            raise ValueError("QuantizedGCNLayer: every step must be > 0 (take |s| of the trained parameter)")
        if np.abs(self.w_codes.astype(np.int64)).max(initial=0) > code_limit(self.w_bits):
            raise ValueError(f"QuantizedGCNLayer: w_codes exceed the symmetric {self.w_bits}-bit range")
        if not 2 <= self.psum_bits <= ACC_BITS:
            raise ValueError(f"QuantizedGCNLayer: psum_bits={self.psum_bits} must lie in 2..{ACC_BITS}")

    @property
    def ref_scale(self) -> float:
        """``U``: the power of two >= every XW step; psum unit = ``U 2^-frac_bits``."""
        return float(2.0 ** np.ceil(np.log2(self.xw_steps.max())))


@dataclass(frozen=True, kw_only=True)
class QuantizedGCN:
    """Input codes (N, F_in) int8 of the first layer plus the layers (the last has ``out_steps=None``)."""

    x_codes: np.ndarray
    layers: tuple[QuantizedGCNLayer, ...]

    def __post_init__(self) -> None:
        if not self.layers or any(lay.out_steps is None for lay in self.layers[:-1]):
            raise ValueError("QuantizedGCN: need >= 1 layer, and every layer but the last needs out_steps")


def gcn_graph(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GCN edges (self loops replaced by one per node) in destination-major CSR with weights 1/sqrt(d_i d_j).

    Returns indptr (N+1,), indices (E',) sources, weight (E',) float64 (same values as ``gnn.ops.gcn_norm``).
    """
    src, dst = np.asarray(edge_index, dtype=np.int64)
    keep = src != dst
    loops = np.arange(num_nodes, dtype=np.int64)
    ei = np.stack([np.r_[src[keep], loops], np.r_[dst[keep], loops]])  # (2, E')
    deg = np.bincount(ei[1], minlength=num_nodes).astype(np.float64)
    indptr, indices, perm = csr_from_edge_index(ei, num_nodes)
    weight = 1.0 / np.sqrt(deg[indices] * deg[ei[1, perm]])
    return indptr, indices, weight


def _check_codes(codes: np.ndarray, bits: np.ndarray, name: str) -> None:
    if np.any(np.abs(codes.astype(np.int64)) > code_limit(bits)[:, None]):
        raise ValueError(f"{name}: codes exceed their per-node bitwidths")


def gcn_layer_int(layer: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, on_overflow: str = "saturate"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Integer forward of one layer. graph = :func:`gcn_graph` output.

    Returns ``(out, unit)``: out (N, F_out) int64 = next-layer codes, or for the last layer the 32-bit accumulator,
    whose real value is ``out * unit[:, None]`` (unit (N,) float64).
    """
    indptr, indices, weight = graph
    _check_codes(x_codes, layer.x_bits, "gcn_layer_int: x_codes")
    acc = x_codes.astype(np.int64) @ layer.w_codes.astype(np.int64).T  # (N, F_out)
    acc = saturate(acc, ACC_BITS)
    mult, shift = quantize_multiplier(layer.x_steps[:, None] * layer.w_steps[None, :] / layer.xw_steps[:, None])
    xw = requantize(acc, mult, shift, layer.xw_bits[:, None])  # (N, F_out) XW codes
    u_ref = layer.ref_scale
    coef = edge_coefficients(weight * layer.xw_steps[indices] / u_ref, layer.frac_bits)  # (E',)
    acc = aggregate_int(indptr, indices, xw, coef, layer.psum_bits, on_overflow)  # unit U 2^-frac
    unit = np.full(acc.shape[0], u_ref * 2.0**-layer.frac_bits)  # (N,)
    if layer.agg_steps is not None:
        mult, shift = quantize_multiplier(unit / layer.agg_steps)
        acc = requantize(acc, mult[:, None], shift[:, None], layer.agg_bits[:, None]) << layer.frac_bits
        unit = layer.agg_steps * 2.0**-layer.frac_bits
    if layer.bias is not None:
        acc = saturate(acc + _bias_int(layer.bias, unit), ACC_BITS)
    if layer.relu:
        acc = np.maximum(acc, 0)
    if layer.out_steps is None:
        return acc, unit
    mult, shift = quantize_multiplier(unit / layer.out_steps)
    return requantize(acc, mult[:, None], shift[:, None], layer.out_bits[:, None]), layer.out_steps


def _bias_int(bias: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Bias in accumulator units, ``round_haz(b_f / unit_i)``. (N, F_out) int64."""
    return round_half_away(bias[None, :] / unit[:, None]).astype(np.int64)


def gcn_layer_reference(layer: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, exact_constants: bool = True
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Float64 fake-quant forward of one layer; same return convention as :func:`gcn_layer_int`.

    ``exact_constants=True`` uses the true GCN weights and bias; ``False`` snaps them to the integer path's grids.
    For the last layer ``out`` is the real-valued output (unit 1).
    """
    indptr, indices, weight = graph
    n = x_codes.shape[0]
    x = x_codes.astype(np.float64) * layer.x_steps[:, None]  # (N, F_in)
    w = layer.w_codes.astype(np.float64) * layer.w_steps[:, None]  # (F_out, F_in)
    xw = fake_quant(x @ w.T, layer.xw_steps[:, None], layer.xw_bits[:, None]) * layer.xw_steps[:, None]
    u_ref = layer.ref_scale
    if not exact_constants:  # c_e 2^-frac U / u_src: the coefficient the integer path really applies
        c = edge_coefficients(weight * layer.xw_steps[indices] / u_ref, layer.frac_bits)
        weight = c * 2.0**-layer.frac_bits * u_ref / layer.xw_steps[indices]
    dst = np.repeat(np.arange(n), np.diff(indptr))
    agg = np.zeros((n, xw.shape[1]))
    np.add.at(agg, dst, weight[:, None] * xw[indices])  # (N, F_out)
    unit = np.full(n, u_ref * 2.0**-layer.frac_bits)
    if layer.agg_steps is not None:
        agg = fake_quant(agg, layer.agg_steps[:, None], layer.agg_bits[:, None]) * layer.agg_steps[:, None]
        unit = layer.agg_steps * 2.0**-layer.frac_bits
    if layer.bias is not None:
        agg = agg + (layer.bias[None, :] if exact_constants else _bias_int(layer.bias, unit) * unit[:, None])
    if layer.relu:
        agg = np.maximum(agg, 0.0)
    if layer.out_steps is None:
        return agg, np.ones(n)
    return fake_quant(agg, layer.out_steps[:, None], layer.out_bits[:, None]).astype(np.int64), layer.out_steps


def gcn_forward_int(model: QuantizedGCN, edge_index: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Integer forward of the whole GCN. Returns (per-layer integer outputs, float64 logits (N, F_last))."""
    graph = gcn_graph(edge_index, model.x_codes.shape[0])
    h, outs = model.x_codes, []
    for layer in model.layers:
        h, unit = gcn_layer_int(layer, h, graph)
        outs.append(h)
    return outs, h * unit[:, None]


def gcn_forward_reference(model: QuantizedGCN, edge_index: np.ndarray, exact_constants: bool = True
                          ) -> tuple[list[np.ndarray], np.ndarray]:
    """Float64 fake-quant forward of the whole GCN (same return convention as :func:`gcn_forward_int`)."""
    graph = gcn_graph(edge_index, model.x_codes.shape[0])
    h, outs = model.x_codes, []
    for layer in model.layers:
        h, unit = gcn_layer_reference(layer, h, graph, exact_constants)
        outs.append(h)
    return outs, h * unit[:, None]


__all__ = ["QuantizedGCN", "QuantizedGCNLayer", "fake_quant", "gcn_forward_int", "gcn_forward_reference",
           "gcn_graph", "gcn_layer_int", "gcn_layer_reference", "round_half_away"]
