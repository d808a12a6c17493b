"""Whole GCN layers on ``hw/rtl/accel_top.v``: tiling, the memory image, the simulation and the checks.

A layer is cut into tiles of consecutive destination rows (:func:`plan_rows`: as many rows as fit ``max_nodes``
local nodes, ``max_rows`` rows and ``max_edges`` edge beats); each tile is a :class:`hw.rtl.tile.Tile` (rows
first, then their other sources; the halo's XW is recomputed in the tile). :func:`build_image` writes the memory
image that the controller walks (64-bit words, word addresses, LSB-first fields):

* word 0, layer header: ``num_tiles [15:0] | F_in [31:16] | agg_en [32] | relu_en [33] | out_en [34]``;
* the prologue: F_in weight columns (``W[:, k]``, ``W_BITS`` per lane, ``w_beats`` words each), then tile 0's
  header (2 words: ``nodes | rows << 16 | nz_rows << 32 | packages << 48``, ``words | edge_beats << 16 |
  out_addr << 32``);
* per tile, its body: one record per local node (bitmap row, xw mult / shift / bits, then for destination rows
  the output-stage constants: ``node_beats`` words for a row, ``halo_beats`` for a halo node), the package
  boundary records (``first_node | first_value << 16 | num_values << 32``), the package words, the edge beats (``coef |
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

from hw.rtl.rtl_tb import pack_lanes, unpack_lanes
from hw.rtl.tile import COEF_BITS, RTL_DIR, Tile, cut_tile
from hw.rtl.tile import SOURCES as ENGINE_SOURCES
from hw.timing import accel_top_layer_cycles
from quant.archs.gcn.integer import gcn_layer_trace, layer_constants

SOURCES = [*ENGINE_SOURCES, "accel_top", "mem_model", "accel_sim"]
TOP = "accel_sim"
WORD_BITS = 64
CONST_BITS_PER_LANE = 147  # 31 + 6 + 4 (xw) + 31 + 6 (q_aggregate) + 32 (bias) + 31 + 6 (out), see accel_top.v
MAX_LANES = 64      # accel_top.v: LANES in 1..64
MAX_FEAT_BITS = 16  # accel_top.v / ap_decoder.v: feature indices and first_value (a 16-bit record field)


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
    def node_beats(self) -> int:
        return -(-(self.max_features + self.lanes * CONST_BITS_PER_LANE + 8) // WORD_BITS)

    @property
    def halo_beats(self) -> int:
        """Words of a halo node's record (bitmap row + XW requant constants)."""
        return -(-(self.max_features + self.lanes * 41) // WORD_BITS)

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
                "MAX_EDGES": self.max_edges, "ADDR_BITS": self.addr_bits, "BURST_BEATS": self.burst_beats,
                "MAX_OUTSTANDING": self.max_outstanding, "MEM_WORDS": self.mem_words, "LATENCY": self.latency,
                "BEAT_INTERVAL": self.beat_interval}


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
    tiles: list[tuple] = field(default_factory=list)  # per tile (body_beats, stream, degrees, out_beats)
    golden: np.ndarray | None = None                   # (N, L) gcn_layer_trace "out"
    local_nodes: int = 0                               # local nodes summed over the tiles (rows + halo)

    @property
    def mem_words(self) -> int:
        return self.out_base + self.num_rows * self.params.out_beats


def _beats(value: int, n: int) -> list[int]:
    mask = (1 << WORD_BITS) - 1
    return [(value >> (WORD_BITS * j)) & mask for j in range(n)]


def _node_record(p: TopParams, tile: Tile, bitmap_row: int, i: int) -> int:
    """Bitmap row + every per-node constant of local node ``i`` (layout of accel_top.v's slices)."""
    lanes, rec, pos = p.lanes, 0, 0

    def put(value: int, width: int) -> None:
        nonlocal rec, pos
        rec |= (int(value) & ((1 << width) - 1)) << pos
        pos += width

    put(bitmap_row, p.max_features)
    put(pack_lanes(tile.xw_mult[i], 31), lanes * 31)
    put(pack_lanes(tile.xw_shift[i], 6), lanes * 6)
    put(pack_lanes(tile.xw_bits[i], 4), lanes * 4)
    if i >= tile.num_rows:  # a halo node: no output-stage constants
        return rec
    put(pack_lanes(tile.agg_mult[i], 31), lanes * 31)
    put(pack_lanes(tile.agg_shift[i], 6), lanes * 6)
    put(int(tile.agg_bits[i]), 4)
    put(pack_lanes(tile.bias[i], 32), lanes * 32)
    put(pack_lanes(tile.out_mult[i], 31), lanes * 31)
    put(pack_lanes(tile.out_shift[i], 6), lanes * 6)
    put(int(tile.out_bits[i]), 4)
    return rec


def _tile_body(p: TopParams, tile: Tile) -> tuple[list[int], tuple, object]:
    """(body words without the next header, (nodes, rows, nz, packages, words, edge beats), stream)."""
    n = tile.x_codes.shape[0]
    stream = tile.stream() if tile.nz_rows else None
    body = []
    for i in range(n):
        bm = int.from_bytes(stream.bitmap[i].tobytes(), "little") if stream is not None else 0
        body += _beats(_node_record(p, tile, bm, i), p.node_beats if i < tile.num_rows else p.halo_beats)
    npk = nw = 0
    if stream is not None:
        npk, nw = int(stream.num_packages), int(stream.words.shape[0])
        body += [int(a) | int(b) << 16 | int(c) << 32
                 for a, b, c in zip(stream.first_node, stream.first_value, stream.num_values, strict=True)]
        body += [int(w) for w in stream.words]
    edges = []
    for r in range(tile.num_rows):
        slots = range(int(tile.indptr[r]), int(tile.indptr[r + 1]))
        if len(slots) == 0:
            edges.append(1 << 48)
        edges += [int(tile.coef[s]) | int(tile.indices[s]) << 32 | int(k == len(slots) - 1) << 48
                  for k, s in enumerate(slots)]
    body += edges
    counts = (n, tile.num_rows, tile.nz_rows, npk, nw, len(edges))
    for name, got, cap in (("local nodes", n, p.max_nodes), ("rows", tile.num_rows, p.max_rows),
                           ("packages", npk, p.max_pkgs), ("package words", nw, p.max_words),
                           ("edge beats", len(edges), p.max_edges)):
        if got > cap:
            raise ValueError(f"build_image: a tile has {got} {name}; the RTL holds {cap}")
    return body, counts, stream


def build_image(layer, x_codes: np.ndarray, graph: tuple, params: TopParams) -> LayerImage:
    """The memory image of ``layer`` on ``graph`` with input ``x_codes`` (see the module docstring)."""
    x_codes = np.asarray(x_codes)
    n, f_in = x_codes.shape
    if f_in > params.max_features:
        raise ValueError(f"build_image: {f_in} input features; the RTL holds {params.max_features}")
    k = layer_constants(layer, graph)
    trace = gcn_layer_trace(layer, x_codes, graph, constants=k)
    row_sets = plan_rows(graph, params.max_nodes, params.max_rows, params.max_edges)
    p, ob = params, params.out_beats
    w = np.asarray(layer.w_codes, dtype=np.int64)
    prologue = [b for c in range(f_in) for b in _beats(pack_lanes(w[:, c], p.w_bits), p.w_beats)]
    bodies, headers, meta = [], [], []
    for rows in row_sets:
        tile = cut_tile(layer, x_codes, graph, rows, constants=k, trace=trace)
        body, counts, stream = _tile_body(p, tile)
        bodies.append(body)
        headers.append((counts, int(rows[0])))
        meta.append((stream, tile.degrees(), tile.num_rows * ob))
    size = 1 + len(prologue) + 2 + sum(len(b) + 2 for b in bodies) - 2
    out_base = -(-size // 64) * 64

    def header(i: int) -> list[int]:
        (nodes, rows, nz, npk, nw, ne), first = headers[i]
        return [nodes | rows << 16 | nz << 32 | npk << 48, nw | ne << 16 | (out_base + first * ob) << 32]

    has_agg, has_out = layer.agg_steps is not None, layer.out_steps is not None
    words = [len(bodies) | f_in << 16 | int(has_agg) << 32 | int(bool(layer.relu)) << 33 | int(has_out) << 34]
    words += prologue + header(0)
    tiles = []
    for i, body in enumerate(bodies):
        nxt = header(i + 1) if i + 1 < len(bodies) else []
        words += body + nxt
        stream, degrees, out_beats = meta[i]
        tiles.append((len(body) + len(nxt), stream, degrees, out_beats))
    assert len(words) == size
    need = out_base + n * ob
    p = p if p.mem_words >= need else sized(p, need)
    return LayerImage(params=p, words=words, out_base=out_base, num_rows=n, lanes=p.lanes,
                      prologue_beats=len(prologue) + 2, tiles=tiles, golden=np.asarray(trace["out"], np.int64),
                      local_nodes=sum(h[0][0] for h in headers))


def model_cycles(img: LayerImage) -> dict[str, int]:
    """:func:`hw.timing.accel_top_layer_cycles` of the image (the RTL's cycle model)."""
    return accel_top_layer_cycles(img.prologue_beats, img.tiles, img.params.latency)


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
