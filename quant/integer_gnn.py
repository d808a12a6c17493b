"""Integer-only forward of a quantized GCN (the golden model of the accelerator) and its float64 fake-quant twin.

One layer of :class:`gnn.conv.GCNConv`, ``X' = relu(q_agg(Â q_xw(q_in(X) q_w(W)^T)) + b)``, in integers
(widths and rounding in ``quant/FIXED_POINT.md``):

1. ``acc = x_codes @ w_codes^T`` (int64, checked/saturated to 32 bits); real value ``s_j t_f acc[j, f]``.
2. XW requant to codes with step ``u`` and bitwidth ``xw_bits``, multiplier ``s_j t_f / u`` per (j, f). Two XW
   granularities (``xw_scheme``): ``"node"`` (step ``u_j`` per node) or ``"channel"`` (step ``u_f`` per output
   channel, what A2Q trains: ``quant.a2q`` scheme ``"channel"``).
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

Converting a trained model (``gnn.models.GNN`` with ``arch="gcn"`` quantized by ``quant.api``) is
:func:`quant.convert.to_quantized_gcn`.
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
XW_SCHEMES = ("node", "channel")


def round_half_away(v: np.ndarray) -> np.ndarray:
    """``floor(|v| + 0.5) * sign(v)`` (A2Q's rounding), float64."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def fake_quant(v: np.ndarray, step: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Codes ``clamp(round_haz(v / step), -qmax, qmax)`` (float64). step, bits broadcast against v."""
    qmax = code_limit(bits)
    return np.clip(round_half_away(v / step), -qmax, qmax)


def normalise_dtypes(obj, float_fields: tuple[str, ...], int_fields: tuple[str, ...]) -> None:
    """Cast the non-None array fields of a frozen dataclass to float64 / int64 in place (in ``__post_init__``)."""
    for names, dtype in ((float_fields, np.float64), (int_fields, np.int64)):
        for name in names:
            if getattr(obj, name) is not None:
                object.__setattr__(obj, name, np.asarray(getattr(obj, name), dtype=dtype))


def check_layer_fields(owner: str, shapes: list[tuple[str, np.ndarray | None, tuple]], steps: list,
                       weights: dict[str, np.ndarray], w_bits: int, psum_bits: int) -> None:
    """The checks every integer layer runs in ``__post_init__``: each ``(name, array, shape)`` (None skipped), every
    step > 0, weight codes within the symmetric ``w_bits`` range, ``psum_bits`` in 2..32. Raises ValueError naming
    ``owner`` and the field."""
    for name, arr, shape in shapes:
        if arr is not None and np.shape(arr) != shape:
            raise ValueError(f"{owner}: {name} has shape {np.shape(arr)}, expected {shape}")
    if any(s is not None and np.any(~(np.asarray(s) > 0)) for s in steps):
        raise ValueError(f"{owner}: every step must be > 0 (take |s| of the trained parameter)")
    for name, codes in weights.items():
        if np.abs(codes.astype(np.int64)).max(initial=0) > code_limit(w_bits):
            raise ValueError(f"{owner}: {name} exceed the symmetric {w_bits}-bit range")
    if not 2 <= psum_bits <= ACC_BITS:
        raise ValueError(f"{owner}: psum_bits={psum_bits} must lie in 2..{ACC_BITS}")


def check_layer_chain(owner: str, layers) -> None:
    """An integer model needs >= 1 layer, and every layer but the last feeds next-layer codes (``out_steps``)."""
    if not layers or any(lay.out_steps is None for lay in layers[:-1]):
        raise ValueError(f"{owner}: need >= 1 layer, and every layer but the last needs out_steps")


def trace_layers(x_codes: np.ndarray, layers, graph: tuple, trace_fn, on_overflow: str
                 ) -> tuple[list[np.ndarray], np.ndarray]:
    """:func:`run_layers` over ``trace_fn(layer, h, graph, on_overflow) -> {"out", "unit", ...}`` (a layer's integer
    trace)."""
    def layer_int(layer, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = trace_fn(layer, h, graph, on_overflow)
        return t["out"], t["unit"]

    return run_layers(x_codes, layers, layer_int)


def run_layers(x_codes: np.ndarray, layers, layer_fn) -> tuple[list[np.ndarray], np.ndarray]:
    """Chain ``layer_fn(layer, h) -> (out, unit)`` over ``layers`` from ``x_codes``. Returns (per-layer outputs,
    the last output times its unit: float64 logits)."""
    h, outs, unit = x_codes, [], None
    for layer in layers:
        h, unit = layer_fn(layer, h)
        outs.append(h)
    return outs, h * unit


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
        normalise_dtypes(self, ("x_steps", "w_steps", "xw_steps", "agg_steps", "bias", "out_steps"),
                         ("x_bits", "xw_bits", "agg_bits", "out_bits"))
        object.__setattr__(self, "w_codes", np.asarray(self.w_codes, dtype=np.int8))
        if self.xw_scheme not in XW_SCHEMES:
            raise ValueError(f"QuantizedGCNLayer: unknown xw_scheme {self.xw_scheme!r}; valid: "
                             f"{', '.join(XW_SCHEMES)}")
        n = self.x_steps.shape[0]
        f_out, _ = self.w_codes.shape
        xw_len = n if self.xw_scheme == "node" else f_out
        check_layer_fields(
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
        """Real per-edge factor that :func:`quant.fixed_point.edge_coefficients` turns into ``c_e``. (E',)."""
        if self.xw_scheme == "node":
            return weight * self.xw_steps[indices] / self.ref_scale
        return weight


@dataclass(frozen=True, kw_only=True)
class QuantizedGCN:
    """Input codes (N, F_in) int8 of the first layer plus the layers (the last has ``out_steps=None``)."""

    x_codes: np.ndarray
    layers: tuple[QuantizedGCNLayer, ...]

    def __post_init__(self) -> None:
        check_layer_chain("QuantizedGCN", self.layers)


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


SPARSE_CODES_MAX_DENSITY = 0.05  # below this fraction of non-zero codes, int_matmul multiplies sparse rows


def _takes_sparse_product(codes: np.ndarray) -> bool:
    return codes.size > 0 and np.count_nonzero(codes) <= SPARSE_CODES_MAX_DENSITY * codes.size


def int_matmul_macs(codes: np.ndarray, f_out: int) -> int:
    """Multiply-accumulates :func:`int_matmul` spends on ``codes`` (N, F_in) against F_out weight rows."""
    return (np.count_nonzero(codes) if _takes_sparse_product(codes) else codes.size) * f_out


def int_matmul(codes: np.ndarray, w_codes: np.ndarray) -> np.ndarray:
    """Exact integer product ``codes @ w_codes.T``: (N, F_in) x (F_out, F_in) -> (N, F_out) int64.

    Sparse code matrices (bag-of-words inputs: 1% non-zero) go through a CSR product with int64 accumulation, which
    gives the same integers as the dense product (integer sums do not depend on their order) at the cost of the
    non-zero MACs only; numpy's dense int64 matmul has no BLAS and pays every MAC.
    """
    codes = np.asarray(codes)
    w = np.asarray(w_codes, dtype=np.int64).T  # (F_in, F_out)
    if _takes_sparse_product(codes):
        from scipy.sparse import csr_matrix
        return np.asarray(csr_matrix(codes.astype(np.int64)) @ w, dtype=np.int64)
    return codes.astype(np.int64) @ w


def _check_codes(codes: np.ndarray, bits: np.ndarray, name: str) -> None:
    if np.any(np.abs(codes.astype(np.int64)) > code_limit(bits)[:, None]):
        raise ValueError(f"{name}: codes exceed their per-node bitwidths")


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
    xw_mult, xw_shift = quantize_multiplier(layer.x_steps[:, None] * layer.w_steps[None, :] / xw_step)
    coef = edge_coefficients(layer.coef_weights(weight, indices), layer.frac_bits)  # (E',)
    unit = layer.psum_unit()
    agg_mult = agg_shift = out_mult = out_shift = bias_int = None
    if layer.agg_steps is not None:
        agg_mult, agg_shift = quantize_multiplier(unit / layer.agg_steps[:, None])
        unit = layer.agg_steps[:, None] * 2.0**-layer.frac_bits
    if layer.bias is not None:
        bias_int = _bias_int(layer.bias, unit)
    if layer.out_steps is not None:
        out_mult, out_shift = quantize_multiplier(unit / layer.out_steps[:, None])
    return LayerConstants(xw_mult=xw_mult, xw_shift=xw_shift, coef=coef, agg_mult=agg_mult, agg_shift=agg_shift,
                          bias_int=bias_int, out_mult=out_mult, out_shift=out_shift, unit=unit)


def gcn_layer_trace(layer: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, on_overflow: str = "saturate",
                    constants: LayerConstants | None = None) -> dict[str, np.ndarray]:
    """Integer forward of one layer with its intermediates. graph = :func:`gcn_graph` output.

    Returns ``{"xw": (N, F_out) XW codes, "psum": (N, F_out) aggregation partial sums, "out": next-layer codes or,
    for the last layer, the 32-bit accumulator, "unit": real value of one ``out`` LSB (2-D, broadcastable)}``.
    For the next layer ``unit`` is ``out_steps[:, None]``.
    """
    indptr, indices, _ = graph
    k = constants if constants is not None else layer_constants(layer, graph)
    _check_codes(x_codes, layer.x_bits, "gcn_layer_int: x_codes")
    _, xw_bits = layer.xw_grid()
    acc = saturate(int_matmul(x_codes, layer.w_codes), ACC_BITS)  # (N, F_out)
    xw = requantize(acc, k.xw_mult, k.xw_shift, xw_bits)  # (N, F_out) XW codes
    psum = aggregate_int(indptr, indices, xw, k.coef, layer.psum_bits, on_overflow)  # unit: psum_unit()
    acc = psum
    if layer.agg_steps is not None:
        acc = requantize(acc, k.agg_mult, k.agg_shift, layer.agg_bits[:, None]) << layer.frac_bits
    if k.bias_int is not None:
        acc = saturate(acc + k.bias_int, ACC_BITS)
    if layer.relu:
        acc = np.maximum(acc, 0)
    if layer.out_steps is None:
        return {"xw": xw, "psum": psum, "out": acc, "unit": k.unit}
    out = requantize(acc, k.out_mult, k.out_shift, layer.out_bits[:, None])
    return {"xw": xw, "psum": psum, "out": out, "unit": layer.out_steps[:, None]}


def gcn_layer_int(layer: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, on_overflow: str = "saturate"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Integer forward of one layer. graph = :func:`gcn_graph` output.

    Returns ``(out, unit)``: out (N, F_out) int64 = next-layer codes, or for the last layer the 32-bit accumulator,
    whose real value is ``out * unit`` (unit float64, (N, 1) or (1, F_out)).
    """
    t = gcn_layer_trace(layer, x_codes, graph, on_overflow)
    return t["out"], t["unit"]


def _bias_int(bias: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Bias in accumulator units, ``round_haz(b_f / unit)``; unit (N, 1) or (1, F_out) -> broadcastable int64."""
    return round_half_away(bias[None, :] / unit).astype(np.int64)


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
    xw = fake_quant(x @ w.T, xw_step, xw_bits) * xw_step  # (N, F_out)
    if not exact_constants:  # the coefficient the integer path really applies, as a real edge weight
        c = edge_coefficients(layer.coef_weights(weight, indices), layer.frac_bits) * 2.0**-layer.frac_bits
        weight = c * layer.ref_scale / layer.xw_steps[indices] if layer.xw_scheme == "node" else c
    dst = np.repeat(np.arange(n), np.diff(indptr))
    agg = np.zeros((n, xw.shape[1]))
    np.add.at(agg, dst, weight[:, None] * xw[indices])  # (N, F_out)
    unit = layer.psum_unit()
    if layer.agg_steps is not None:
        agg = fake_quant(agg, layer.agg_steps[:, None], layer.agg_bits[:, None]) * layer.agg_steps[:, None]
        unit = layer.agg_steps[:, None] * 2.0**-layer.frac_bits
    if layer.bias is not None:
        agg = agg + (layer.bias[None, :] if exact_constants else _bias_int(layer.bias, unit) * unit)
    if layer.relu:
        agg = np.maximum(agg, 0.0)
    if layer.out_steps is None:
        return agg, np.ones((n, 1))
    return fake_quant(agg, layer.out_steps[:, None], layer.out_bits[:, None]).astype(np.int64), layer.out_steps[:, None]


def gcn_forward_int(model: QuantizedGCN, edge_index: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Integer forward of the whole GCN. Returns (per-layer integer outputs, float64 logits (N, F_last))."""
    graph = gcn_graph(edge_index, model.x_codes.shape[0])
    return run_layers(model.x_codes, model.layers, lambda layer, h: gcn_layer_int(layer, h, graph))


def gcn_forward_reference(model: QuantizedGCN, edge_index: np.ndarray, exact_constants: bool = True
                          ) -> tuple[list[np.ndarray], np.ndarray]:
    """Float64 fake-quant forward of the whole GCN (same return convention as :func:`gcn_forward_int`)."""
    graph = gcn_graph(edge_index, model.x_codes.shape[0])
    return run_layers(model.x_codes, model.layers,
                      lambda layer, h: gcn_layer_reference(layer, h, graph, exact_constants))


__all__ = ["LayerConstants", "QuantizedGCN", "QuantizedGCNLayer", "fake_quant", "gcn_forward_int",
           "gcn_forward_reference", "gcn_graph", "gcn_layer_int", "gcn_layer_reference", "gcn_layer_trace",
           "layer_constants", "round_half_away"]
