"""GIN and GraphSAGE layers on the accelerator: what the simulator consumes of a ``.qgraph`` export of either.

Both golden models (``quant.archs.gin.integer``, ``quant.archs.sage.integer``) aggregate the layer's *input codes*
first, because
A2Q quantizes the aggregate: the sum (GIN, over the in-edges plus a self loop) or the mean (GraphSAGE, over the
in-edges) is requantized per node to the aggregate's learned codes, and only then multiplied by the weights. So on
every accelerator preset these layers run aggregation-first, whatever ``AcceleratorConfig.order`` says (that field
chooses GCN's dataflow, where ``A (X W)`` and ``(A X) W`` are the same integers):

* aggregation engine: ``psum_i = sum_j c_ij x_j`` over the layer's CSR, on ``F_in`` lanes;
* combination engine, one or more integer matmuls (:class:`CombinationPass`), each streamed bit-serially over its
  input codes on MEGA: GIN ``aggregate @ W1`` (then the folded batch norm, ReLU and the hidden requant) and
  ``hidden @ W2``; GraphSAGE ``aggregate @ W_neigh`` and ``input @ W_root``, summed;
* requant units: the next layer's codes, written as a feature stream.

The aggregate and the hidden activation stay on chip (aggregation buffer -> combination engine); only the layer's
input, its source rows, the weights, the edges and the output go through DRAM. A GIN trained without the hidden
quantizer carries its hidden activation in 16-bit fixed point, so that pass streams 16 bits per non-zero value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant.archs import AGGREGATION_FIRST, archs_with_dataflow
from quant.archs.gin.integer import gin_graph, gin_layer_trace
from quant.archs.sage.integer import sage_graph, sage_layer_trace

ARCHS = tuple(sorted(archs_with_dataflow(AGGREGATION_FIRST)))  # GIN, GraphSAGE: quant.archs.ARCHS


@dataclass(frozen=True, kw_only=True)
class CombinationPass:
    """One integer matmul: ``codes`` (N, K) int with per-node bitwidths ``bits`` (N,) times a (F_out, K) weight of
    ``w_bits``-bit codes. ``name`` says which (e.g. ``"aggregate @ W1"``); ``requant_after``: its accumulators are
    requantized on chip into the next pass's input (GIN's hidden activation)."""

    name: str
    codes: np.ndarray
    bits: np.ndarray
    f_out: int
    w_bits: int
    requant_after: bool = False  # the requant units turn its accumulators into the next pass's codes

    def weight_bytes(self, w_bits: int) -> int:
        """Bytes of the (F_out, K) weight at ``w_bits`` bits (the pass's own ``w_bits``, or a baseline's width)."""
        return -(-self.codes.shape[1] * self.f_out * w_bits // 8)


@dataclass(frozen=True, kw_only=True)
class AggregateFirstLayer:
    """One GIN or GraphSAGE layer of a workload. x_codes (N, F_in) and x_bits (N,) (a per-channel input's single
    width repeated per node); passes: the combination engine's matmuls in order; out_codes (N, F_out) int64 (next
    codes, or the last layer's accumulators) with out_bits (N,) or None; golden: the integer layer
    (``QuantizedGINLayer`` / ``QuantizedSAGELayer``) that the functional check runs."""

    arch: str
    x_codes: np.ndarray
    x_bits: np.ndarray
    passes: tuple[CombinationPass, ...]
    out_codes: np.ndarray
    out_bits: np.ndarray | None
    w_bits: int
    golden: object

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"AggregateFirstLayer: arch={self.arch!r}; valid: {', '.join(ARCHS)}")

    @property
    def dims(self) -> list[int]:
        """[N, F_in, F_out]."""
        return [*self.x_codes.shape, int(self.out_codes.shape[1])]

    def weight_bytes(self, w_bits: int) -> int:
        """Bytes of every pass's weight at ``w_bits`` bits."""
        return sum(p.weight_bytes(w_bits) for p in self.passes)


def pass_bit_work(cp: CombinationPass, override_bits: int = 0) -> np.ndarray:
    """(N,) bit-serial work of a pass's input codes: non-zero values x their node's bits, or, with
    ``override_bits`` (an FP32 / dense baseline), every value at that width."""
    if override_bits:
        return np.full(cp.codes.shape[0], cp.codes.shape[1] * override_bits, np.int64)
    return np.count_nonzero(cp.codes, axis=1).astype(np.int64) * np.asarray(cp.bits, np.int64)


def _per_node(bits: np.ndarray, n: int) -> np.ndarray:
    """(N,) bitwidths of a tensor stored per node; a per-channel tensor (one width) repeated per node."""
    bits = np.asarray(bits, dtype=np.int64)
    return bits if bits.shape == (n,) else np.full(n, int(bits.max(initial=1)), np.int64)


def gin_layers(q, model) -> tuple[AggregateFirstLayer, ...]:
    """The layers of a loaded GIN export ``q`` whose integer model (``quant.archs.gin.reader.integer_model``) is
    ``model``."""
    n = model.x_codes.shape[0]
    out = []
    for li, lay in enumerate(model.layers):
        p = f"layer{li}."
        passes = (CombinationPass(name="aggregate @ W1", codes=np.asarray(q[p + "agg_codes"], np.int64),
                                  bits=_per_node(lay.agg_bits, n), f_out=lay.w1_codes.shape[0], w_bits=lay.w_bits,
                                  requant_after=True),
                  CombinationPass(name="hidden @ W2", codes=np.asarray(q[p + "hid_codes"], np.int64),
                                  bits=_per_node(lay.hid_bits, n), f_out=lay.w2_codes.shape[0], w_bits=lay.w_bits))
        out.append(AggregateFirstLayer(
            arch="gin", x_codes=np.asarray(q[p + "x_codes"], np.int64), x_bits=_per_node(lay.x_bits, n),
            passes=passes, out_codes=np.asarray(q[p + "out"], np.int64),
            out_bits=None if lay.out_bits is None else _per_node(lay.out_bits, n), w_bits=lay.w_bits, golden=lay))
    return tuple(out)


def sage_layers(q, model) -> tuple[AggregateFirstLayer, ...]:
    """The layers of a loaded GraphSAGE export (``quant.archs.sage.reader.integer_model`` gives ``model``)."""
    out = []
    for li, lay in enumerate(model.layers):
        p = f"layer{li}."
        x_codes = np.asarray(q[p + "x_codes"], np.int64)
        f_out = lay.wn_codes.shape[0]
        passes = (CombinationPass(name="aggregate @ W_neigh", codes=np.asarray(q[p + "agg_codes"], np.int64),
                                  bits=np.asarray(lay.agg_bits), f_out=f_out, w_bits=lay.w_bits),
                  CombinationPass(name="input @ W_root", codes=x_codes, bits=np.asarray(lay.x_bits), f_out=f_out,
                                  w_bits=lay.w_bits))
        out.append(AggregateFirstLayer(
            arch="sage", x_codes=x_codes, x_bits=np.asarray(lay.x_bits), passes=passes,
            out_codes=np.asarray(q[p + "out"], np.int64), out_bits=lay.out_bits, w_bits=lay.w_bits, golden=lay))
    return tuple(out)


def golden_graph(arch: str, edge_index: np.ndarray, num_nodes: int) -> tuple:
    """The CSR a GIN (in-edges + self loop) or GraphSAGE (in-edges) layer aggregates over, as its golden model
    builds it: ``(indptr (N+1,), indices, per-slot data)``."""
    return (gin_graph if arch == "gin" else sage_graph)(edge_index, num_nodes)


def golden_trace(layer: AggregateFirstLayer, x_codes: np.ndarray, graph: tuple) -> dict[str, np.ndarray]:
    """The golden model's integer trace of ``layer`` on ``x_codes``: keys ``agg``, ``out`` (and GIN's ``hidden``)."""
    return (gin_layer_trace if layer.arch == "gin" else sage_layer_trace)(layer.golden, x_codes, graph)


def pass_inputs(layer: AggregateFirstLayer, trace: dict[str, np.ndarray], x_codes: np.ndarray) -> list[np.ndarray]:
    """What each combination pass of ``layer`` multiplies, taken from a golden trace (same order as ``passes``)."""
    return [trace["agg"], trace["hidden"]] if layer.arch == "gin" else [trace["agg"], x_codes]


__all__ = ["ARCHS", "AggregateFirstLayer", "CombinationPass", "gin_layers", "golden_graph", "golden_trace",
           "pass_bit_work", "pass_inputs", "sage_layers"]
