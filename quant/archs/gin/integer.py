"""Integer-only forward of a quantized GIN (node task) and its float64 fake-quant twin.

One layer of :class:`gnn.conv.GINConv` with the MLP of :func:`gnn.conv.gin.gin_mlp` as A2Q quantizes it with
``quantize_mlp_hidden`` (``quant.qat.plan``)::

    h = q_agg((1 + eps) x_i + sum_j x_j)          x = q_in(X): per channel (A2Q's GIN) or per node
    z = relu(BN(q_w(W1) h + b1))                   BatchNorm in eval mode: an affine map per hidden channel
    X' = relu(q_w(W2) q_hid(z) + b2)               (the model's activation; none after the last layer)

in integers, with the widths and the rounding rule of ``quant/FIXED_POINT.md`` (section "GIN"):

1. Sum with fixed-point per-edge coefficients over the in-edges plus one self loop per node (CSR slot order: a
   row's in-edges as given, then the self loop). ``w_e`` is 1 for an in-edge and ``1 + eps`` for the self loop.
   Per-channel input steps ``s_f``: codes of a channel share the unit, ``c_e = round(w_e 2^frac)``, psum unit
   ``s_f 2^-frac`` (1, F_in). Per-node input steps ``s_j`` (the first layer's FP32 features): the coefficient also
   absorbs the source step, ``c_e = round(w_e s_src / U 2^frac)`` with ``U = 2^ceil(log2 max s)``, psum unit
   ``U 2^-frac``. Partial sums saturate at ``psum_bits``.
2. Requant to the aggregate's per-node codes (step ``g_i``).
3. ``acc1 = agg @ W1'^T`` (int64, saturated to 32 bits) where ``W1'`` is ``W1``'s codes with the sign of the
   batch norm's scale ``alpha_f = gamma_f / sqrt(var_f + eps_bn)`` folded in (codes are symmetric, so negating a
   row is exact); real value ``g_i t1_f |alpha_f| acc1``.
4. Rescale to the hidden accumulator of unit ``v_i = h_i 2^-fh`` (``h_i``: the hidden quantizer's per-node step;
   ``fh = frac_bits`` for hidden codes of up to 8 bits, ``frac_bits - 8`` for the 16-bit fixed point below) with
   per-(node, channel) multipliers ``g_i t1_f |alpha_f| / v_i``; add the folded bias
   ``round((alpha_f b1_f + beta_f - alpha_f mu_f) / v_i)``; saturate at 32 bits; ReLU; hidden codes
   ``round(acc 2^-fh)`` clamped to the hidden bits.
5. ``acc2 = hid @ W2^T`` (int64, saturated); rescale to the output accumulator of unit ``o 2^-frac`` (``o``: the
   next layer's input step, per channel (1, F_out) or per node (N, 1); the last layer: 1) with multipliers
   ``h_i t2_f / (o 2^-frac)``; add ``round(b2_f / (o 2^-frac))``; saturate; ReLU unless last; next codes
   ``round(acc 2^-frac)`` clamped, or logits ``acc 2^-frac`` for the last layer.

A model trained without the hidden quantizer (the grid's GIN recipe) has a full-precision hidden activation; its
integer layer is the same with ``hid_bits = HIDDEN_FIXED_BITS`` (16, signed) and per-node steps the converter
calibrates on the model's own hidden activation (``quant.archs.gin.convert.fixed_point_hidden_steps``): step 5 then
requantizes to 16-bit fixed point instead of a learned low-bit code.

:func:`gin_layer_reference` is the same layer in float64 with fake-quant. With ``exact_constants=False`` it uses the
integer path's snapped coefficients and biases; it then equals the integer path exactly when every step, ``|alpha|``
and ``1 + eps`` are powers of two (so every rescale factor is one) and no register saturates. With the true
constants the codes agree within one step.

Converting a trained model is :func:`quant.archs.gin.convert.to_quantized_gin`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant import integer as qi
from quant.formats import fixed_point as fxp

STEP_SCHEMES = ("node", "channel")
HIDDEN_FIXED_BITS = 16  # signed width of the hidden activation of a GIN trained without the hidden quantizer


def as_2d(values: np.ndarray, scheme: str) -> np.ndarray:
    """Per-node (N,) -> (N, 1); per-channel (F,) -> (1, F): broadcastable against an (N, F) tensor."""
    return values[:, None] if scheme == "node" else values[None, :]


@dataclass(frozen=True, kw_only=True)
class QuantizedGINLayer:
    """Integer parameters of one GIN layer. N nodes, F_in -> H (MLP hidden) -> F_out; steps float64 > 0, bits int.

    x_steps, x_bits: input codes' steps and signed bitwidths, (N,) for ``x_scheme="node"`` or (F_in,) for
    ``"channel"``. eps: GIN's epsilon (``1 + eps >= 0``). agg_steps, agg_bits (N,): the summed input's quantizer.
    w1_codes (H, F_in) int8, w1_steps (H,): the MLP's first weight. bn_scale (H,): the eval batch norm's
    ``alpha = gamma / sqrt(var + eps_bn)`` (any sign; ones without a norm). b1 (H,) or None: the bias after the norm,
    ``alpha (b1 - mu) + beta``. hid_steps, hid_bits (N,): the hidden quantizer (or the
    ``HIDDEN_FIXED_BITS`` fixed point of a model without one). w2_codes (F_out, H), w2_steps
    (F_out,), b2 (F_out,) or None: the second linear map. out_steps, out_bits: the next layer's input quantizer,
    (N,) or (F_out,) as ``out_scheme``; None for the last layer (logits).
    """

    x_steps: np.ndarray
    x_bits: np.ndarray
    x_scheme: str = "channel"
    eps: float = 0.0
    agg_steps: np.ndarray
    agg_bits: np.ndarray
    w1_codes: np.ndarray
    w1_steps: np.ndarray
    bn_scale: np.ndarray
    b1: np.ndarray | None = None
    hid_steps: np.ndarray
    hid_bits: np.ndarray
    w2_codes: np.ndarray
    w2_steps: np.ndarray
    b2: np.ndarray | None = None
    w_bits: int = 4
    out_steps: np.ndarray | None = None
    out_bits: np.ndarray | None = None
    out_scheme: str = "channel"
    relu: bool = True
    frac_bits: int = 14
    psum_bits: int = 32

    def __post_init__(self) -> None:
        qi.normalise_dtypes(self, ("x_steps", "agg_steps", "w1_steps", "bn_scale", "b1", "hid_steps", "w2_steps", "b2",
                                "out_steps"), ("x_bits", "agg_bits", "hid_bits", "out_bits"))
        for name in ("w1_codes", "w2_codes"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int8))
        for name in ("x_scheme", "out_scheme"):
            if getattr(self, name) not in STEP_SCHEMES:
                raise ValueError(f"QuantizedGINLayer: {name}={getattr(self, name)!r}; valid: {', '.join(STEP_SCHEMES)}")
        n = self.agg_steps.shape[0]
        hidden, f_in = self.w1_codes.shape
        f_out = self.w2_codes.shape[0]
        x_len = n if self.x_scheme == "node" else f_in
        out_len = n if self.out_scheme == "node" else f_out
        qi.check_layer_fields(
            "QuantizedGINLayer",
            [("x_steps", self.x_steps, (x_len,)), ("x_bits", self.x_bits, (x_len,)), ("agg_bits", self.agg_bits, (n,)),
             ("w1_steps", self.w1_steps, (hidden,)), ("bn_scale", self.bn_scale, (hidden,)),
             ("b1", self.b1, (hidden,)), ("hid_steps", self.hid_steps, (n,)), ("hid_bits", self.hid_bits, (n,)),
             ("w2_codes", self.w2_codes, (f_out, hidden)), ("w2_steps", self.w2_steps, (f_out,)),
             ("b2", self.b2, (f_out,)), ("out_steps", self.out_steps, (out_len,)),
             ("out_bits", self.out_bits, (out_len,))],
            [self.x_steps, self.agg_steps, self.w1_steps, self.hid_steps, self.w2_steps, self.out_steps],
            {"w1_codes": self.w1_codes, "w2_codes": self.w2_codes}, self.w_bits, self.psum_bits)
        if (self.out_steps is None) != (self.out_bits is None):
            raise ValueError("QuantizedGINLayer: give out_steps with out_bits")
        if not 0 <= self.frac_bits <= 24:
            raise ValueError(f"QuantizedGINLayer: frac_bits={self.frac_bits} must lie in 0..24")
        if not (np.isfinite(self.eps) and 1.0 + self.eps >= 0):
            raise ValueError(f"QuantizedGINLayer: 1 + eps = {1.0 + self.eps:g}; the self-loop coefficient must be a "
                             "finite value >= 0 (unsigned fixed point)")
        if not np.all(np.isfinite(self.bn_scale)):
            raise ValueError("QuantizedGINLayer: bn_scale must be finite")

    @property
    def ref_scale(self) -> float:
        """``U``: the power of two >= every per-node input step (node scheme; 1 for the channel scheme)."""
        return float(2.0 ** np.ceil(np.log2(self.x_steps.max()))) if self.x_scheme == "node" else 1.0

    def sum_unit(self) -> np.ndarray:
        """Real value of one partial-sum LSB: ``U 2^-frac`` (1, 1) or ``s_f 2^-frac`` (1, F_in)."""
        base = np.array([[self.ref_scale]]) if self.x_scheme == "node" else self.x_steps[None, :]
        return base * 2.0**-self.frac_bits

    @property
    def hidden_frac_bits(self) -> int:
        """Fractional bits of the hidden accumulator: ``frac_bits`` for hidden codes of up to 8 bits, one fewer per
        bit above 8 (16-bit fixed point: ``frac_bits - 8``), so a hidden code plus its fraction keeps the headroom
        of an 8-bit code (``8 + frac_bits`` bits) in the 32-bit register; clamped at 0."""
        return max(0, self.frac_bits - max(0, int(self.hid_bits.max(initial=0)) - 8))

    def hidden_unit(self) -> np.ndarray:
        """Real value of one hidden-accumulator LSB, (N, 1): ``h_i 2^-hidden_frac_bits``."""
        return self.hid_steps[:, None] * 2.0**-self.hidden_frac_bits

    def out_unit(self) -> np.ndarray:
        """Real value of one output-accumulator LSB: ``o 2^-frac``, (N, 1) or (1, F_out); the last layer (1, 1)."""
        base = np.ones((1, 1)) if self.out_steps is None else as_2d(self.out_steps, self.out_scheme)
        return base * 2.0**-self.frac_bits

    def edge_weights(self, self_loop: np.ndarray) -> np.ndarray:
        """Real per-slot weight: 1 for an in-edge, ``1 + eps`` for the self loop. (E',) float64."""
        return np.where(self_loop, 1.0 + self.eps, 1.0)

    def coef_weights(self, graph: tuple) -> np.ndarray:
        """What the fixed-point coefficient encodes, ``w_e`` (channel) or ``w_e s_src / U`` (node). (E',)."""
        _, indices, self_loop = graph
        w = self.edge_weights(self_loop)
        return w * self.x_steps[indices] / self.ref_scale if self.x_scheme == "node" else w

    def signed_w1(self) -> np.ndarray:
        """W1's codes with the sign of the batch norm's scale folded in. (H, F_in) int64."""
        return np.where(self.bn_scale[:, None] < 0, -1, 1) * self.w1_codes.astype(np.int64)


class QuantizedGIN(qi.QuantizedModel):
    """A GIN integer model: ``x_codes`` and a tuple of :class:`QuantizedGINLayer` (see ``QuantizedModel``)."""


def gin_graph(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """In-edges as given (duplicates counted, as PyG's sum) plus one self loop per node, appended so that the stable
    destination-major CSR puts it last in its row. Returns indptr (N+1,), indices (E + N,) sources, self_loop
    (E + N,) bool."""
    edge_index = np.asarray(edge_index, dtype=np.int64)
    loops = np.arange(num_nodes, dtype=np.int64)
    full = np.concatenate([edge_index, np.stack([loops, loops])], axis=1)
    flag = np.concatenate([np.zeros(edge_index.shape[1], dtype=bool), np.ones(num_nodes, dtype=bool)])
    indptr, indices, order = fxp.csr_from_edge_index(full, num_nodes)
    return indptr, indices, flag[order]


@dataclass(frozen=True, kw_only=True)
class GINConstants:
    """Every integer constant one layer applies. coef (E',) int64 (CSR slot order); agg_mult/agg_shift (N, 1) or
    (N, F_in); w1_signed (H, F_in) int8; mid_mult/mid_shift (N, H); bias1_int (N, H) or None; hid_mult/hid_shift
    scalars; lin2_mult/lin2_shift (N, F_out); bias2_int broadcastable to (N, F_out) or None; out_mult/out_shift
    scalars; unit: real value of one output LSB ((N, 1) or (1, F_out) next-layer steps; last layer (1, 1))."""

    coef: np.ndarray
    agg_mult: np.ndarray
    agg_shift: np.ndarray
    w1_signed: np.ndarray
    mid_mult: np.ndarray
    mid_shift: np.ndarray
    bias1_int: np.ndarray | None
    hid_mult: int
    hid_shift: int
    lin2_mult: np.ndarray
    lin2_shift: np.ndarray
    bias2_int: np.ndarray | None
    out_mult: int
    out_shift: int
    unit: np.ndarray


def gin_constants(layer: QuantizedGINLayer, graph: tuple) -> GINConstants:
    """Edge coefficients, requantization multipliers/shifts and integer biases of ``layer`` on ``graph``."""
    coef = fxp.edge_coefficients(layer.coef_weights(graph), layer.frac_bits)  # (E',)
    agg_mult, agg_shift = fxp.quantize_multiplier(layer.sum_unit() / layer.agg_steps[:, None])  # (N, 1) or (N, F_in)
    v = layer.hidden_unit()  # (N, 1)
    mid_mult, mid_shift = fxp.quantize_multiplier(
        layer.agg_steps[:, None] * (layer.w1_steps * np.abs(layer.bn_scale))[None, :] / v)
    o = layer.out_unit()
    lin2_mult, lin2_shift = fxp.quantize_multiplier(layer.hid_steps[:, None] * layer.w2_steps[None, :] / o)
    hid_mult, hid_shift = fxp.quantize_multiplier(2.0**-layer.hidden_frac_bits)
    out_mult, out_shift = fxp.quantize_multiplier(2.0**-layer.frac_bits)
    return GINConstants(coef=coef, agg_mult=agg_mult, agg_shift=agg_shift,
                        w1_signed=layer.signed_w1().astype(np.int8), mid_mult=mid_mult, mid_shift=mid_shift,
                        bias1_int=None if layer.b1 is None else qi.bias_in_units(layer.b1, v), hid_mult=hid_mult,
                        hid_shift=hid_shift, lin2_mult=lin2_mult, lin2_shift=lin2_shift,
                        bias2_int=None if layer.b2 is None else qi.bias_in_units(layer.b2, o),
                        out_mult=out_mult, out_shift=out_shift,
                        unit=o * 2.0**layer.frac_bits if layer.out_steps is not None else o)


def _check_input(layer: QuantizedGINLayer, x_codes: np.ndarray) -> None:
    if np.any(np.abs(x_codes.astype(np.int64)) > fxp.code_limit(as_2d(layer.x_bits, layer.x_scheme))):
        raise ValueError(f"gin_layer_trace: x_codes exceed their per-{layer.x_scheme} bitwidths")


def gin_layer_trace(layer: QuantizedGINLayer, x_codes: np.ndarray, graph: tuple, on_overflow: str = "saturate",
                    constants: GINConstants | None = None) -> dict[str, np.ndarray]:
    """Integer forward of one layer with its intermediates. graph = :func:`gin_graph` output. ``on_overflow="raise"``
    reports a saturating register (partial sum, 32-bit accumulators); code clamps are the quantizers' clipping.

    Returns ``{"psum": (N, F_in) partial sums, "agg": (N, F_in) aggregate codes, "mid": (N, H) hidden accumulator
    after bias and ReLU, "hidden": (N, H) hidden codes, "acc": (N, F_out) output accumulator after bias (and ReLU),
    "acc_unit": real value of one ``acc`` LSB, "out": next-layer codes or, for the last layer, ``acc``, "unit": real
    value of one ``out`` LSB}``.
    """
    indptr, indices, _ = graph
    k = constants if constants is not None else gin_constants(layer, graph)
    _check_input(layer, x_codes)
    psum = fxp.aggregate_int(indptr, indices, x_codes, k.coef, layer.psum_bits, on_overflow)  # unit layer.sum_unit()
    agg = fxp.requantize(psum, k.agg_mult, k.agg_shift, layer.agg_bits[:, None])  # (N, F_in)
    acc1 = fxp.saturate(qi.int_matmul(agg, k.w1_signed), qi.ACC_BITS)  # (N, H), unit g_i t1_f |alpha_f|
    mid = fxp.requantize(acc1, k.mid_mult, k.mid_shift, qi.ACC_BITS, on_overflow=on_overflow)  # unit h_i 2^-frac
    if k.bias1_int is not None:
        mid = mid + k.bias1_int
    mid = np.maximum(fxp.saturate(mid, qi.ACC_BITS), 0)  # the MLP's ReLU
    # clamping codes is the quantizer's clip
    hidden = fxp.requantize(mid, k.hid_mult, k.hid_shift, layer.hid_bits[:, None])
    acc2 = fxp.saturate(qi.int_matmul(hidden, layer.w2_codes), qi.ACC_BITS)  # (N, F_out), unit h_i t2_f
    acc = fxp.requantize(acc2, k.lin2_mult, k.lin2_shift, qi.ACC_BITS, on_overflow=on_overflow)  # unit o 2^-frac
    if k.bias2_int is not None:
        acc = acc + k.bias2_int
    acc = fxp.saturate(acc, qi.ACC_BITS)
    if layer.relu:
        acc = np.maximum(acc, 0)
    trace = {"psum": psum, "agg": agg, "mid": mid, "hidden": hidden, "acc": acc, "acc_unit": layer.out_unit()}
    if layer.out_steps is None:
        return {**trace, "out": acc, "unit": k.unit}
    out = fxp.requantize(acc, k.out_mult, k.out_shift, as_2d(layer.out_bits, layer.out_scheme))
    return {**trace, "out": out, "unit": k.unit}


def gin_layer_reference(layer: QuantizedGINLayer, x_codes: np.ndarray, graph: tuple, exact_constants: bool = True
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Float64 fake-quant forward of one layer: ``(next-layer codes, steps broadcastable to them)`` or, for the last
    layer, ``(real logits, ones)``. ``exact_constants=False`` snaps the coefficients and both biases to the integer
    path's grids."""
    indptr, indices, self_loop = graph
    n = x_codes.shape[0]
    x = x_codes.astype(np.float64) * as_2d(layer.x_steps, layer.x_scheme)  # (N, F_in)
    weight = layer.edge_weights(self_loop)
    if not exact_constants:  # the coefficient the integer path applies, as a real edge weight
        snapped = fxp.edge_coefficients(layer.coef_weights(graph), layer.frac_bits) * 2.0**-layer.frac_bits
        weight = snapped * layer.ref_scale / layer.x_steps[indices] if layer.x_scheme == "node" else snapped
    dst = np.repeat(np.arange(n), np.diff(indptr))
    total = np.zeros_like(x)
    np.add.at(total, dst, weight[:, None] * x[indices])  # (N, F_in)
    g = layer.agg_steps[:, None]
    agg = qi.fake_quant(total, g, layer.agg_bits[:, None]) * g
    w1 = layer.w1_codes.astype(np.float64) * layer.w1_steps[:, None]  # (H, F_in)
    z = (agg @ w1.T) * layer.bn_scale[None, :]  # (N, H)
    if layer.b1 is not None:
        v = layer.hidden_unit()
        z = z + (layer.b1[None, :] if exact_constants else qi.bias_in_units(layer.b1, v) * v)
    hs = layer.hid_steps[:, None]
    hid = qi.fake_quant(np.maximum(z, 0.0), hs, layer.hid_bits[:, None]) * hs
    w2 = layer.w2_codes.astype(np.float64) * layer.w2_steps[:, None]  # (F_out, H)
    y = hid @ w2.T
    last = layer.out_steps is None
    return qi.reference_output(y, layer.b2, layer.out_unit(), exact_constants, layer.relu,
                               None if last else as_2d(layer.out_steps, layer.out_scheme),
                               None if last else as_2d(layer.out_bits, layer.out_scheme))


GOLDEN = qi.GoldenForward(graph=gin_graph, trace=gin_layer_trace, reference=gin_layer_reference)
gin_forward_int = GOLDEN.forward_int  # (model, edge_index, on_overflow="saturate") -> (outputs, logits)
gin_forward_reference = GOLDEN.forward_reference  # (model, edge_index, exact_constants=True): float64 twin


__all__ = ["HIDDEN_FIXED_BITS", "GINConstants", "QuantizedGIN", "QuantizedGINLayer", "as_2d", "gin_constants",
           "gin_forward_int", "gin_forward_reference", "gin_graph", "gin_layer_reference", "gin_layer_trace"]
