"""Integer-only forward of a quantized GraphSAGE (mean aggregation) and its float64 fake-quant twin.

One layer of :class:`gnn.conv.SAGEConv` as A2Q quantizes it (``quant.qat.plan``),
``X' = relu(q_w(W_n) q_agg(mean_j q_in(X)_j) + q_w(W_r) q_in(X)_i + b)``, in integers. Widths and the rounding rule
are those of ``quant/FIXED_POINT.md`` (section "GraphSAGE"):

1. Neighbour mean with fixed-point per-edge coefficients ``c_ij = round(s_j / (deg_i U) 2^frac_bits)``: the
   coefficient absorbs the mean's ``1 / deg_i`` and the source's input step ``s_j``, with ``U = 2^ceil(log2 max_j
   s_j)`` a per-layer power of two, so ``psum_i = sum_j c_ij x_j`` has the unit ``U 2^-frac_bits`` and is bounded by
   ``2^frac_bits qmax`` whatever the degree. Partial sums saturate at ``psum_bits``.
2. Requant of the mean to the aggregate's codes (per-node step ``g_i``, bits ``a_i``): multiplier ``U 2^-frac / g_i``.
3. Two integer products, each accumulated in int64 and saturated to 32 bits: ``acc_n = agg_codes @ Wn_codes^T``
   (real value ``g_i t^n_f acc_n``) and ``acc_r = x_codes @ Wr_codes^T`` (real value ``s_i t^r_f acc_r``).
4. Both are rescaled to one output accumulator of unit ``v_i`` (``s'_i 2^-frac_bits``: the next layer's input step
   over ``2^frac_bits``; the last layer: ``2^-frac_bits``) with per-(node, channel) multipliers, summed with the bias
   ``round(b_f / v_i)``, saturating at 32 bits; ReLU; then ``out = round(acc 2^-frac_bits)`` clamped to the next
   layer's per-node bits, or, for the last layer, logits ``acc * v``.

:func:`sage_layer_reference` is the same layer in float64 with fake-quant. With ``exact_constants=False`` it uses the
integer path's snapped mean coefficients and bias; it then equals the integer path exactly when every step is a power
of two, the rescale factors ``g_i t_f / v_i`` are integers and no register saturates. With the true constants the
codes agree within one step.

Converting a trained model (``gnn.models.GNN`` with ``arch="sage"`` quantized by ``quant.qat.api``) is
:func:`quant.archs.sage.convert.to_quantized_sage`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant import integer as qi
from quant.formats import fixed_point as fxp


@dataclass(frozen=True, kw_only=True)
class QuantizedSAGELayer:
    """Integer parameters of one GraphSAGE layer. Shapes: N nodes, F_in -> F_out; steps float64 > 0, bits int.

    x_steps, x_bits (N,): input codes (per node). agg_steps, agg_bits (N,): neighbour-mean quantizer (per node).
    wn_codes, wr_codes (F_out, F_in) int8 with per-output-channel steps wn_steps, wr_steps (F_out,): the neighbour
    and root weights, ``w_bits`` wide. bias (F_out,) or None. out_steps, out_bits (N,) or None: the next layer's
    input quantizer (None = last layer, returns logits).
    """

    x_steps: np.ndarray
    x_bits: np.ndarray
    agg_steps: np.ndarray
    agg_bits: np.ndarray
    wn_codes: np.ndarray
    wn_steps: np.ndarray
    wr_codes: np.ndarray
    wr_steps: np.ndarray
    w_bits: int = 4
    bias: np.ndarray | None = None
    out_steps: np.ndarray | None = None
    out_bits: np.ndarray | None = None
    relu: bool = True
    frac_bits: int = 14
    psum_bits: int = 32

    def __post_init__(self) -> None:
        qi.normalise_dtypes(self, ("x_steps", "agg_steps", "wn_steps", "wr_steps", "bias", "out_steps"),
                         ("x_bits", "agg_bits", "out_bits"))
        for name in ("wn_codes", "wr_codes"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int8))
        n = self.x_steps.shape[0]
        f_out, f_in = self.wn_codes.shape
        qi.check_layer_fields(
            "QuantizedSAGELayer",
            [("x_bits", self.x_bits, (n,)), ("agg_steps", self.agg_steps, (n,)), ("agg_bits", self.agg_bits, (n,)),
             ("wr_codes", self.wr_codes, (f_out, f_in)), ("wn_steps", self.wn_steps, (f_out,)),
             ("wr_steps", self.wr_steps, (f_out,)), ("bias", self.bias, (f_out,)), ("out_steps", self.out_steps, (n,)),
             ("out_bits", self.out_bits, (n,))],
            [self.x_steps, self.agg_steps, self.wn_steps, self.wr_steps, self.out_steps],
            {"wn_codes": self.wn_codes, "wr_codes": self.wr_codes}, self.w_bits, self.psum_bits)
        if (self.out_steps is None) != (self.out_bits is None):
            raise ValueError("QuantizedSAGELayer: give out_steps with out_bits")
        if not 0 <= self.frac_bits <= 24:
            raise ValueError(f"QuantizedSAGELayer: frac_bits={self.frac_bits} must lie in 0..24")

    @property
    def ref_scale(self) -> float:
        """``U``: the power of two >= every input step; the mean's psum unit is ``U 2^-frac_bits``."""
        return float(2.0 ** np.ceil(np.log2(self.x_steps.max())))

    def out_unit(self) -> np.ndarray:
        """Real value of one output-accumulator LSB, (N, 1): ``s'_i 2^-frac_bits``, or ``2^-frac_bits`` (last)."""
        base = self.out_steps if self.out_steps is not None else np.ones(self.x_steps.shape[0])
        return base[:, None] * 2.0**-self.frac_bits


class QuantizedSAGE(qi.QuantizedModel):
    """A SAGE integer model: ``x_codes`` and a tuple of :class:`QuantizedSAGELayer` (see ``QuantizedModel``)."""


def sage_graph(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """In-edges as given (no self loops added, duplicates counted, as PyG's mean) in destination-major CSR.

    Returns indptr (N+1,), indices (E,) sources, weight (E,) float64 = ``1 / deg_i`` of each slot's destination.
    """
    indptr, indices, _ = fxp.csr_from_edge_index(np.asarray(edge_index, dtype=np.int64), num_nodes)
    deg = np.diff(indptr)  # (N,)
    weight = np.repeat(1.0 / np.maximum(deg, 1), deg)
    return indptr, indices, weight


@dataclass(frozen=True, kw_only=True)
class SAGEConstants:
    """Every integer constant one layer applies. coef (E,) int64 (CSR slot order); agg_mult/agg_shift (N, 1);
    neigh_mult/neigh_shift and root_mult/root_shift (N, F_out); bias_int (N, F_out) or None; out_mult/out_shift
    scalars; unit (N, 1) float64: real value of one output-accumulator LSB."""

    coef: np.ndarray
    agg_mult: np.ndarray
    agg_shift: np.ndarray
    neigh_mult: np.ndarray
    neigh_shift: np.ndarray
    root_mult: np.ndarray
    root_shift: np.ndarray
    bias_int: np.ndarray | None
    out_mult: int
    out_shift: int
    unit: np.ndarray


def sage_constants(layer: QuantizedSAGELayer, graph: tuple) -> SAGEConstants:
    """Edge coefficients, requantization multipliers/shifts and the integer bias of ``layer`` on ``graph``."""
    _, indices, weight = graph
    u = layer.ref_scale
    coef = fxp.edge_coefficients(weight * layer.x_steps[indices] / u, layer.frac_bits)  # (E,)
    agg_mult, agg_shift = fxp.quantize_multiplier(u * 2.0**-layer.frac_bits / layer.agg_steps[:, None])
    unit = layer.out_unit()  # (N, 1)
    neigh_mult, neigh_shift = fxp.quantize_multiplier(layer.agg_steps[:, None] * layer.wn_steps[None, :] / unit)
    root_mult, root_shift = fxp.quantize_multiplier(layer.x_steps[:, None] * layer.wr_steps[None, :] / unit)
    out_mult, out_shift = fxp.quantize_multiplier(2.0**-layer.frac_bits)
    return SAGEConstants(coef=coef, agg_mult=agg_mult, agg_shift=agg_shift, neigh_mult=neigh_mult,
                         neigh_shift=neigh_shift, root_mult=root_mult, root_shift=root_shift,
                         bias_int=None if layer.bias is None else qi.bias_in_units(layer.bias, unit),
                         out_mult=out_mult, out_shift=out_shift, unit=unit)


def sage_layer_trace(layer: QuantizedSAGELayer, x_codes: np.ndarray, graph: tuple, on_overflow: str = "saturate",
                     constants: SAGEConstants | None = None) -> dict[str, np.ndarray]:
    """Integer forward of one layer with its intermediates. graph = :func:`sage_graph` output.

    Returns ``{"psum": (N, F_in) mean partial sums, "agg": (N, F_in) aggregate codes, "acc": (N, F_out) output
    accumulator after bias and ReLU, "out": next-layer codes or, for the last layer, ``acc``, "unit": real value of
    one ``out`` LSB, (N, 1)}``.
    """
    indptr, indices, _ = graph
    k = constants if constants is not None else sage_constants(layer, graph)
    qi.check_codes(x_codes, layer.x_bits, "sage_layer_int: x_codes")
    psum = fxp.aggregate_int(indptr, indices, x_codes, k.coef, layer.psum_bits, on_overflow)  # unit U 2^-frac
    agg = fxp.requantize(psum, k.agg_mult, k.agg_shift, layer.agg_bits[:, None])  # (N, F_in)
    acc_n = fxp.saturate(qi.int_matmul(agg, layer.wn_codes), qi.ACC_BITS)  # (N, F_out), unit g_i t^n_f
    acc_r = fxp.saturate(qi.int_matmul(x_codes, layer.wr_codes), qi.ACC_BITS)  # (N, F_out), unit s_i t^r_f
    acc = (fxp.requantize(acc_n, k.neigh_mult, k.neigh_shift, qi.ACC_BITS, on_overflow=on_overflow)
           + fxp.requantize(acc_r, k.root_mult, k.root_shift, qi.ACC_BITS, on_overflow=on_overflow))  # unit v_i
    if k.bias_int is not None:
        acc = acc + k.bias_int
    acc = fxp.saturate(acc, qi.ACC_BITS)
    if layer.relu:
        acc = np.maximum(acc, 0)
    if layer.out_steps is None:
        return {"psum": psum, "agg": agg, "acc": acc, "out": acc, "unit": k.unit}
    # clamping codes is the quantizer's clip
    out = fxp.requantize(acc, k.out_mult, k.out_shift, layer.out_bits[:, None])
    return {"psum": psum, "agg": agg, "acc": acc, "out": out, "unit": layer.out_steps[:, None]}


def sage_layer_reference(layer: QuantizedSAGELayer, x_codes: np.ndarray, graph: tuple, exact_constants: bool = True
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Float64 fake-quant forward of one layer: ``(next-layer codes, (N, 1) steps)`` or, for the last layer,
    ``(real logits, ones)``. ``exact_constants=False`` snaps the mean coefficients and the bias to the integer
    path's grids."""
    indptr, indices, weight = graph
    n = x_codes.shape[0]
    x = x_codes.astype(np.float64) * layer.x_steps[:, None]  # (N, F_in)
    if not exact_constants:  # the coefficient the integer path applies, as a real edge weight
        u = layer.ref_scale
        c = fxp.edge_coefficients(weight * layer.x_steps[indices] / u, layer.frac_bits) * 2.0**-layer.frac_bits
        weight = c * u / layer.x_steps[indices]
    dst = np.repeat(np.arange(n), np.diff(indptr))
    mean = np.zeros_like(x)
    np.add.at(mean, dst, weight[:, None] * x[indices])  # (N, F_in)
    agg = qi.fake_quant(mean, layer.agg_steps[:, None], layer.agg_bits[:, None]) * layer.agg_steps[:, None]
    wn = layer.wn_codes.astype(np.float64) * layer.wn_steps[:, None]  # (F_out, F_in)
    wr = layer.wr_codes.astype(np.float64) * layer.wr_steps[:, None]
    h = agg @ wn.T + x @ wr.T  # (N, F_out)
    last = layer.out_steps is None
    return qi.reference_output(h, layer.bias, layer.out_unit(), exact_constants, layer.relu,
                               None if last else layer.out_steps[:, None], None if last else layer.out_bits[:, None])


GOLDEN = qi.GoldenForward(graph=sage_graph, trace=sage_layer_trace, reference=sage_layer_reference)
sage_forward_int = GOLDEN.forward_int  # (model, edge_index, on_overflow="saturate") -> (outputs, logits)
sage_forward_reference = GOLDEN.forward_reference  # (model, edge_index, exact_constants=True): float64 twin


__all__ = ["QuantizedSAGE", "QuantizedSAGELayer", "SAGEConstants", "sage_constants", "sage_forward_int",
           "sage_forward_reference", "sage_graph", "sage_layer_reference", "sage_layer_trace"]
