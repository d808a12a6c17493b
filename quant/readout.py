"""Integer readout of a graph-level model (numpy only): pooling per graph and the classification head, the part of
a graph classifier after its message-passing layers (``gnn.models.GNN`` with ``pool="sum"`` or ``"mean"``).

A batch of graphs is one block-diagonal graph whose nodes are grouped by graph (``graph_ptr`` (G+1,): the nodes of
graph ``g`` are ``graph_ptr[g]:graph_ptr[g + 1]``). The layers run on it as on any graph; each readout tensor is a
layer's output accumulator ``acc`` (N, F) int64 with the real value ``acc * unit`` (``unit`` (N, 1) per node or
(1, F) per channel), or the first layer's input codes times their steps. In integers (widths in
``quant/FIXED_POINT.md``, section "Graph readout"):

1. **Common unit.** Each tensor is rescaled to one power-of-two unit ``P = 2^ceil(log2 max unit)``: ``round(acc *
   unit / P)`` with a 31-bit multiplier per node or channel (every ratio is <= 1, so nothing grows).
2. **Pool.** Sum over each graph's nodes, saturating at ``POOL_BITS``; ``"mean"`` divides by the node count with
   round-half-away (an exact integer division).
3. **Head.** ``"linear-sum"`` (the GIN paper's): one quantized linear map per readout, ``acc_r = pooled_r @ W_r^T +
   round(b / (P_r t_c))``, logits ``sum_r acc_r P_r t_c``. ``"mlp"``: the readouts rescaled to the largest ``P``
   (power-of-two shifts) and concatenated, ``Linear -> ReLU -> Linear``; the hidden accumulator (unit ``P t1_c`` per
   channel, saturated at ``HEAD_ACC_BITS``) is rescaled to one power-of-two unit ``V >= max_c P t1_c`` with
   ``HEAD_MULT_BITS``-bit multipliers before the second map. The logits are the last accumulators times their units
   (float64), as a node-level model's last layer.

Nothing in the readout is quantized in the fake-quant model but the head's weights (``gnn.conv.Linear.q_weight``),
so the integer readout carries full-precision activations in wide fixed point; :func:`readout_reference` is the
same readout in float64 on the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant import integer as qi
from quant.formats import fixed_point as fxp

POOLS = ("sum", "mean")
HEADS = ("linear-sum", "mlp")
POOL_BITS = 40  # pooled sums (and the MLP head's rescaled hidden values): signed registers of this width
HEAD_ACC_BITS = 48  # the MLP head's first accumulator before its rescale
HEAD_MULT_BITS = 15  # multipliers of that rescale: 48 + 15 bits fit the int64 product


@dataclass(frozen=True, kw_only=True)
class ReadoutLinear:
    """One quantized linear map of the head: ``w_codes`` (C, F) int8 with per-output-channel ``w_steps`` (C,) and
    one bitwidth ``w_bits``; ``bias`` (C,) float64 or None."""

    w_codes: np.ndarray
    w_steps: np.ndarray
    w_bits: int
    bias: np.ndarray | None = None

    def __post_init__(self) -> None:
        qi.normalise_dtypes(self, ("w_steps", "bias"), ())
        object.__setattr__(self, "w_codes", np.asarray(self.w_codes, dtype=np.int8))
        c = self.w_codes.shape[0]
        qi.check_layer_fields("ReadoutLinear", [("w_steps", self.w_steps, (c,)), ("bias", self.bias, (c,))],
                              [self.w_steps], {"w_codes": self.w_codes}, self.w_bits, qi.ACC_BITS)
        if self.w_codes.shape[1] >= 1 << (63 - POOL_BITS - 8):
            raise ValueError(f"ReadoutLinear: {self.w_codes.shape[1]} input channels overflow the int64 product of "
                             f"{POOL_BITS}-bit inputs and 8-bit codes")


@dataclass(frozen=True, kw_only=True)
class QuantizedReadout:
    """The integer readout: ``pool`` ("sum" | "mean"), ``head`` ("linear-sum": one :class:`ReadoutLinear` per
    readout tensor, in order; "mlp": (first, second)), ``readout_input``: the first readout is the first layer's
    input (then one readout per layer follows)."""

    pool: str
    head: str
    readout_input: bool
    linears: tuple[ReadoutLinear, ...]

    def __post_init__(self) -> None:
        if self.pool not in POOLS or self.head not in HEADS:
            raise ValueError(f"QuantizedReadout: pool {self.pool!r} / head {self.head!r}; valid pools {POOLS}, "
                             f"heads {HEADS}")
        if self.head == "mlp" and len(self.linears) != 2:
            raise ValueError(f"QuantizedReadout: an 'mlp' head has two linear maps, got {len(self.linears)}")
        if not self.linears:
            raise ValueError("QuantizedReadout: the head needs at least one linear map")


def check_graph_ptr(graph_ptr: np.ndarray, num_nodes: int) -> np.ndarray:
    """``graph_ptr`` as int64 (G+1,), starting at 0, non-decreasing, ending at ``num_nodes``; ValueError otherwise."""
    ptr = np.asarray(graph_ptr, dtype=np.int64)
    if ptr.ndim != 1 or ptr.size < 2 or ptr[0] != 0 or ptr[-1] != num_nodes or np.any(np.diff(ptr) < 0):
        raise ValueError(f"graph_ptr must run non-decreasing from 0 to the node count {num_nodes}; got "
                         f"{ptr[:3].tolist()}...{ptr[-2:].tolist()} ({ptr.size} entries)")
    return ptr


def pool_unit(unit: np.ndarray) -> float:
    """``P``: the power of two >= every entry of ``unit`` (the real value of one pooled LSB)."""
    return float(2.0 ** np.ceil(np.log2(np.max(unit))))


def _segment_sum(values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Sum of the rows of each graph: values (N, F) -> (G, F); a graph without nodes sums to zero."""
    csum = np.concatenate([np.zeros((1, values.shape[1]), dtype=values.dtype), np.cumsum(values, axis=0)])
    return csum[ptr[1:]] - csum[ptr[:-1]]


def _divide_round(p: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``round_half_away(p / n)`` for int64 ``p`` (G, F) and positive counts ``n`` (G, 1), exactly."""
    return np.sign(p) * ((2 * np.abs(p) + n) // (2 * n))


def pool_int(acc: np.ndarray, unit: np.ndarray, ptr: np.ndarray, pool: str) -> tuple[np.ndarray, float]:
    """Steps 1-2: one readout tensor pooled per graph. Returns (pooled (G, F) int64, its unit ``P``)."""
    p = pool_unit(unit)
    mult, shift = fxp.quantize_multiplier(np.asarray(unit, dtype=np.float64) / p)  # ratios <= 1: 31-bit mult
    scaled = fxp.rounding_shift(fxp.saturate(np.asarray(acc, dtype=np.int64), qi.ACC_BITS) * mult, shift)
    pooled = fxp.saturate(_segment_sum(scaled, ptr), POOL_BITS)
    if pool == "mean":
        pooled = _divide_round(pooled, np.maximum(np.diff(ptr), 1)[:, None])
    return pooled, p


def _linear_int(x: np.ndarray, unit: float, lin: ReadoutLinear) -> tuple[np.ndarray, np.ndarray]:
    """``x @ W^T + bias`` for x (G, F) int64 of real value ``x * unit``: (acc (G, C) int64, unit (1, C))."""
    acc = qi.int_matmul(x, lin.w_codes)
    acc_unit = unit * lin.w_steps[None, :]
    if lin.bias is not None:
        acc = acc + qi.bias_in_units(lin.bias, acc_unit)
    return acc, acc_unit


def readout_int(readout: QuantizedReadout, tensors: list[tuple[np.ndarray, np.ndarray]], graph_ptr: np.ndarray
                ) -> dict[str, np.ndarray]:
    """The integer readout of ``tensors`` (``(acc (N, F) int64, unit)`` each, in readout order) over the graphs of
    ``graph_ptr``. Returns ``{"pooled<r>": (G, F_r) int64, "pool_unit<r>": (1,) float64 for each readout r, "hidden":
    (G, H) (mlp head only), "logits": (G, C) float64}``."""
    ptr = check_graph_ptr(graph_ptr, tensors[0][0].shape[0])
    if readout.head == "linear-sum" and len(readout.linears) != len(tensors):
        raise ValueError(f"readout_int: {len(tensors)} readout tensors for {len(readout.linears)} linear maps")
    out, pooled = {}, []
    for r, (acc, unit) in enumerate(tensors):
        x, p = pool_int(acc, unit, ptr, readout.pool)
        pooled.append((x, p))
        out[f"pooled{r}"], out[f"pool_unit{r}"] = x, np.array([p])
    if readout.head == "linear-sum":
        logits = 0.0
        for (x, p), lin in zip(pooled, readout.linears, strict=True):
            acc, acc_unit = _linear_int(x, p, lin)
            logits = logits + acc * acc_unit
        return out | {"logits": np.asarray(logits, dtype=np.float64)}
    top = max(p for _, p in pooled)
    x = np.concatenate([fxp.rounding_shift(x, int(round(np.log2(top / p)))) for x, p in pooled], axis=1)
    first, second = readout.linears
    acc1, unit1 = _linear_int(x, top, first)  # unit (1, H): P t1_c
    acc1 = np.maximum(fxp.saturate(acc1, HEAD_ACC_BITS), 0)  # the head's ReLU
    v = pool_unit(unit1)
    mult, shift = fxp.quantize_multiplier(unit1 / v, bits=HEAD_MULT_BITS)
    hidden = fxp.saturate(fxp.rounding_shift(acc1 * mult, shift), POOL_BITS)  # unit V
    acc2, unit2 = _linear_int(hidden, v, second)
    return out | {"hidden": hidden, "logits": acc2 * unit2}


def input_unit(layer) -> np.ndarray:
    """Real value of one input code of a layer: its ``x_steps`` as (N, 1), or (1, F) for a per-channel
    ``x_scheme``."""
    return layer.x_steps[None, :] if getattr(layer, "x_scheme", "node") == "channel" else layer.x_steps[:, None]


def graph_forward_int(golden: qi.GoldenForward, model: qi.QuantizedModel, readout: QuantizedReadout,
                      edge_index: np.ndarray, graph_ptr: np.ndarray) -> tuple[list[dict], dict[str, np.ndarray]]:
    """The integer forward of a graph classifier over a batch of graphs: every layer of ``model`` (an
    architecture's integer model, traced by its ``golden``), then :func:`readout_int` over the first layer's input
    (``readout.readout_input``) and every layer's output accumulator. Returns (per-layer traces, the readout's)."""
    graph = golden.graph(edge_index, model.x_codes.shape[0])
    h = model.x_codes
    frac = model.layers[0].frac_bits  # input codes get the fraction bits of a layer's accumulator (precision of P)
    tensors = ([(h.astype(np.int64) << frac, input_unit(model.layers[0]) * 2.0**-frac)] if readout.readout_input
               else [])
    traces = []
    for layer in model.layers:
        t = golden.trace(layer, h, graph, "saturate")
        traces.append(t)
        tensors.append((t["acc"], t["acc_unit"]))
        h = t["out"]
    return traces, readout_int(readout, tensors, graph_ptr)


def readout_reference(readout: QuantizedReadout, values: list[np.ndarray], graph_ptr: np.ndarray) -> np.ndarray:
    """The readout in float64 on real-valued readout tensors ``values`` ((N, F_r) each): (G, C) logits."""
    ptr = check_graph_ptr(graph_ptr, values[0].shape[0])
    counts = np.maximum(np.diff(ptr), 1)[:, None]
    pooled = [_segment_sum(np.asarray(v, dtype=np.float64), ptr) for v in values]
    if readout.pool == "mean":
        pooled = [p / counts for p in pooled]

    def linear(x, lin):
        y = x @ (lin.w_codes.astype(np.float64) * lin.w_steps[:, None]).T
        return y if lin.bias is None else y + lin.bias[None, :]

    if readout.head == "linear-sum":
        return sum(linear(p, lin) for p, lin in zip(pooled, readout.linears, strict=True))
    first, second = readout.linears
    return linear(np.maximum(linear(np.concatenate(pooled, axis=1), first), 0.0), second)


__all__ = ["HEADS", "HEAD_ACC_BITS", "HEAD_MULT_BITS", "POOLS", "POOL_BITS", "QuantizedReadout", "ReadoutLinear",
           "check_graph_ptr", "graph_forward_int", "input_unit", "pool_int", "pool_unit", "readout_int",
           "readout_reference"]
