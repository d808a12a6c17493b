"""Integer-only forward of a quantized GAT (node task) and its float64 fake-quant twin.

One layer of :class:`gnn.conv.GATConv` as A2Q quantizes it (``quant.qat.plan``): per-node input codes (step ``s_i``),
per-output-channel weights ``t_f``, per-node XW codes (``u_i``), per-head attention vectors (``t^a_h``, one
quantizer for ``a_src`` and ``a_dst``) and per-head edge scores (``e_h``, quantized before the LeakyReLU); the
aggregate is not quantized; the model applies ELU between layers. In integers (``quant/FIXED_POINT.md``, "GAT"):

1. ``acc = x @ W^T`` (int64, saturated to 32 bits); XW codes ``requantize(acc, M(s_i t_f / u_i), xw_bits)``.
2. Attention logits per node and head, ``d_src = sum_c a_src[h, c] xw[j, h, c]`` (unit ``u_j t^a_h``) and ``d_dst``
   likewise, rescaled to the score's fixed point ``e_h 2^-frac`` (per (node, head) multipliers); per edge
   ``score = round((p_src[j] + p_dst[i]) 2^-frac)`` clamped to the score bits: the score code ``k_e``.
3. Softmax from a table: the LeakyReLU of a code is a function of the code, so with ``m_i`` the largest score code
   into node ``i`` the numerator is ``n_e = T_h[m_i, k_e] = round(exp(e_h (lrelu(k_e) - lrelu(m_i))) 2^exp_bits)``
   (``<= 2^exp_bits``, and exactly ``2^exp_bits`` on the maximum edge, so the denominator ``D_i = sum n_e`` is
   never 0). ``T_h`` has ``(2 qmax + 1)^2`` entries per head.
4. Aggregation coefficients, as for the GCN node scheme but data dependent: ``c_e = round(n_e R_src 2^frac /
   (D_i H' 2^ratio_bits))`` with ``R_j = round(u_j / U 2^ratio_bits)`` (``U = 2^ceil(log2 max u)``) and ``H'`` the
   number of heads averaged (1 when they are concatenated); one integer division per edge and head, rounding half
   up (all operands are >= 0). ``psum = sum_e c_e xw[src]`` per head, unit ``U 2^-frac``, saturating at
   ``psum_bits``; averaged heads add their partial sums.
5. ``acc = sat32(psum + round_haz(b_f / unit))``. Last layer: logits ``acc unit``. Hidden layers: ELU and the
   next layer's per-node codes at once: ``acc >= 0`` requantizes with ``M(unit / s'_i)``; ``acc < 0`` counts the
   thresholds ``T'_{i,k} = floor(ln(1 - (k - 1/2) s'_i) / unit)`` it does not exceed, ``code = -#{k : acc <=
   T'_{i,k}}`` (``k = 1..qmax_i``; ``(k - 1/2) s'_i >= 1`` is never reached since ELU > -1), which is
   ``round_haz((exp(acc unit) - 1) / s'_i)`` clamped, evaluated by comparisons only.

:func:`gat_layer_reference` is the same layer in float64 with fake-quant; the integer codes agree with it within
one step (the score, the coefficients and the ELU input are rounded on different grids). Converting a trained model
is :func:`quant.archs.gat.convert.to_quantized_gat`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant import integer as qi
from quant.formats import fixed_point as fxp

EXP_BITS = 16  # fraction bits of the softmax numerators (the maximum edge's numerator is 2^EXP_BITS)
RATIO_BITS = 16  # fraction bits of the source-step ratios u_j / U


@dataclass(frozen=True, kw_only=True)
class QuantizedGATLayer:
    """Integer parameters of one GAT layer. N nodes, F_in -> H heads x C channels; steps float64 > 0, bits int.

    x_steps, x_bits (N,): input codes. w_codes (H*C, F_in) int8, w_steps (H*C,): the projection. xw_steps, xw_bits
    (N,): the projected features' codes. att_src_codes, att_dst_codes (H, C) int8 with att_steps (H,) and
    att_bits: the attention vectors. score_steps (H,), score_bits: the edge-score quantizer. concat: heads
    concatenated (output H*C) or averaged (output C). bias (H*C or C,) or None. out_steps, out_bits (N,): the next
    layer's input quantizer, applied after ELU; None for the last layer (logits, no activation).
    """

    x_steps: np.ndarray
    x_bits: np.ndarray
    w_codes: np.ndarray
    w_steps: np.ndarray
    w_bits: int = 4
    xw_steps: np.ndarray
    xw_bits: np.ndarray
    heads: int
    att_src_codes: np.ndarray
    att_dst_codes: np.ndarray
    att_steps: np.ndarray
    att_bits: int = 4
    score_steps: np.ndarray
    score_bits: int = 4
    negative_slope: float = 0.2
    concat: bool = True
    bias: np.ndarray | None = None
    out_steps: np.ndarray | None = None
    out_bits: np.ndarray | None = None
    frac_bits: int = 14
    psum_bits: int = 32

    def __post_init__(self) -> None:
        qi.normalise_dtypes(self, ("x_steps", "w_steps", "xw_steps", "att_steps", "score_steps", "bias", "out_steps"),
                         ("x_bits", "xw_bits", "out_bits"))
        for name in ("w_codes", "att_src_codes", "att_dst_codes"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int8))
        n = self.x_steps.shape[0]
        hc, f_in = self.w_codes.shape
        if self.heads < 1 or hc % self.heads:
            raise ValueError(f"QuantizedGATLayer: {hc} output channels do not split into heads={self.heads}")
        h, c = self.heads, hc // self.heads
        qi.check_layer_fields(
            "QuantizedGATLayer",
            [("x_bits", self.x_bits, (n,)), ("w_steps", self.w_steps, (hc,)), ("xw_steps", self.xw_steps, (n,)),
             ("xw_bits", self.xw_bits, (n,)), ("att_src_codes", self.att_src_codes, (h, c)),
             ("att_dst_codes", self.att_dst_codes, (h, c)), ("att_steps", self.att_steps, (h,)),
             ("score_steps", self.score_steps, (h,)), ("bias", self.bias, (hc if self.concat else c,)),
             ("out_steps", self.out_steps, (n,)), ("out_bits", self.out_bits, (n,))],
            [self.x_steps, self.w_steps, self.xw_steps, self.att_steps, self.score_steps, self.out_steps],
            {"w_codes": self.w_codes}, self.w_bits, self.psum_bits)
        for name, bits in (("att_bits", self.att_bits), ("score_bits", self.score_bits)):
            if not 2 <= bits <= 8:
                raise ValueError(f"QuantizedGATLayer: {name}={bits} must lie in 2..8")
        limit = int(fxp.code_limit(self.att_bits))
        if np.abs(self.att_src_codes).max(initial=0) > limit or np.abs(self.att_dst_codes).max(initial=0) > limit:
            raise ValueError(f"QuantizedGATLayer: attention codes exceed the {self.att_bits}-bit range")
        if (self.out_steps is None) != (self.out_bits is None):
            raise ValueError("QuantizedGATLayer: give out_steps with out_bits")
        if not 0 <= self.frac_bits <= 24:
            raise ValueError(f"QuantizedGATLayer: frac_bits={self.frac_bits} must lie in 0..24")
        if not 0 <= self.negative_slope <= 1:
            raise ValueError(f"QuantizedGATLayer: negative_slope={self.negative_slope} must lie in [0, 1]")

    @property
    def channels(self) -> int:
        return self.w_codes.shape[0] // self.heads

    @property
    def ref_scale(self) -> float:
        """``U``: the power of two >= every XW step; the partial sums' unit is ``U 2^-frac_bits``."""
        return float(2.0 ** np.ceil(np.log2(self.xw_steps.max())))

    @property
    def unit(self) -> float:
        return self.ref_scale * 2.0**-self.frac_bits

    def leaky(self, v: np.ndarray) -> np.ndarray:
        return np.where(v >= 0, v, self.negative_slope * v)


class QuantizedGAT(qi.QuantizedModel):
    """A GAT integer model: ``x_codes`` and a tuple of :class:`QuantizedGATLayer` (see ``QuantizedModel``)."""


def gat_graph(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GATConv's edges: the given ones without self loops plus one self loop per node (appended, so last in each
    destination-major CSR row). Returns indptr (N+1,), indices (E',) sources, dst (E',) destinations."""
    edge_index = np.asarray(edge_index, dtype=np.int64)
    keep = edge_index[0] != edge_index[1]
    loops = np.arange(num_nodes, dtype=np.int64)
    full = np.concatenate([edge_index[:, keep], np.stack([loops, loops])], axis=1)
    indptr, indices, _ = fxp.csr_from_edge_index(full, num_nodes)
    return indptr, indices, np.repeat(np.arange(num_nodes), np.diff(indptr))


@dataclass(frozen=True, kw_only=True)
class GATConstants:
    """Graph-independent integer constants of one layer. xw_mult/xw_shift (N, H*C); logit_mult/logit_shift (N, H)
    (node j's attention logits, ``d_src`` as a source and ``d_dst`` as a destination, to the score's fixed point);
    score_mult/score_shift scalars; exp_table (H, 2Q+1, 2Q+1) int64 indexed
    [max code + Q, code + Q]; ratio (N,) int64 ``round(u_j / U 2^RATIO_BITS)``; bias_int (1, width) or None;
    out_mult/out_shift (N, 1) and elu_thresholds (N, K) int64 (K = largest out qmax; unused columns hold the
    minimum int64) for hidden layers."""

    xw_mult: np.ndarray
    xw_shift: np.ndarray
    logit_mult: np.ndarray
    logit_shift: np.ndarray
    score_mult: int
    score_shift: int
    exp_table: np.ndarray
    ratio: np.ndarray
    bias_int: np.ndarray | None
    out_mult: np.ndarray | None
    out_shift: np.ndarray | None
    elu_thresholds: np.ndarray | None


def exp_table(layer: QuantizedGATLayer) -> np.ndarray:
    """``T[h, m + Q, k + Q] = round(exp(e_h (lrelu(k) - lrelu(m))) 2^EXP_BITS)`` for codes ``k <= m``, 0 above."""
    q = int(fxp.code_limit(layer.score_bits))
    codes = np.arange(-q, q + 1, dtype=np.float64)
    lk = layer.leaky(codes)
    diff = lk[None, :] - lk[:, None]  # (2Q+1, 2Q+1): [m, k] = lrelu(k) - lrelu(m)
    table = np.floor(np.exp(layer.score_steps[:, None, None] * np.minimum(diff, 0.0)[None]) * 2.0**EXP_BITS + 0.5)
    return np.where(diff[None] <= 0, table, 0).astype(np.int64)


def elu_thresholds(out_steps: np.ndarray, out_bits: np.ndarray, unit: float) -> np.ndarray:
    """``T'[i, k-1] = floor(ln(1 - (k - 1/2) s'_i) / unit)`` for ``k = 1..qmax_i`` with ``(k - 1/2) s'_i < 1``;
    other entries hold the minimum int64 (no accumulator reaches them). (N, K) int64."""
    qmax = fxp.code_limit(out_bits)  # (N,)
    k = np.arange(1, max(int(qmax.max(initial=0)), 1) + 1, dtype=np.float64)  # (K,)
    frac = (k[None, :] - 0.5) * out_steps[:, None]  # (N, K)
    valid = (k[None, :] <= qmax[:, None]) & (frac < 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.floor(np.log1p(-np.where(valid, frac, 0.0)) / unit)
    lowest = np.iinfo(np.int64).min
    return np.where(valid, np.clip(t, lowest // 2, 0), lowest).astype(np.int64)


def gat_constants(layer: QuantizedGATLayer) -> GATConstants:
    """The layer's requantization multipliers/shifts, softmax table, step ratios, bias and ELU thresholds."""
    xw_mult, xw_shift = fxp.quantize_multiplier(layer.x_steps[:, None] * layer.w_steps[None, :]
                                                / layer.xw_steps[:, None])
    score_unit = layer.score_steps[None, :] * 2.0**-layer.frac_bits  # (1, H)
    logit_mult, logit_shift = fxp.quantize_multiplier(layer.xw_steps[:, None] * layer.att_steps[None, :] / score_unit)
    score_mult, score_shift = fxp.quantize_multiplier(2.0**-layer.frac_bits)
    ratio = np.floor(layer.xw_steps / layer.ref_scale * 2.0**RATIO_BITS + 0.5).astype(np.int64)
    unit = np.array([[layer.unit]])
    out_mult = out_shift = thresholds = None
    if layer.out_steps is not None:
        out_mult, out_shift = fxp.quantize_multiplier(layer.unit / layer.out_steps[:, None])
        thresholds = elu_thresholds(layer.out_steps, layer.out_bits, layer.unit)
    return GATConstants(xw_mult=xw_mult, xw_shift=xw_shift, logit_mult=logit_mult, logit_shift=logit_shift,
                        score_mult=score_mult, score_shift=score_shift,
                        exp_table=exp_table(layer), ratio=ratio,
                        bias_int=None if layer.bias is None else qi.bias_in_units(layer.bias, unit),
                        out_mult=out_mult, out_shift=out_shift, elu_thresholds=thresholds)


def _segment_max(values: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    """Per destination and column maximum of ``values`` (E, H) -> (N, H); every node has its self loop."""
    out = np.full((num_nodes, values.shape[1]), np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(out, dst, values)
    return out


def elu_requantize(acc: np.ndarray, k: GATConstants, out_bits: np.ndarray) -> np.ndarray:
    """ELU then the next layer's codes, in integers: requant for ``acc >= 0``, threshold counts below 0.
    acc (N, F) int64 -> (N, F) int64 codes."""
    pos = fxp.requantize(np.maximum(acc, 0), k.out_mult, k.out_shift, out_bits[:, None])
    neg = -(acc[:, :, None] <= k.elu_thresholds[:, None, :]).sum(axis=2)  # (N, F)
    return np.where(acc >= 0, pos, neg)


def gat_layer_trace(layer: QuantizedGATLayer, x_codes: np.ndarray, graph: tuple,
                    on_overflow: str = "saturate", constants: GATConstants | None = None) -> dict[str, np.ndarray]:
    """Integer forward of one layer with its intermediates. graph = :func:`gat_graph` output.

    Returns ``{"xw": (N, H*C) codes, "score": (E', H) score codes, "numer": (E', H) softmax numerators,
    "coef": (E', H) aggregation coefficients, "psum": (N, width) partial sums, "acc": (N, width) accumulator with
    bias, "out": next-layer codes or, for the last layer, ``acc``, "unit": real value of one ``out`` LSB}``.
    """
    indptr, indices, dst = graph
    k = constants if constants is not None else gat_constants(layer)
    n, h, c = x_codes.shape[0], layer.heads, layer.channels
    qi.check_codes(x_codes, layer.x_bits, "gat_layer_trace: x_codes")
    acc = fxp.saturate(qi.int_matmul(x_codes, layer.w_codes), qi.ACC_BITS)  # (N, H*C), unit s_i t_f
    xw = fxp.requantize(acc, k.xw_mult, k.xw_shift, layer.xw_bits[:, None])  # (N, H*C)
    xw3 = xw.reshape(n, h, c)
    d_src = (xw3 * layer.att_src_codes[None].astype(np.int64)).sum(-1)  # (N, H), unit u_j t^a_h
    d_dst = (xw3 * layer.att_dst_codes[None].astype(np.int64)).sum(-1)
    p_src = fxp.requantize(d_src, k.logit_mult, k.logit_shift, qi.ACC_BITS, on_overflow=on_overflow)  # unit e_h 2^-frac
    p_dst = fxp.requantize(d_dst, k.logit_mult, k.logit_shift, qi.ACC_BITS, on_overflow=on_overflow)
    score = fxp.requantize(fxp.saturate(p_src[indices] + p_dst[dst], qi.ACC_BITS), k.score_mult, k.score_shift,
                       layer.score_bits)  # (E', H) codes
    q = int(fxp.code_limit(layer.score_bits))
    top = _segment_max(score, dst, n)[dst]  # (E', H) the largest code into each edge's destination
    numer = k.exp_table[np.arange(h)[None, :], top + q, score + q]  # (E', H) <= 2^EXP_BITS
    denom = np.zeros((n, h), dtype=np.int64)
    np.add.at(denom, dst, numer)  # (N, H) >= 2^EXP_BITS
    averaged = 1 if layer.concat else h
    num = numer * k.ratio[indices][:, None] * (1 << layer.frac_bits)
    den = denom[dst] * averaged * (1 << RATIO_BITS)
    coef = (2 * num + den) // (2 * den)  # (E', H) round half up, all >= 0
    psum = np.concatenate([fxp.aggregate_int(indptr, indices, xw3[:, hh], coef[:, hh], layer.psum_bits, on_overflow)
                           for hh in range(h)], axis=1)  # (N, H*C), unit U 2^-frac
    if not layer.concat:
        psum = fxp.saturate(psum.reshape(n, h, c).sum(axis=1), layer.psum_bits)  # (N, C)
    out_acc = psum + (k.bias_int if k.bias_int is not None else 0)
    out_acc = fxp.saturate(out_acc, qi.ACC_BITS)
    trace = {"xw": xw, "score": score, "numer": numer, "coef": coef, "psum": psum, "acc": out_acc}
    if layer.out_steps is None:
        return {**trace, "out": out_acc, "unit": np.array([[layer.unit]])}
    return {**trace, "out": elu_requantize(out_acc, k, layer.out_bits), "unit": layer.out_steps[:, None]}


def gat_layer_reference(layer: QuantizedGATLayer, x_codes: np.ndarray, graph: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Float64 fake-quant forward of one layer (the trained model's arithmetic): ``(next-layer codes, (N, 1)
    steps)`` or, for the last layer, ``(real logits, ones)``."""
    indptr, indices, dst = graph
    n, h, c = x_codes.shape[0], layer.heads, layer.channels
    x = x_codes.astype(np.float64) * layer.x_steps[:, None]
    w = layer.w_codes.astype(np.float64) * layer.w_steps[:, None]
    xw = qi.fake_quant(x @ w.T, layer.xw_steps[:, None], layer.xw_bits[:, None]) * layer.xw_steps[:, None]
    xw3 = xw.reshape(n, h, c)
    a_src = (xw3 * (layer.att_src_codes * layer.att_steps[:, None])[None]).sum(-1)  # (N, H)
    a_dst = (xw3 * (layer.att_dst_codes * layer.att_steps[:, None])[None]).sum(-1)
    e = layer.score_steps[None, :]
    score = qi.fake_quant(a_src[indices] + a_dst[dst], e, layer.score_bits) * e  # (E', H)
    logit = layer.leaky(score)
    top = np.full((n, h), -np.inf)
    np.maximum.at(top, dst, logit)
    ex = np.exp(logit - top[dst])
    denom = np.zeros((n, h))
    np.add.at(denom, dst, ex)
    alpha = ex / denom[dst]  # (E', H)
    out = np.zeros((n, h, c))
    np.add.at(out, dst, alpha[:, :, None] * xw3[indices])
    out = out.reshape(n, h * c) if layer.concat else out.mean(axis=1)
    if layer.bias is not None:
        out = out + layer.bias[None, :]
    if layer.out_steps is None:
        return out, np.ones((n, 1))
    elu = np.where(out > 0, out, np.expm1(np.minimum(out, 0.0)))
    steps = layer.out_steps[:, None]
    return qi.fake_quant(elu, steps, layer.out_bits[:, None]).astype(np.int64), steps


def _reference(layer: QuantizedGATLayer, h: np.ndarray, graph: tuple, exact_constants: bool
               ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gat_layer_reference` (GAT's reference has one set of constants: the true ones)."""
    if not exact_constants:
        raise ValueError("gat_forward_reference: GAT's float64 reference has no snapped-constant variant")
    return gat_layer_reference(layer, h, graph)


GOLDEN = qi.GoldenForward(graph=gat_graph, trace=gat_layer_trace, reference=_reference)
gat_forward_int = GOLDEN.forward_int  # (model, edge_index, on_overflow="saturate") -> (outputs, logits)
gat_forward_reference = GOLDEN.forward_reference  # (model, edge_index, exact_constants=True): float64 twin


__all__ = ["EXP_BITS", "GATConstants", "QuantizedGAT", "QuantizedGATLayer", "elu_requantize", "elu_thresholds",
           "exp_table", "gat_constants", "gat_forward_int", "gat_forward_reference", "gat_graph",
           "gat_layer_reference", "gat_layer_trace"]
