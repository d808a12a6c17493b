"""Whole GCN layers on ``hw/rtl/accel_top.v``: tiling, the memory image, the simulation and the checks.

A layer runs in two passes. Combination tiles (:func:`plan_comb_rows`: consecutive rows, each node once) compute
XW and write each row to every aggregation tile that reads it; aggregation tiles (:func:`plan_rows`: as many
destination rows as fit ``max_nodes`` local nodes, ``max_rows`` rows and ``max_edges`` edge beats) are
:class:`hw.rtl.tile.Tile` cuts (rows first, then their other sources, the *halo*) whose XW rows arrive from memory.
:func:`build_image` writes the memory image that the controller walks (64-bit words, word addresses, LSB-first
fields):

* word 0, layer header: ``combination tiles [15:0] | F_in [31:16] | agg_en [32] | relu_en [33] | out_en [34] |
  bias_row [35] | aggregation tiles [63:48]``;
* the prologue: F_in weight columns (``W[:, k]``, ``W_BITS`` per lane, ``w_beats`` words each), the layer's
  bias (``b_beats`` words; zero when the bias differs between rows and goes into the row records), then the first
  tile's header (2 words: ``nodes | rows << 16 | nz_rows << 32 | packages << 48``, ``words | list << 16 |
  out_addr << 32``; ``list`` = copy-list entries of a combination tile, edge beats of an aggregation tile);
* per combination tile, its body: one record per row (bitmap row, xw mult / shift / bits: ``c_beats`` words), the
  package boundary records (``first_node | first_value << 16 | num_values << 32``), the package words, the copy
  list (``local row | XW address << 32``: one entry per place the row's XW goes), then the next tile's header;
* per aggregation tile, its body: the XW block (one row per local node, ``x_beats`` words, zero in the image and
  written by the combination pass), one output-stage record per row (the constants the layer uses, each
  beat-aligned: q_aggregate mult / shift / bits if ``agg_en``, the bias if ``bias_row``, the next-layer requant if
  ``out_en``), the edge beats (``coef |
  src << 32 | last << 48``; a zero-degree row is one beat with coefficient 0), then the next tile's header;
* the output region: row ``r`` of the layer at ``out_base + r * out_beats`` (32 bits per lane).

:func:`simulate_layer` runs ``hw/rtl/accel_top_tb.py`` (the testbench only starts the run, waits for ``done``
and reads the counters; the memory model is preloaded with ``$readmemh`` and dumps the output region with
``$writememh``); :func:`check_layer` raises :class:`LayerMismatch` naming the first (layer, node, feature) that
differs; :func:`model_cycles` is :func:`hw.timing.accel_top_layer_cycles` on the same image.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from hw.requant_constants import (
    BIAS_BITS,
    CODE_BITS_FIELD,
    MULT_BITS,
    SHIFT_BITS,
    requant_constant_bits,
    xw_constant_bits,
)
from hw.rtl.rtl_tb import pack_lanes, unpack_lanes
from hw.rtl.tile import COEF_BITS, RTL_DIR, Tile, cut_tile, per_lane
from hw.rtl.tile import SOURCES as ENGINE_SOURCES
from hw.timing import accel_top_layer_cycles
from quant.archs.gcn.integer import gcn_layer_trace, layer_constants
from quant.formats.adaptive_package import encode

SOURCES = [*ENGINE_SOURCES, "accel_top", "mem_model", "accel_sim"]
TOP = "accel_sim"
WORD_BITS = 64
XW_CODE_BITS = 8               # the engine's XW buffer: 8 bits per lane
MAX_LANES = 64      # accel_top.v: LANES in 1..64
MAX_FEAT_BITS = 16  # accel_top.v / ap_decoder.v: feature indices and first_value (a 16-bit record field)


# phase of hw.timing.accel_top_layer_cycles -> the accel_top.v counter that measures it
PHASE_COUNTERS = {"total": "cnt_total", "load": "cnt_load", "combination": "cnt_comb", "xw_writes": "cnt_xw",
                  "aggregation": "cnt_agg", "writeback": "cnt_wb", "wait": "cnt_wait"}


def rtl_phases(res: dict) -> dict[str, int]:
    """The RTL's counters of a :func:`simulate_layer` result, named as :func:`model_cycles` names the phases."""
    return {phase: res[counter] for phase, counter in PHASE_COUNTERS.items()}


class LayerMismatch(AssertionError):
    """An RTL output of a whole layer differs from the golden integer model."""


@dataclass(frozen=True, kw_only=True)
class TopParams:
    """``accel_sim`` parameters. Fixed by the RTL (not from the accelerator config): one engine with ``lanes`` =
    the layer's output channels, a 64-bit memory port at one beat per cycle, the tile buffers below."""

    lanes: int
    max_features: int
    w_bits: int
    psum_bits: int
    frac_bits: int
    max_nodes: int = 256
    max_rows: int = 64
    max_pkgs: int = 2048
    max_words: int = 2048
    max_edges: int = 2048
    max_copies: int = 2048
    burst_beats: int = 16       # dram_access_bytes / 8
    max_outstanding: int = 16
    latency: int = 100          # dram_latency_cycles
    beat_interval: int = 1      # ceil(8 / bytes_per_cycle)
    mem_words: int = 1 << 16

    def __post_init__(self) -> None:
        """The ranges ``accel_top.v`` asserts at elaboration, refused here with what is out of range."""
        if not 1 <= self.lanes <= MAX_LANES:
            raise ValueError(f"the layer has {self.lanes} output channels; the RTL top has 1..{MAX_LANES} lanes")
        if self.feat_bits > MAX_FEAT_BITS:
            raise ValueError(f"the layer has {self.max_features} input features; the RTL top's feature indices "
                             f"have at most {MAX_FEAT_BITS} bits ({1 << MAX_FEAT_BITS} features)")
        if not 1 <= self.max_rows <= self.max_nodes:
            raise ValueError(f"max_rows={self.max_rows}: must lie in 1..max_nodes={self.max_nodes}")

    @property
    def node_bits(self) -> int:
        return max(1, math.ceil(math.log2(self.max_nodes)))

    @property
    def feat_bits(self) -> int:
        return max(1, math.ceil(math.log2(self.max_features)))

    @property
    def addr_bits(self) -> int:
        return max(8, math.ceil(math.log2(self.mem_words)))

    @property
    def c_beats(self) -> int:
        """Words of a combination row's record (bitmap row + XW requant constants)."""
        return -(-(self.max_features + xw_constant_bits(self.lanes)) // WORD_BITS)

    @property
    def a_beats(self) -> int:
        """Words of one requant's constants (q_aggregate or the next-layer requant) in an output-stage record."""
        return -(-requant_constant_bits(self.lanes) // WORD_BITS)

    @property
    def b_beats(self) -> int:
        """Words of a bias (per row in an output-stage record, or the layer's in the prologue)."""
        return -(-(self.lanes * BIAS_BITS) // WORD_BITS)

    def o_beats(self, agg: bool, bias_row: bool, out: bool) -> int:
        """Words of an output-stage record: the constants the layer uses."""
        return self.a_beats * (int(agg) + int(out)) + self.b_beats * int(bias_row)

    @property
    def x_beats(self) -> int:
        """Words of one XW row."""
        return -(-(self.lanes * XW_CODE_BITS) // WORD_BITS)

    @property
    def w_beats(self) -> int:
        return -(-(self.lanes * self.w_bits) // WORD_BITS)

    @property
    def out_beats(self) -> int:
        return -(-(self.lanes * 32) // WORD_BITS)

    def verilog(self) -> dict:
        return {"LANES": self.lanes, "MAX_NODES": self.max_nodes, "NODE_BITS": self.node_bits,
                "MAX_FEATURES": self.max_features, "FEAT_BITS": self.feat_bits, "W_BITS": self.w_bits,
                "PSUM_BITS": self.psum_bits, "COEF_BITS": COEF_BITS, "FRAC_BITS": self.frac_bits,
                "MAX_ROWS": self.max_rows, "MAX_PKGS": self.max_pkgs, "MAX_WORDS": self.max_words,
                "MAX_EDGES": self.max_edges, "MAX_COPIES": self.max_copies, "ADDR_BITS": self.addr_bits,
                "BURST_BEATS": self.burst_beats, "MAX_OUTSTANDING": self.max_outstanding,
                "MEM_WORDS": self.mem_words, "LATENCY": self.latency, "BEAT_INTERVAL": self.beat_interval}


def params_for(layer, f_in: int, cfg=None, **overrides) -> TopParams:
    """Parameters for ``layer`` (``f_in`` input features) with the memory timing of ``cfg``
    (:class:`hw.config.AcceleratorConfig`, default the ``mega`` preset): latency = ``dram_latency_cycles``,
    burst = ``dram_access_bytes / 8`` words, one 64-bit beat every ``ceil(8 / bytes_per_cycle)`` cycles."""
    from hw.config import mega

    cfg = cfg or mega()
    kw = {"lanes": int(layer.w_codes.shape[0]), "max_features": max(2, int(f_in)),
          "w_bits": max(int(layer.w_bits), 2), "psum_bits": int(layer.psum_bits), "frac_bits": int(layer.frac_bits),
          "burst_beats": max(1, min(256, cfg.dram_access_bytes // 8)), "latency": int(cfg.dram_latency_cycles),
          "beat_interval": max(1, math.ceil(8 / cfg.bytes_per_cycle))}
    kw.update(overrides)
    return TopParams(**kw)


def plan_rows(graph: tuple, max_nodes: int, max_rows: int, max_edges: int) -> list[np.ndarray]:
    """Consecutive destination rows per tile: a row joins while the tile keeps <= ``max_nodes`` local nodes,
    ``max_rows`` rows and ``max_edges`` edge beats. Raises ValueError when one row alone does not fit."""
    indptr, indices, _ = graph
    n = indptr.shape[0] - 1
    tiles, rows, members, beats = [], [], set(), 0
    for r in range(n):
        src = indices[indptr[r]:indptr[r + 1]].tolist()
        new, b = members | {r} | set(src), max(len(src), 1)
        if rows and (len(new) > max_nodes or len(rows) == max_rows or beats + b > max_edges):
            tiles.append(np.asarray(rows, dtype=np.int64))
            rows, members, beats = [], set(), 0
            new = {r} | set(src)
        if len(new) > max_nodes or b > max_edges:
            raise ValueError(f"plan_rows: row {r} needs {len(new)} local nodes and {b} edge beats; the tile holds "
                             f"{max_nodes} and {max_edges}")
        rows.append(r)
        members, beats = new, beats + b
    if rows:
        tiles.append(np.asarray(rows, dtype=np.int64))
    return tiles


@dataclass(kw_only=True)
class LayerImage:
    """The memory image of one layer and what the checks and the cycle model need from it."""

    params: TopParams
    words: list[int]                 # the image from word 0
    out_base: int
    num_rows: int                    # destination rows of the layer (= nodes)
    lanes: int
    prologue_beats: int
    comb_tiles: list[tuple] = field(default_factory=list)  # per combination tile (body_beats, stream, xw_beats)
    agg_tiles: list[tuple] = field(default_factory=list)   # per aggregation tile (body_beats, degrees, out_beats)
    comb_rows: list[np.ndarray] = field(default_factory=list)  # rows of each combination tile
    agg_nodes: list[np.ndarray] = field(default_factory=list)  # local nodes (rows, then halo) of each aggregation tile
    golden: np.ndarray | None = None                        # (N, L) gcn_layer_trace "out"
    local_nodes: int = 0              # XW rows the aggregation tiles read (rows + halo, summed over the tiles)

    @property
    def num_tiles(self) -> int:
        return len(self.comb_tiles) + len(self.agg_tiles)

    @property
    def mem_words(self) -> int:
        return self.out_base + self.num_rows * self.params.out_beats


def _beats(value: int, n: int) -> list[int]:
    mask = (1 << WORD_BITS) - 1
    return [(value >> (WORD_BITS * j)) & mask for j in range(n)]


class _Fields:
    """Packs fields LSB first into one integer record."""

    def __init__(self) -> None:
        self.value, self.pos = 0, 0

    def put(self, value: int, width: int) -> _Fields:
        self.value |= (int(value) & ((1 << width) - 1)) << self.pos
        self.pos += width
        return self


def _comb_record(p: TopParams, bitmap_row: int, mult, shift, bits) -> int:
    """Bitmap row + XW requant constants of one row (accel_top.v's combination record)."""
    return (_Fields().put(bitmap_row, p.max_features).put(pack_lanes(mult, MULT_BITS), p.lanes * MULT_BITS)
            .put(pack_lanes(shift, SHIFT_BITS), p.lanes * SHIFT_BITS)
            .put(pack_lanes(bits, CODE_BITS_FIELD), p.lanes * CODE_BITS_FIELD).value)


def _requant_record(p: TopParams, mult, shift, bits: int) -> list[int]:
    return _beats(_Fields().put(pack_lanes(mult, MULT_BITS), p.lanes * MULT_BITS)
                  .put(pack_lanes(shift, SHIFT_BITS), p.lanes * SHIFT_BITS).put(int(bits), CODE_BITS_FIELD).value,
                  p.a_beats)


def _out_record(p: TopParams, tile: Tile, r: int, bias_row: bool) -> list[int]:
    """Output-stage record of row ``r`` of an aggregation tile (accel_top.v): the q_aggregate constants if the
    layer has them, the row's bias if the bias differs between rows, the next-layer requant if there is one."""
    words = _requant_record(p, tile.agg_mult[r], tile.agg_shift[r], tile.agg_bits[r]) if tile.agg_en else []
    words += _beats(pack_lanes(tile.bias[r], BIAS_BITS), p.b_beats) if bias_row else []
    return words + (_requant_record(p, tile.out_mult[r], tile.out_shift[r], tile.out_bits[r]) if tile.out_en else [])


def _check_caps(p: TopParams, kind: str, counts: dict) -> None:
    for name, got in counts.items():
        cap = {"local nodes": p.max_nodes, "rows": p.max_rows, "packages": p.max_pkgs, "package words": p.max_words,
               "edge beats": p.max_edges, "copies": p.max_copies}[name]
        if got > cap:
            raise ValueError(f"build_image: {kind} tile has {got} {name}; the RTL holds {cap}")


def _agg_body(p: TopParams, tile: Tile, bias_row: bool) -> tuple[list[int], list[int]]:
    """(body words without the next header, its 2-word header without out_addr) of an aggregation tile."""
    n, rows = tile.x_codes.shape[0], tile.num_rows
    body = [0] * (n * p.x_beats)  # the XW block, written by the combination pass
    for r in range(rows):
        body += _out_record(p, tile, r, bias_row)
    edges = []
    for r in range(rows):
        slots = range(int(tile.indptr[r]), int(tile.indptr[r + 1]))
        if len(slots) == 0:
            edges.append(1 << 48)
        edges += [int(tile.coef[s]) | int(tile.indices[s]) << 32 | int(k == len(slots) - 1) << 48
                  for k, s in enumerate(slots)]
    _check_caps(p, "an aggregation", {"local nodes": n, "rows": rows, "edge beats": len(edges)})
    return body + edges, [n | rows << 16, len(edges) << 16]


def plan_comb_rows(n: int, copies: np.ndarray, max_rows: int, max_copies: int) -> list[np.ndarray]:
    """Consecutive rows per combination tile: a row joins while the tile keeps <= ``max_rows`` rows and
    ``max_copies`` XW row writes (``copies[r]``: the aggregation tiles that read row ``r``)."""
    tiles, lo, total = [], 0, 0
    for r in range(n):
        c = int(copies[r])
        if c > max_copies:
            raise ValueError(f"plan_comb_rows: row {r} is read by {c} aggregation tiles; a combination tile writes "
                             f"{max_copies} XW rows")
        if r > lo and (r - lo == max_rows or total + c > max_copies):
            tiles.append(np.arange(lo, r))
            lo, total = r, 0
        total += c
    tiles.append(np.arange(lo, n))
    return tiles


def _comb_body(p: TopParams, stream, mult: np.ndarray, shift: np.ndarray, xw_bits: np.ndarray) -> list[int]:
    """Row records (bitmap row + XW constants; ``mult`` etc. (R, L)), package records and words of a combination
    tile (``stream`` None: no non-zero input)."""
    body = []
    for i in range(mult.shape[0]):
        bm = int.from_bytes(stream.bitmap[i].tobytes(), "little") if stream is not None else 0
        body += _beats(_comb_record(p, bm, mult[i], shift[i], xw_bits[i]), p.c_beats)
    if stream is not None:
        body += [int(a) | int(b) << 16 | int(c) << 32
                 for a, b, c in zip(stream.first_node, stream.first_value, stream.num_values, strict=True)]
        body += [int(w) for w in stream.words]
    return body


def _comb_tiles(p: TopParams, row_sets: list[np.ndarray], x: np.ndarray, x_bits: np.ndarray, mult: np.ndarray,
                shift: np.ndarray, xw_bits: np.ndarray) -> list[tuple]:
    """Every combination tile as (rows, body, (rows, nz rows, packages, words), stream), halving a tile whose
    packages overflow the package buffers. ``x`` (N, F) int8 codes; ``mult`` / ``shift`` / ``xw_bits`` (N, L)."""
    out, todo = [], list(reversed(row_sets))
    while todo:
        rows = todo.pop()
        nz = int((x[rows] != 0).any(axis=1).sum())
        stream = encode(x[rows], x_bits[rows]) if nz else None
        npk, nw = (int(stream.num_packages), int(stream.words.shape[0])) if stream is not None else (0, 0)
        if (npk > p.max_pkgs or nw > p.max_words) and rows.size > 1:
            half = rows.size // 2
            todo += [rows[half:], rows[:half]]
            continue
        _check_caps(p, "a combination", {"packages": npk, "package words": nw})
        out.append((rows, _comb_body(p, stream, mult[rows], shift[rows], xw_bits[rows]), (rows.size, nz, npk, nw),
                    stream))
    return out


def build_image(layer, x_codes: np.ndarray, graph: tuple, params: TopParams) -> LayerImage:
    """The memory image of ``layer`` on ``graph`` with input ``x_codes`` (see the module docstring)."""
    x_codes = np.asarray(x_codes)
    n, f_in = x_codes.shape
    if f_in > params.max_features:
        raise ValueError(f"build_image: {f_in} input features; the RTL holds {params.max_features}")
    k = layer_constants(layer, graph)
    trace = gcn_layer_trace(layer, x_codes, graph, constants=k)
    p, ob, xb = params, params.out_beats, params.x_beats
    bias = per_lane(k.bias_int if k.bias_int is not None else 0, (n, p.lanes))  # (N, L) accumulator units
    bias_row = bool((bias != bias[:1]).any())  # else the layer's bias goes once into the prologue
    agg = []  # (tile, body, header)
    readers: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # node -> (aggregation tile, local index)
    for rows in plan_rows(graph, p.max_nodes, p.max_rows, p.max_edges):
        tile = cut_tile(layer, x_codes, graph, rows, constants=k, trace=trace)
        for j, g in enumerate(tile.nodes.tolist()):
            readers[g].append((len(agg), j))
        agg.append((tile, *_agg_body(p, tile, bias_row)))
    copies = np.asarray([len(r) for r in readers])
    full = (n, p.lanes)
    comb = _comb_tiles(p, plan_comb_rows(n, copies, p.max_nodes, p.max_copies), np.asarray(x_codes, np.int8),
                       np.asarray(layer.x_bits), per_lane(k.xw_mult, full), per_lane(k.xw_shift, full),
                       per_lane(layer.xw_grid()[1], full))
    w = np.asarray(layer.w_codes, dtype=np.int64)
    prologue = [b for c in range(f_in) for b in _beats(pack_lanes(w[:, c], p.w_bits), p.w_beats)]
    prologue += _beats(0 if bias_row else pack_lanes(bias[0], BIAS_BITS), p.b_beats)
    # addresses: header, prologue (+ first header), combination bodies (+ next header), aggregation bodies
    comb_sizes = [len(body) + int(copies[rows].sum()) for rows, body, _, _ in comb]
    agg_start, pos = [], 1 + len(prologue) + 2 + sum(s + 2 for s in comb_sizes)
    for _, body, _ in agg:
        agg_start.append(pos)
        pos += len(body) + 2
    size = pos - 2
    out_base = -(-size // 64) * 64
    headers, comb_meta, agg_meta = [], [], []
    for (rows, body, (nr, nz, npk, nw), stream), cs in zip(comb, comb_sizes, strict=True):
        entries = [i | (agg_start[d] + j * xb) << 32 for i, g in enumerate(rows.tolist()) for d, j in readers[g]]
        _check_caps(p, "a combination", {"copies": len(entries)})
        body += entries
        headers.append([nr | nr << 16 | nz << 32 | npk << 48, nw | len(entries) << 16])
        comb_meta.append((stream, len(entries) * xb))
        assert len(body) == cs
    for tile, _, (h0, h1) in agg:
        headers.append([h0, h1 | (out_base + int(tile.nodes[0]) * ob) << 32])
        agg_meta.append((tile.degrees(), tile.num_rows * ob))
    has_agg, has_out = layer.agg_steps is not None, layer.out_steps is not None
    words = [len(comb) | f_in << 16 | int(has_agg) << 32 | int(bool(layer.relu)) << 33 | int(has_out) << 34
             | int(bias_row) << 35 | len(agg) << 48]
    words += prologue + headers[0]
    bodies = [c[1] for c in comb] + [a[1] for a in agg]
    sizes = []
    for i, body in enumerate(bodies):
        nxt = headers[i + 1] if i + 1 < len(bodies) else []
        words += body + nxt
        sizes.append(len(body) + len(nxt))
    assert len(words) == size and all(words[agg_start[d] - 2:agg_start[d]] == headers[len(comb) + d]
                                      for d in range(len(agg)))
    need = out_base + n * ob
    p = p if p.mem_words >= need else sized(p, need)
    nc = len(comb)
    return LayerImage(params=p, words=words, out_base=out_base, num_rows=n, lanes=p.lanes,
                      prologue_beats=len(prologue) + 2,
                      comb_tiles=[(sizes[i], *comb_meta[i]) for i in range(nc)],
                      agg_tiles=[(sizes[nc + d], *agg_meta[d]) for d in range(len(agg))],
                      comb_rows=[c[0] for c in comb], agg_nodes=[a[0].nodes for a in agg],
                      golden=np.asarray(trace["out"], np.int64), local_nodes=int(copies.sum()))


def model_cycles(img: LayerImage) -> dict[str, int]:
    """:func:`hw.timing.accel_top_layer_cycles` of the image (the RTL's cycle model)."""
    return accel_top_layer_cycles(img.prologue_beats, img.comb_tiles, img.agg_tiles, img.params.latency)


def sized(params: TopParams, img_words: int) -> TopParams:
    """``params`` with a memory of the next power of two >= ``img_words`` (at least 2^12 words)."""
    return replace(params, mem_words=1 << max(12, math.ceil(math.log2(max(1, img_words)))))


def simulate_layer(img: LayerImage, *, sim: str, build_root: Path, work_dir: Path, log_file: Path | None = None,
                   module_dirs: tuple = ()) -> dict:
    """Run the layer on ``sim``; returns the counters, ``out`` (N, L), the wall times and the build time."""
    from hw.rtl.sim import build_dir_for, run_cocotb

    p = img.params
    if img.mem_words > p.mem_words:
        raise ValueError(f"simulate_layer: the image needs {img.mem_words} words; the memory has {p.mem_words}")
    work_dir = Path(work_dir).resolve()
    work_dir.mkdir(parents=True, exist_ok=True)
    memfile, dumpfile, result = work_dir / "image.hex", work_dir / "out.hex", work_dir / "result.json"
    memfile.write_text("".join(f"{w:016x}\n" for w in img.words))
    for f in (dumpfile, result):
        if f.exists():
            f.unlink()
    lo, hi = img.out_base, img.mem_words - 1
    sources = [RTL_DIR / f"{m}.v" for m in SOURCES]
    fast = sim == "verilator"
    built = build_dir_for(Path(build_root), sim, TOP, sources, p.verilog(), fast)
    cached = (built / TOP).exists() or (built / "sim.vvp").exists()
    t0 = time.perf_counter()
    run_cocotb(sim, TOP, sources, "hw.rtl.accel_top_tb", build_root=Path(build_root), test_dir=work_dir,
               parameters=p.verilog(), extra_env={"TOP_RESULT": str(result),
                                                  "TOP_MAX_CYCLES": str(4 * model_cycles(img)["total"] + 10000)},
               plusargs=[f"+MEMFILE={memfile}", f"+DUMPFILE={dumpfile}", f"+DUMP_LO={lo}", f"+DUMP_HI={hi}"],
               log_file=log_file, module_dirs=module_dirs, fast=fast)
    wall = time.perf_counter() - t0
    res = json.loads(result.read_text())
    res["wall_s"] = wall
    res["cached_build"] = cached
    res["out"] = read_outputs(img, dumpfile)
    return res


def read_outputs(img: LayerImage, dumpfile: Path) -> np.ndarray:
    """(N, L) int64 output codes from the ``$writememh`` dump of the output region."""
    vals = []
    for line in Path(dumpfile).read_text().split("\n"):
        line = line.split("//")[0].strip()
        if line and not line.startswith("@"):
            vals.extend(int(t, 16) if "x" not in t.lower() else 0 for t in line.split())
    ob = img.params.out_beats
    if len(vals) < img.num_rows * ob:
        raise LayerMismatch(f"the memory dump holds {len(vals)} words; the layer's outputs need {img.num_rows * ob}")
    rows = [sum(vals[r * ob + j] << (WORD_BITS * j) for j in range(ob)) for r in range(img.num_rows)]
    return np.asarray([unpack_lanes(v, 32, img.lanes) for v in rows], dtype=np.int64)


def check_layer(got: np.ndarray, want: np.ndarray, layer: int) -> None:
    """Raise :class:`LayerMismatch` naming the first (node, feature) of ``layer`` where ``got`` != ``want``."""
    got, want = np.asarray(got, np.int64), np.asarray(want, np.int64)
    if got.shape != want.shape:
        raise LayerMismatch(f"layer {layer}: RTL output shape {got.shape}, golden {want.shape}")
    bad = np.argwhere(got != want)
    if bad.size:
        node, feat = (int(v) for v in bad[0])
        raise LayerMismatch(f"layer {layer}, node {node}, feature {feat}: RTL {int(got[node, feat])}, golden "
                            f"{int(want[node, feat])} ({bad.shape[0]} elements differ)")
