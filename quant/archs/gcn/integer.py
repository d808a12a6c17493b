"""Integer-only forward of a quantized GCN (the golden model of the accelerator) and its float64 fake-quant twin.

One layer of :class:`gnn.conv.GCNConv`, ``X' = relu(q_agg(Â q_xw(q_in(X) q_w(W)^T)) + b)``, in integers
(widths and rounding in ``quant/FIXED_POINT.md``):

1. ``acc = x_codes @ w_codes^T`` (int64, checked/saturated to 32 bits); real value ``s_j t_f acc[j, f]``.
2. XW requant to codes with step ``u`` and bitwidth ``xw_bits``, multiplier ``s_j t_f / u`` per (j, f). Two XW
   granularities (``xw_scheme``): ``"node"`` (step ``u_j`` per node) or ``"channel"`` (step ``u_f`` per output
   channel, what A2Q trains: ``quant.qat.a2q`` scheme ``"channel"``).
3. Aggregation with fixed-point per-edge coefficients, partial sums saturating at ``psum_bits``:

   * node scheme: ``c_e = round(w_e (u_src / U) 2^frac_bits)``, where ``w_e`` is the GCN weight ``1/sqrt(d_i d_j)``
     (self loops counted) and ``U = 2^ceil(log2 max_j u_j)`` is a per-layer power of two, so a coefficient also
     absorbs the source node's XW step and the sum of codes is well defined. psum unit ``U 2^-frac_bits``.
   * channel scheme: all codes of a channel share the step ``u_f``, so ``c_e = round(w_e 2^frac_bits)`` and the
     psum of channel f has the unit ``u_f 2^-frac_bits`` (a per-channel psum unit).
4. Optional ``q_aggregate`` requant (per-node step ``g_i``); the accumulator unit becomes ``g_i 2^-frac_bits``.
5. Bias in accumulator units ``round(b_f / unit)``, ReLU, requant to the next layer's codes (multiplier
   ``unit / s'_i``), or, for the last layer, dequantised logits ``acc * unit``.

``unit`` is a 2-D array broadcastable to (N, F_out): (N, 1) for per-node units, (1, F_out) for per-channel ones.

:func:`gcn_layer_reference` computes the same layer in float64 with fake-quant (A2Q's round-half-away-from-zero
quantizer). With ``exact_constants=False`` it uses the integer path's snapped normalisation and bias, and then
equals the integer path exactly when all scales are powers of two (and no partial sum saturates); with the true
normalisation and bias the codes agree within one step.

Converting a trained model (``gnn.models.GNN`` with ``arch="gcn"`` quantized by ``quant.qat.api``) is
:func:`quant.archs.gcn.convert.to_quantized_gcn`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant import integer as qi
from quant.formats import fixed_point as fxp

XW_SCHEMES = ("node", "channel")


@dataclass(frozen=True, kw_only=True)
class QuantizedGCNLayer:
    """Integer parameters of one GCN layer. Shapes: N nodes, F_in -> F_out; steps float64 > 0, bits int.

    x_steps (N,), x_bits (N,): input codes' per-node steps and bitwidths. w_codes (F_out, F_in) int8,
    w_steps (F_out,), w_bits: weight codes per output channel. xw_steps, xw_bits: XW quantizer, (N,) for
    ``xw_scheme="node"``, (F_out,) for ``xw_scheme="channel"``.
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
    xw_scheme: str = "node"

    def __post_init__(self) -> None:
        qi.normalise_dtypes(self, ("x_steps", "w_steps", "xw_steps", "agg_steps", "bias", "out_steps"),
                         ("x_bits", "xw_bits", "agg_bits", "out_bits"))
        object.__setattr__(self, "w_codes", np.asarray(self.w_codes, dtype=np.int8))
        if self.xw_scheme not in XW_SCHEMES:
            raise ValueError(f"QuantizedGCNLayer: unknown xw_scheme {self.xw_scheme!r}; valid: "
                             f"{', '.join(XW_SCHEMES)}")
        n = self.x_steps.shape[0]
        f_out, _ = self.w_codes.shape
        xw_len = n if self.xw_scheme == "node" else f_out
        qi.check_layer_fields(
            "QuantizedGCNLayer",
            [("x_bits", self.x_bits, (n,)), ("w_steps", self.w_steps, (f_out,)),
             ("xw_steps", self.xw_steps, (xw_len,)), ("xw_bits", self.xw_bits, (xw_len,)),
             ("agg_steps", self.agg_steps, (n,)), ("agg_bits", self.agg_bits, (n,)), ("bias", self.bias, (f_out,)),
             ("out_steps", self.out_steps, (n,)), ("out_bits", self.out_bits, (n,))],
            [self.x_steps, self.w_steps, self.xw_steps, self.agg_steps, self.out_steps], {"w_codes": self.w_codes},
            self.w_bits, self.psum_bits)
        if (self.agg_steps is None) != (self.agg_bits is None) or (self.out_steps is None) != (self.out_bits is None):
            raise ValueError("QuantizedGCNLayer: give agg_steps with agg_bits and out_steps with out_bits")

    @property
    def ref_scale(self) -> float:
        """``U``: the power of two >= every XW step; psum unit = ``U 2^-frac_bits`` (node scheme only)."""
        return float(2.0 ** np.ceil(np.log2(self.xw_steps.max())))

    def xw_grid(self) -> tuple[np.ndarray, np.ndarray]:
        """XW (step, bits) broadcastable to (N, F_out): (N, 1) per node or (1, F_out) per channel."""
        if self.xw_scheme == "node":
            return self.xw_steps[:, None], self.xw_bits[:, None]
        return self.xw_steps[None, :], self.xw_bits[None, :]

    def psum_unit(self) -> np.ndarray:
        """Real value of one psum LSB, broadcastable to (N, F_out): ``U 2^-frac`` (node) or ``u_f 2^-frac``."""
        if self.xw_scheme == "node":
            return np.full((self.x_steps.shape[0], 1), self.ref_scale * 2.0**-self.frac_bits)
        return self.xw_steps[None, :] * 2.0**-self.frac_bits

    def coef_weights(self, weight: np.ndarray, indices: np.ndarray) -> np.ndarray:
        """Real per-edge factor that :func:`quant.formats.fixed_point.edge_coefficients` turns into ``c_e``. (E',)."""
        if self.xw_scheme == "node":
            return weight * self.xw_steps[indices] / self.ref_scale
        return weight


class QuantizedGCN(qi.QuantizedModel):
    """A GCN integer model: ``x_codes`` and a tuple of :class:`QuantizedGCNLayer` (see ``QuantizedModel``)."""


def gcn_graph(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GCN edges (self loops replaced by one per node) in destination-major CSR with weights 1/sqrt(d_i d_j).

    Returns indptr (N+1,), indices (E',) sources, weight (E',) float64 (same values as ``gnn.ops.gcn_norm``).
    """
    src, dst = np.asarray(edge_index, dtype=np.int64)
    keep = src != dst
    loops = np.arange(num_nodes, dtype=np.int64)
    ei = np.stack([np.r_[src[keep], loops], np.r_[dst[keep], loops]])  # (2, E')
    deg = np.bincount(ei[1], minlength=num_nodes).astype(np.float64)
    indptr, indices, perm = fxp.csr_from_edge_index(ei, num_nodes)
    weight = 1.0 / np.sqrt(deg[indices] * deg[ei[1, perm]])
    return indptr, indices, weight


@dataclass(frozen=True, kw_only=True)
class LayerConstants:
    """Every integer constant one layer applies (what the accelerator is loaded with; exported as is).

    Shapes: xw_mult/xw_shift (N, F_out) int64; coef (E',) int64 (CSR slot order); agg_mult/agg_shift (N, F) or None;
    bias_int broadcastable to (N, F_out) int64 or None; out_mult/out_shift broadcastable to (N, F_out) or None;
    unit: real value of one output-accumulator LSB (N, 1) or (1, F_out) float64.
    """

    xw_mult: np.ndarray
    xw_shift: np.ndarray
    coef: np.ndarray
    agg_mult: np.ndarray | None
    agg_shift: np.ndarray | None
    bias_int: np.ndarray | None
    out_mult: np.ndarray | None
    out_shift: np.ndarray | None
    unit: np.ndarray


def layer_constants(layer: QuantizedGCNLayer, graph: tuple) -> LayerConstants:
    """Requantization multipliers/shifts, edge coefficients and the integer bias of ``layer`` on ``graph``."""
    _, indices, weight = graph
    xw_step, _ = layer.xw_grid()
    xw_mult, xw_shift = fxp.quantize_multiplier(layer.x_steps[:, None] * layer.w_steps[None, :] / xw_step)
    coef = fxp.edge_coefficients(layer.coef_weights(weight, indices), layer.frac_bits)  # (E',)
    unit = layer.psum_unit()
    agg_mult = agg_shift = out_mult = out_shift = bias_int = None
    if layer.agg_steps is not None:
        agg_mult, agg_shift = fxp.quantize_multiplier(unit / layer.agg_steps[:, None])
        unit = layer.agg_steps[:, None] * 2.0**-layer.frac_bits
    if layer.bias is not None:
        bias_int = qi.bias_in_units(layer.bias, unit)
    if layer.out_steps is not None:
        out_mult, out_shift = fxp.quantize_multiplier(unit / layer.out_steps[:, None])
    return LayerConstants(xw_mult=xw_mult, xw_shift=xw_shift, coef=coef, agg_mult=agg_mult, agg_shift=agg_shift,
                          bias_int=bias_int, out_mult=out_mult, out_shift=out_shift, unit=unit)


def gcn_layer_trace(layer: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, on_overflow: str = "saturate",
                    constants: LayerConstants | None = None) -> dict[str, np.ndarray]:
    """Integer forward of one layer with its intermediates. graph = :func:`gcn_graph` output.

    Returns ``{"xw": (N, F_out) XW codes, "psum": (N, F_out) aggregation partial sums, "acc": the output
    accumulator after bias (and ReLU), "acc_unit": real value of one ``acc`` LSB, "out": next-layer codes or,
    for the last layer, the 32-bit accumulator, "unit": real value of one ``out`` LSB (2-D, broadcastable)}``.
    For the next layer ``unit`` is ``out_steps[:, None]``.
    """
    indptr, indices, _ = graph
    k = constants if constants is not None else layer_constants(layer, graph)
    qi.check_codes(x_codes, layer.x_bits, "gcn_layer_int: x_codes")
    _, xw_bits = layer.xw_grid()
    acc = fxp.saturate(qi.int_matmul(x_codes, layer.w_codes), qi.ACC_BITS)  # (N, F_out)
    xw = fxp.requantize(acc, k.xw_mult, k.xw_shift, xw_bits)  # (N, F_out) XW codes
    psum = fxp.aggregate_int(indptr, indices, xw, k.coef, layer.psum_bits, on_overflow)  # unit: psum_unit()
    acc = psum
    if layer.agg_steps is not None:
        acc = fxp.requantize(acc, k.agg_mult, k.agg_shift, layer.agg_bits[:, None]) << layer.frac_bits
    if k.bias_int is not None:
        acc = fxp.saturate(acc + k.bias_int, qi.ACC_BITS)
    if layer.relu:
        acc = np.maximum(acc, 0)
    trace = {"xw": xw, "psum": psum, "acc": acc, "acc_unit": k.unit}
    if layer.out_steps is None:
        return {**trace, "out": acc, "unit": k.unit}
    out = fxp.requantize(acc, k.out_mult, k.out_shift, layer.out_bits[:, None])
    return {**trace, "out": out, "unit": layer.out_steps[:, None]}


def gcn_layer_int(layer: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, on_overflow: str = "saturate"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Integer forward of one layer. graph = :func:`gcn_graph` output.

    Returns ``(out, unit)``: out (N, F_out) int64 = next-layer codes, or for the last layer the 32-bit accumulator,
    whose real value is ``out * unit`` (unit float64, (N, 1) or (1, F_out)).
    """
    t = gcn_layer_trace(layer, x_codes, graph, on_overflow)
    return t["out"], t["unit"]


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
    xw_step, xw_bits = layer.xw_grid()
    xw = qi.fake_quant(x @ w.T, xw_step, xw_bits) * xw_step  # (N, F_out)
    if not exact_constants:  # the coefficient the integer path really applies, as a real edge weight
        c = fxp.edge_coefficients(layer.coef_weights(weight, indices), layer.frac_bits) * 2.0**-layer.frac_bits
        weight = c * layer.ref_scale / layer.xw_steps[indices] if layer.xw_scheme == "node" else c
    dst = np.repeat(np.arange(n), np.diff(indptr))
    agg = np.zeros((n, xw.shape[1]))
    np.add.at(agg, dst, weight[:, None] * xw[indices])  # (N, F_out)
    unit = layer.psum_unit()
    if layer.agg_steps is not None:
        agg = qi.fake_quant(agg, layer.agg_steps[:, None], layer.agg_bits[:, None]) * layer.agg_steps[:, None]
        unit = layer.agg_steps[:, None] * 2.0**-layer.frac_bits
    last = layer.out_steps is None
    return qi.reference_output(agg, layer.bias, unit, exact_constants, layer.relu,
                               None if last else layer.out_steps[:, None], None if last else layer.out_bits[:, None])


GOLDEN = qi.GoldenForward(graph=gcn_graph, trace=gcn_layer_trace, reference=gcn_layer_reference)
gcn_forward_int = GOLDEN.forward_int  # (model, edge_index, on_overflow="saturate") -> (outputs, logits)
gcn_forward_reference = GOLDEN.forward_reference  # (model, edge_index, exact_constants=True): float64 twin


