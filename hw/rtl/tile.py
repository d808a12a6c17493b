"""One ``layer_engine`` tile cut from a quantized GCN layer, its golden outputs, and its RTL simulation.

A tile is a set of destination rows ``R`` of one layer plus every source node they aggregate from: local nodes are
``rows`` first (output row ``r`` = local node ``r``), then the other sources. Every constant comes from
:func:`quant.archs.gcn.integer.layer_constants` and every expected value from
:func:`quant.archs.gcn.integer.gcn_layer_trace`
on the *whole* graph (the psum of a destination row only depends on its in-edges, so the tile's rows equal the full
layer's). Shapes: n local nodes, F input features, L = F_out lanes, R rows, E in-edges of the rows.

:func:`simulate_tile` runs ``hw/rtl/layer_engine_tb.py`` in cocotb and returns the outputs and measured cycles;
:func:`check_tile` raises :class:`TileMismatch` on the first element that differs from the golden model.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from hw.functional import raise_on_difference
from hw.timing import layer_engine_cycles
from quant.archs.gcn.integer import QuantizedGCNLayer, gcn_layer_trace, layer_constants
from quant.formats.adaptive_package import AdaptivePackageStream, encode

RTL_DIR = Path(__file__).resolve().parent
SOURCES = ["bse", "cpe", "requant", "aggregation_unit", "ap_decoder", "output_stage", "layer_engine"]
COEF_BITS = 16


class TileMismatch(AssertionError):
    """The RTL output of a tile differs from the golden integer model."""


@dataclass(frozen=True, kw_only=True)
class Tile:
    """Integer inputs, constants and golden outputs of one tile (see the module docstring for shapes)."""

    nodes: np.ndarray       # (n,) global node IDs, rows first
    x_codes: np.ndarray     # (n, F) int8
    x_bits: np.ndarray      # (n,)
    w_codes: np.ndarray     # (L, F) int8, w_bits-bit signed
    xw_mult: np.ndarray     # (n, L)
    xw_shift: np.ndarray    # (n, L)
    xw_bits: np.ndarray     # (n, L)
    indptr: np.ndarray      # (R+1,) CSR of the rows' in-edges, local source IDs
    indices: np.ndarray     # (E,)
    coef: np.ndarray        # (E,) unsigned
    agg_mult: np.ndarray    # (R, L)  zeros when the layer has no q_aggregate
    agg_shift: np.ndarray   # (R, L)
    agg_bits: np.ndarray    # (R,)
    bias: np.ndarray        # (R, L) in accumulator units, zeros without bias
    out_mult: np.ndarray    # (R, L)  zeros for the last layer
    out_shift: np.ndarray   # (R, L)
    out_bits: np.ndarray    # (R,)
    agg_en: bool
    relu_en: bool
    out_en: bool
    psum_bits: int
    frac_bits: int
    w_bits: int             # signed weight width (layer_engine's W_BITS)
    xw: np.ndarray          # (n, L) golden XW codes
    psum: np.ndarray        # (R, L) golden partial sums
    out: np.ndarray         # (R, L) golden layer output (next-layer codes or the 32-bit accumulator)

    @property
    def num_rows(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def nz_rows(self) -> int:
        """Local nodes with a non-zero input row (the XW rows the C-PE produces)."""
        return int((self.x_codes != 0).any(axis=1).sum())

    def stream(self) -> AdaptivePackageStream:
        return encode(self.x_codes, self.x_bits)

    def degrees(self) -> np.ndarray:
        return np.diff(self.indptr)

    def predicted_cycles(self) -> int:
        """hw/timing.py's cycle count for this tile (no idle inputs, no back-pressure)."""
        stream = self.stream() if self.nz_rows else None
        return layer_engine_cycles(stream, self.degrees())

    def parameters(self, max_nodes: int | None = None) -> dict:
        """layer_engine parameters that hold this tile (``max_nodes`` rounds the node memory up, to share builds)."""
        n = max(int(max_nodes or 0), self.x_codes.shape[0], 2)
        f = max(self.x_codes.shape[1], 2)
        return {"LANES": self.w_codes.shape[0], "MAX_NODES": n, "NODE_BITS": max(1, math.ceil(math.log2(n))),
                "MAX_FEATURES": f, "FEAT_BITS": max(1, math.ceil(math.log2(f))), "W_BITS": self.w_bits,
                "PSUM_BITS": self.psum_bits,
                "COEF_BITS": COEF_BITS, "FRAC_BITS": self.frac_bits}

    def save(self, path: Path) -> None:
        np.savez(path, **{k: np.asarray(v) for k, v in asdict(self).items()})

    @classmethod
    def load(cls, path: Path) -> Tile:
        with np.load(path) as z:
            kw = {f.name: z[f.name] for f in fields(cls)}
        for name in ("agg_en", "relu_en", "out_en"):
            kw[name] = bool(kw[name])
        for name in ("psum_bits", "frac_bits", "w_bits"):
            kw[name] = int(kw[name])
        return cls(**kw)


def per_lane(a, shape) -> np.ndarray:
    return np.broadcast_to(np.asarray(a, dtype=np.int64), shape).copy()


def cut_tile(layer: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, rows, *, constants=None,
             trace: dict | None = None) -> Tile:
    """The tile of destination ``rows`` (global IDs) of ``layer`` on ``graph``
    (:func:`quant.archs.gcn.integer.gcn_graph`). ``constants`` / ``trace``: the whole layer's
    ``layer_constants`` / ``gcn_layer_trace``, when the caller cuts many tiles (computed here otherwise).

    Raises ValueError when a constant does not fit the engine's ports (coefficients > 16 bits, bias > 32 bits).
    """
    indptr, indices, _ = graph
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size < 1 or len(set(rows.tolist())) != rows.size:
        raise ValueError("cut_tile: rows must be >= 1 distinct destination nodes")
    k = constants if constants is not None else layer_constants(layer, graph)
    trace = trace if trace is not None else gcn_layer_trace(layer, x_codes, graph, constants=k)
    slots = np.concatenate([np.arange(indptr[r], indptr[r + 1]) for r in rows])
    others = [int(s) for s in dict.fromkeys(indices[slots].tolist()) if s not in set(rows.tolist())]
    nodes = np.r_[rows, np.asarray(others, dtype=np.int64)]
    local = {int(g): i for i, g in enumerate(nodes)}
    n_all, f_out = x_codes.shape[0], layer.w_codes.shape[0]
    full = (n_all, f_out)
    coef = np.asarray(k.coef, dtype=np.int64)[slots]
    if coef.size and (coef.min() < 0 or coef.max() >= 1 << COEF_BITS):
        raise ValueError(f"cut_tile: edge coefficients span [{coef.min()}, {coef.max()}], beyond {COEF_BITS} bits")
    bias = per_lane(k.bias_int if k.bias_int is not None else 0, full)[rows]
    if bias.size and (bias.min() < -(1 << 31) or bias.max() >= 1 << 31):
        raise ValueError("cut_tile: the integer bias does not fit 32 bits")
    zeros = np.zeros(full, dtype=np.int64)
    has_agg, has_out = layer.agg_steps is not None, layer.out_steps is not None
    return Tile(
        nodes=nodes, x_codes=np.asarray(x_codes, dtype=np.int8)[nodes], x_bits=np.asarray(layer.x_bits)[nodes],
        w_codes=np.asarray(layer.w_codes, dtype=np.int8), xw_mult=per_lane(k.xw_mult, full)[nodes],
        xw_shift=per_lane(k.xw_shift, full)[nodes], xw_bits=per_lane(layer.xw_grid()[1], full)[nodes],
        indptr=np.r_[0, np.cumsum(indptr[rows + 1] - indptr[rows])].astype(np.int64),
        indices=np.asarray([local[int(s)] for s in indices[slots]], dtype=np.int64), coef=coef,
        agg_mult=(per_lane(k.agg_mult, full) if has_agg else zeros)[rows],
        agg_shift=(per_lane(k.agg_shift, full) if has_agg else zeros)[rows],
        agg_bits=(np.asarray(layer.agg_bits) if has_agg else np.zeros(n_all, np.int64))[rows],
        bias=bias, out_mult=(per_lane(k.out_mult, full) if has_out else zeros)[rows],
        out_shift=(per_lane(k.out_shift, full) if has_out else zeros)[rows],
        out_bits=(np.asarray(layer.out_bits) if has_out else np.zeros(n_all, np.int64))[rows],
        agg_en=has_agg, relu_en=bool(layer.relu), out_en=has_out, psum_bits=int(layer.psum_bits),
        frac_bits=int(layer.frac_bits), w_bits=max(int(layer.w_bits), 2), xw=trace["xw"][nodes],
        psum=trace["psum"][rows], out=trace["out"][rows])


def pick_rows(graph: tuple, max_nodes: int, max_rows: int, start: int = 0) -> np.ndarray:
    """Destination rows from ``start`` on, greedily, while rows plus their sources fit ``max_nodes`` local nodes."""
    indptr, indices, _ = graph
    rows: list[int] = []
    members: set[int] = set()
    n = indptr.shape[0] - 1
    for r in range(start, n):
        new = members | {r} | set(indices[indptr[r]:indptr[r + 1]].tolist())
        if len(new) <= max_nodes:
            rows.append(r)
            members = new
        if len(rows) == max_rows or len(members) >= max_nodes - 1:
            break
    if not rows:
        raise ValueError(f"pick_rows: no destination row from {start} fits {max_nodes} nodes")
    return np.asarray(rows, dtype=np.int64)


def simulate_tile(tile: Tile, *, sim: str, build_root: Path, work_dir: Path, idle: float = 0.0,
                  backpressure: float = 0.0, max_nodes: int | None = None, seed: int = 1,
                  log_file: Path | None = None) -> dict:
    """Run the tile through ``layer_engine`` on ``sim``; returns ``{"out", "psum" (R, L) lists, "cycles", "err"}``."""
    from hw.rtl.sim import run_cocotb

    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    tile.save(work_dir / "tile.npz")
    result = work_dir / "result.json"
    if result.exists():
        result.unlink()
    env = {"TILE_NPZ": str(work_dir / "tile.npz"), "TILE_RESULT": str(result), "TILE_IDLE": str(idle),
           "TILE_BACKPRESSURE": str(backpressure), "TILE_SEED": str(seed)}
    run_cocotb(sim, "layer_engine", [RTL_DIR / f"{m}.v" for m in SOURCES], "hw.rtl.layer_engine_tb",
               build_root=build_root, test_dir=work_dir, parameters=tile.parameters(max_nodes), extra_env=env,
               log_file=log_file)
    return json.loads(result.read_text())


def check_tile(tile: Tile, result: dict) -> None:
    """Raise :class:`TileMismatch` naming the first (row, lane) where the RTL differs from the golden model."""
    if result.get("err"):
        raise TileMismatch(f"layer_engine raised decoder error code {result['err']}")
    for name, want in (("psum", tile.psum), ("out", tile.out)):
        got = np.asarray(result[name], dtype=np.int64)
        raise_on_difference(got, want, TileMismatch,
                            f"{name}: RTL gave {got.shape[0]} rows, the golden model {want.shape[0]}",
                            lambda r, o, n, name=name, got=got, want=want:
                            f"{name}[row {r} (node {int(tile.nodes[r])}), lane {o}]: RTL {int(got[r, o])}, "
                            f"golden {int(want[r, o])} ({n} elements differ)")
