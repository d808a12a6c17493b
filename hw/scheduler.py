"""Scheduler: maps a workload's layers onto the engines as tile pipelines sharing one DRAM channel.

Combination-first (MEGA, GCNAX), per layer:

* phase C over node tiles: ``load_x`` (feature stream + weights; with ``requant_constants`` the rows' XW
  requantization constants, :mod:`hw.requant_constants`) -> ``decoder`` -> ``combination`` ->
  ``writeback_c`` (encoder + XW stream write + Condense-Edge pass 1 when enabled);
* extra Condense-Edge passes when there are more subgraphs than eID FIFOs (re-read XW, condense), one after
  another on the one re-read engine (also across layers);
* phase A over destination tiles: ``load_a`` (``edge_bytes`` per edge, the tile's own XW block, cross-tile
  sources by the configured policy, with ``requant_constants`` the rows' output-stage constants) -> ``decoder``
  -> ``aggregation`` -> ``writeback_a`` (next layer's feature stream).

Aggregation-first (HyGCN's GCN layers; GIN and GraphSAGE layers on every preset, ``hw.aggregate_first``): one
pipeline per layer, ``load_a`` (edges + X rows) -> (``decoder`` for a packed GIN / GraphSAGE input) ->
``aggregation`` -> ``combination`` (GIN / GraphSAGE: every integer matmul of the layer, back to back) ->
``writeback_a``. Engines overlap across phases and layers: an aggregation tile waits only
for the combination tiles its sources live in; a combination tile of the next layer waits only for the
aggregation of its own nodes. Tiles = ``tile_nodes`` consecutive nodes, sized so that the tile's partial sums
fill at most half of the aggregation buffer (double buffering); a stage's output queue holds ``engine_buffers``
tiles (1: a tile's load waits until the engine has finished the previous tile, as on the RTL top).
"""

from __future__ import annotations

import numpy as np

from hw.aggregate_first import pass_bit_work
from hw.aggregation import aggregation_cycles
from hw.buffer import Buffer
from hw.combination import bitserial_cycles, mac_cycles
from hw.condense import EID_BYTES, condense_cycles, condense_plan
from hw.config import AcceleratorConfig, ConfigError
from hw.decoder import decode_cycles
from hw.dram import AddressMap, DRAMChannel
from hw.layout import FeatureLayout, feature_layout
from hw.pipeline import Stage, StageStats, run_pipeline
from hw.requant_constants import output_stage_constant_bits, xw_constant_bits
from hw.timing import requant_cycles
from hw.workload import LayerTensors

STAGES = ("load_x", "decoder", "combination", "writeback_c", "condense", "reread", "load_a", "aggregation",
          "writeback_a")


def tile_nodes(cfg: AcceleratorConfig, width: int) -> int:
    """Nodes per tile: ``width`` partial sums of ``psum_bits`` per node in half the aggregation buffer."""
    return max(1, (cfg.buffer_bytes["aggregation"] // 2) // max(1, width * cfg.psum_bits // 8))


def runs_combination_first(cfg: AcceleratorConfig, lt) -> bool:
    """A GCN layer on a combination-first config; every other layer runs aggregation-first."""
    return cfg.order == "combination_first" and isinstance(lt, LayerTensors)


def constants_unsupported(cfg: AcceleratorConfig, workload) -> str | None:
    """Why ``cfg`` cannot stream ``workload``'s requantization constants (``requant_constants`` covers
    combination-first GCN layers), or None."""
    agg_first = [li for li, lt in enumerate(workload.layers) if not runs_combination_first(cfg, lt)]
    if not cfg.requant_constants or not agg_first:
        return None
    return (f"AcceleratorConfig({cfg.name}): requant_constants streams the constants of combination-first GCN "
            f"layers; layers {agg_first} of {workload.name} run aggregation-first: set it to false")


class Simulator:
    """Holds the shared DRAM, buffers and per-stage stats; ``run(workload)`` returns the total cycles."""

    def __init__(self, cfg: AcceleratorConfig) -> None:
        self.cfg = cfg
        self.dram = DRAMChannel(cfg)
        self.amap = AddressMap(cfg.dram_row_bytes)
        self.buffers = {k: Buffer(k, v) for k, v in cfg.buffer_bytes.items()}
        self.stats = {k: StageStats() for k in STAGES}
        self.ops = {"bit_cycles": 0, "macs": 0, "accumulations": 0, "codec_bytes": 0}
        self.layer_cycles: list[float] = []
        self.input_layouts: list[FeatureLayout] = []  # layer inputs as simulated (for the functional check)
        self.reread_free = 0.0  # cycle at which the one XW re-read engine ends its last extra Condense-Edge pass

    # ---- helpers -------------------------------------------------------------------------------------------
    def _layout(self, codes: np.ndarray, bits: np.ndarray) -> FeatureLayout:
        return feature_layout(codes, bits, self.cfg.feature_format, self.cfg.feature_bits_override)

    def _place(self, name: str, lay: FeatureLayout, starts: np.ndarray) -> dict:
        """Allocate one region per stream part; returns part -> (base, per-tile offsets (T,), per-tile bytes (T,))."""
        out = {}
        for part, per_node in lay.stream.items():
            per_tile = np.add.reduceat(per_node, starts) if per_node.size else np.zeros(0, np.int64)
            base = self.amap.alloc(f"{name}.{part}", int(per_node.sum()))
            out[part] = (base, np.cumsum(per_tile) - per_tile, per_tile)
        return out

    def _stream(self, time: float, name: str, region: dict, t: int, write: bool) -> tuple[float, int]:
        """Read/write tile ``t`` of every part of a placed stream; returns (completion, bytes)."""
        done, total = time, 0
        for part, (base, off, size) in region.items():
            nbytes = int(size[t])
            if nbytes:
                done = max(done, self.dram.request(time, base + int(off[t]), nbytes, write=write,
                                                   tensor=f"{name}.{part}"))
                total += nbytes
        return done, total

    def _alloc_edges(self, name: str, num_nodes: int, num_edges: int) -> int:
        """The region of a layer's edge stream: a 4-byte row pointer per row (+1), ``edge_bytes`` per edge."""
        return self.amap.alloc(name, 4 * (num_nodes + 1) + self.cfg.edge_bytes * num_edges)

    def _read_edges(self, time: float, base: int, e0: int, e1: int, lo: int, hi: int) -> float:
        """Read the edges ``e0:e1`` and row pointers ``lo..hi`` of one tile into the edge buffer; its completion."""
        nbytes = self.cfg.edge_bytes * (e1 - e0) + 4 * (hi - lo + 1)
        self.buffers["edge"].write(nbytes)
        return self.dram.request(time, base + self.cfg.edge_bytes * e0 + 4 * lo, nbytes, write=False, tensor="edges")

    # ---- one layer -----------------------------------------------------------------------------------------
    def run(self, workload) -> float:
        why = constants_unsupported(self.cfg, workload)
        if why:
            raise ConfigError(why)
        prev = None  # (tile_nodes, end cycle per tile) of the previous layer's output
        for li, lt in enumerate(workload.layers):
            layer = self._layer_comb_first if runs_combination_first(self.cfg, lt) else self._layer_agg_first
            prev = layer(workload, li, lt, prev)
            self.layer_cycles.append(max(prev[1]))
        return max(self.layer_cycles)

    @staticmethod
    def _ready_for(prev, n: int, tn: int) -> list[float]:
        """Earliest start of each new tile of ``tn`` nodes: the previous layer's end over the nodes it covers."""
        if prev is None:
            return [0.0] * (-(-n // tn))
        ptn, ends = prev
        return [max(ends[k] for k in range(lo // ptn, (min(n, lo + tn) - 1) // ptn + 1)) for lo in range(0, n, tn)]

    def _out_layout(self, lt, f_out: int) -> FeatureLayout:
        if lt.out_bits is None:  # last layer: 32-bit accumulators
            n = lt.out_codes.shape[0]
            row = np.full(n, 4 * f_out, np.int64)
            return FeatureLayout(fmt="dense", num_features=f_out, row_bytes=row, nnz=np.full(n, f_out),
                                 bit_work=row * 8, max_bits=32, stream={"dense": row}, decode_work=0 * row)
        return self._layout(lt.out_codes.astype(np.int8), lt.out_bits)

    def _weights(self, lt, f_in: int, f_out: int) -> tuple[int, bool]:
        w_bits = 32 if self.cfg.feature_bits_override == 32 else lt.w_bits
        if isinstance(lt, LayerTensors):
            nbytes = -(-f_in * f_out * w_bits // 8)
        else:  # every combination pass's weight
            nbytes = lt.weight_bytes(w_bits)
        return nbytes, nbytes <= self.buffers["weight"].capacity

    def _layer_comb_first(self, wl, li: int, lt, prev_ready) -> tuple[int, list[float]]:
        """Combination-first layer: phase C over node tiles, the extra Condense-Edge passes, then phase A over
        destination tiles (``_CombFirstLayer``)."""
        layer = _CombFirstLayer(self, wl, li, lt)
        end_c = layer.combination_phase(prev_ready)
        group_done = layer.extra_condense_passes(end_c)
        return layer.tn, layer.aggregation_phase(end_c, group_done)

    def _pass_cost(self, cp, rows: int, bit_work: int) -> tuple[float, int]:
        """(cycles, work items) of one combination pass over a tile of ``rows`` nodes: bit-serial over the pass's
        ``bit_work`` (sum of the bits of its non-zero input codes) or a dense MAC array."""
        cfg = self.cfg
        if cfg.comb_bit_serial:
            self.ops["bit_cycles"] += bit_work * cp.f_out
            return bitserial_cycles(cfg, bit_work, cp.f_out), bit_work
        macs = rows * cp.codes.shape[1] * cp.f_out
        self.ops["macs"] += macs
        return mac_cycles(cfg, rows, cp.codes.shape[1], cp.f_out), macs

    def _layer_agg_first(self, wl, li: int, lt, prev_ready) -> tuple[int, list[float]]:
        """Aggregate X rows of the sources (window sliding = only referenced rows), then combine: HyGCN's GCN layer
        (one dense matmul of the aggregated rows), or a GIN / GraphSAGE layer (``hw.aggregate_first``: every
        preset; its combination passes on the preset's engine, its input stream decoded when packed)."""
        cfg, st, dram, buf = self.cfg, self.stats, self.dram, self.buffers
        n, f_in, f_out = lt.dims
        gcn = isinstance(lt, LayerTensors)
        tn = tile_nodes(cfg, f_in)
        starts = np.arange(0, n, tn)
        nt = starts.size
        xl, ol = self._layout(lt.x_codes, lt.x_bits), self._out_layout(lt, f_out)
        self.input_layouts.append(xl)
        x_reg = self._place(f"L{li}.x", xl, starts)
        out_reg = self._place(f"L{li}.out", ol, starts)
        row_off = np.cumsum(xl.row_bytes) - xl.row_bytes
        rows_base = self.amap.alloc(f"L{li}.x_rows", int(xl.row_bytes.sum()))
        w_bytes, w_fits = self._weights(lt, f_in, f_out)
        w_base = self.amap.alloc(f"L{li}.weights", w_bytes)
        edges_base = self._alloc_edges(f"L{li}.edges", n, wl.indices.size)
        src = wl.indices
        beats_t = np.add.reduceat(np.maximum(np.diff(wl.indptr), 1), starts) * -(-f_in // cfg.agg_lanes)
        bounds = [(int(a), int(min(n, a + tn))) for a in starts]
        passes = () if gcn else lt.passes
        staged = np.zeros(nt, np.int64) if gcn else np.add.reduceat(self._pass_input_bytes(lt), starts)  # (T,)
        batch = 1 if gcn or w_fits else max(1, int(buf["combination"].capacity // max(1, int(staged.max()))))
        pass_work = [np.add.reduceat(pass_bit_work(cp, cfg.feature_bits_override), starts)  # (T,) per pass
                     for cp in passes]
        dec_x = np.add.reduceat(xl.decode_work, starts)

        def load_a(d: int, s: float) -> float:
            lo, hi = bounds[d]
            e0, e1 = int(wl.indptr[lo]), int(wl.indptr[hi])
            done = self._read_edges(s, edges_base, e0, e1, lo, hi)
            done = max(done, self._stream(s, f"L{li}.x", x_reg, d, write=False)[0])
            first_of_batch = d % batch == 0
            if d == 0 or (not w_fits and first_of_batch):
                done = max(done, dram.request(s, w_base, w_bytes, write=False, tensor="weights"))
            buf["weight"].record(1, int(d > 0 and (w_fits or not first_of_batch)))
            cross = np.unique(src[e0:e1])
            for j in cross[(cross < lo) | (cross >= hi)].tolist():
                if not buf["input"].lookup(j, int(xl.row_bytes[j])):
                    done = max(done, dram.request(s, rows_base + int(row_off[j]), int(xl.row_bytes[j]),
                                                  write=False, tensor="x.rows"))
            return done

        def decode(d: int, s: float) -> float:  # the tile's own block; source rows are decoded on the fly
            nbytes = sum(int(v[2][d]) for v in x_reg.values())
            buf["input"].read(nbytes)
            self.ops["codec_bytes"] += nbytes
            st["decoder"].work_items += int(dec_x[d])
            return s + decode_cycles(int(dec_x[d]), cfg.num_decoders)

        def aggregate(d: int, s: float) -> float:
            lo, hi = bounds[d]
            acc = int(wl.indptr[hi] - wl.indptr[lo]) * f_in
            self.ops["accumulations"] += acc
            st["aggregation"].work_items += int(beats_t[d])
            buf["aggregation"].read(acc * cfg.psum_bits // 8)
            buf["aggregation"].write(acc * cfg.psum_bits // 8)
            return s + aggregation_cycles(int(beats_t[d]), cfg.num_agg_units // cfg.agg_lanes)

        def combine(d: int, s: float) -> float:
            lo, hi = bounds[d]
            buf["weight"].read(w_bytes)
            if gcn:
                self.ops["macs"] += (hi - lo) * f_in * f_out
                st["combination"].work_items += (hi - lo) * f_in * f_out
                return s + mac_cycles(cfg, hi - lo, f_in, f_out)
            buf["combination"].write(int(staged[d]))  # the tile's matmul inputs wait here for the batch's weights
            buf["combination"].read(int(staged[d]))
            end = s
            for cp, work in zip(passes, pass_work, strict=True):  # passes run back to back on the engine
                cycles, items = self._pass_cost(cp, hi - lo, int(work[d]))
                st["combination"].work_items += items
                end += cycles
                if cp.requant_after:  # e.g. GIN's hidden activation between W1 and W2
                    end += requant_cycles((hi - lo) * cp.f_out) // cfg.num_requant_units
            return end

        def writeback_a(d: int, s: float) -> float:
            done = self._stream(s, f"L{li}.out", out_reg, d, write=True)[0]
            if gcn:
                return done
            lo, hi = bounds[d]
            return max(done, s + requant_cycles((hi - lo) * f_out) // cfg.num_requant_units)

        steps = [("load_a", load_a), ("aggregation", aggregate), ("combination", combine), ("writeback_a", writeback_a)]
        if not gcn and cfg.feature_format != "dense":
            steps.insert(1, ("decoder", decode))
        stages = [Stage(name=k, stats=st[k], service=f) for k, f in steps]
        if gcn:  # HyGCN's GCN layer waits for the whole previous layer (X rows of any node)
            ready = [max(prev_ready[1])] * nt if prev_ready is not None else [0.0] * nt
        else:  # a tile waits for the previous layer's tiles holding its own and its sources' rows
            ready = [self._sources_ready(prev_ready, wl, lo, hi) for lo, hi in bounds]
        return tn, run_pipeline(stages, nt, ready, depth=self.cfg.engine_buffers)[-1]

    def _pass_input_bytes(self, lt) -> np.ndarray:
        """(N,) bytes of a GIN / GraphSAGE node's combination inputs (every pass's codes, packed at their bits or
        the override width). Weights that do not fit the weight buffer are streamed once per batch of tiles whose
        inputs fit the combination buffer together, not once per tile (an assumption: the batch's cycles are
        modelled tile by tile, as if each weight block met the tiles' codes as they arrive)."""
        width = self.cfg.feature_bits_override
        n = lt.x_codes.shape[0]
        return sum(-(-cp.codes.shape[1] * (np.full(n, width, np.int64) if width else np.asarray(cp.bits, np.int64))
                     // 8) for cp in lt.passes)

    @staticmethod
    def _sources_ready(prev, wl, lo: int, hi: int) -> float:
        """When the previous layer has written the rows of nodes ``lo..hi-1`` and of their sources (0 if first)."""
        if prev is None:
            return 0.0
        ptn, ends = prev
        nodes = np.concatenate([np.arange(lo, hi), wl.indices[wl.indptr[lo]:wl.indptr[hi]]])
        return max(ends[k] for k in np.unique(nodes // ptn).tolist())


class _CombFirstLayer:
    """One combination-first layer on a ``Simulator``: its tiles, stream regions, decode work and Condense-Edge
    plan, and the stage services of phase C (``load_x`` -> ``decoder`` -> ``combination`` -> ``writeback_c``), of
    the extra Condense-Edge passes (``reread`` -> condense) and of phase A (``load_a`` -> ``decoder`` ->
    ``aggregation`` -> ``writeback_a``). DRAM regions are allocated in the order the phases reach them."""

    def __init__(self, sim: Simulator, wl, li: int, lt) -> None:
        cfg = sim.cfg
        self.sim, self.cfg, self.wl, self.li = sim, cfg, wl, li
        self.st, self.dram, self.buf, self.amap = sim.stats, sim.dram, sim.buffers, sim.amap
        self.n, self.f_in = lt.x_codes.shape
        self.f_out = lt.xw_codes.shape[1]
        self.tn = tile_nodes(cfg, self.f_out)
        self.starts = np.arange(0, self.n, self.tn)
        self.nt = self.starts.size
        self._place_streams(lt)
        self._plan_condense()
        self.dec_x = np.add.reduceat(self.xl.decode_work, self.starts)
        self.dec_xw = np.add.reduceat(self.wlay.decode_work, self.starts)
        self.dec_out = np.add.reduceat(self.ol.decode_work, self.starts)

    def _place_streams(self, lt) -> None:
        """Layouts of X, XW and the output; their stream regions and the weights' region."""
        sim, li, starts = self.sim, self.li, self.starts
        self.xl, self.wlay, self.ol = sim._layout(lt.x_codes, lt.x_bits), sim._layout(lt.xw_codes, lt.xw_bits), \
            sim._out_layout(lt, self.f_out)
        sim.input_layouts.append(self.xl)
        self.x_reg = sim._place(f"L{li}.x", self.xl, starts)
        self.xw_reg = sim._place(f"L{li}.xw", self.wlay, starts)
        self.out_reg = sim._place(f"L{li}.out", self.ol, starts)
        self.w_bytes, self.w_fits = sim._weights(lt, self.f_in, self.f_out)
        self.w_base = self.amap.alloc(f"L{li}.weights", self.w_bytes)
        self.bit_work_t = np.add.reduceat(self.xl.bit_work, starts)
        self.xw_const_reg = self.out_const_reg = {}
        if sim.cfg.requant_constants:  # per node, streamed with the tile that uses them
            xw_bits = xw_constant_bits(self.f_out)
            out_bits = output_stage_constant_bits(self.f_out, agg_requant=lt.agg_requant,
                                                  bias_per_row=lt.bias_per_row, out_requant=lt.out_bits is not None)
            self.xw_const_reg = self._constants(f"L{li}.xw_constants", xw_bits)
            self.out_const_reg = self._constants(f"L{li}.out_constants", out_bits)

    def _constants(self, name: str, bits_per_node: int) -> dict:
        """A region of ``bits_per_node`` constant bits per node (byte-rounded), placed like a feature stream."""
        if not bits_per_node:
            return {}
        per_node = np.full(self.n, -(-bits_per_node // 8), np.int64)
        per_tile = np.add.reduceat(per_node, self.starts)
        return {"constants": (self.amap.alloc(name, int(per_node.sum())), np.cumsum(per_tile) - per_tile, per_tile)}

    def _plan_condense(self) -> None:
        """Condense-Edge plan, eID-FIFO groups of subgraphs, the condensed region and each subgraph's share of it."""
        cfg, wl, nt, wlay = self.cfg, self.wl, self.nt, self.wlay
        plan = self.plan = condense_plan(wl.indptr, wl.indices, self.tn) if cfg.condense_edge else None
        self.groups = [range(g, min(nt, g + cfg.num_eid_fifos)) for g in range(0, nt, cfg.num_eid_fifos)]
        self.cond_base = self.amap.alloc(f"L{self.li}.condensed",
                                         int(wlay.row_bytes[plan.pair_src].sum()) if plan else 0)
        self.share = self.buf["sparse"].capacity // max(1, min(nt, cfg.num_eid_fifos))
        self.cond_off = np.zeros(nt, np.int64)
        if plan:
            cb = np.bincount(plan.pair_dst_tile, weights=wlay.row_bytes[plan.pair_src], minlength=nt)
            self.cond_off = (np.cumsum(cb) - cb).astype(np.int64)
        self.cond_fill = np.zeros(nt, np.int64)  # bytes of each subgraph's condensed region written so far

    def tile_of(self, t: int) -> tuple[int, int]:
        return int(self.starts[t]), int(min(self.n, self.starts[t] + self.tn))

    def _stages(self, steps) -> list[Stage]:
        return [Stage(name=k, stats=self.st[k], service=f) for k, f in steps]

    # ---- Condense-Edge -------------------------------------------------------------------------------------
    def condense_pass(self, t: int, start: float, group: range) -> float:
        """Condense the XW rows of tile ``t`` into the subgraphs of ``group`` that read them."""
        plan, st, dram, nt = self.plan, self.st, self.dram, self.nt
        lo, hi = self.tile_of(t)
        st["condense"].work_items += hi - lo
        m = (plan.pair_src >= lo) & (plan.pair_src < hi) & (plan.pair_dst_tile >= group.start) & (
            plan.pair_dst_tile < group.stop)
        done = start + condense_cycles(hi - lo)
        eids = int(m.sum()) * EID_BYTES  # FIFO refills: the eIDs popped by this tile's hits
        done = max(done, dram.request(start, self.amap.alloc(f"L{self.li}.eids.{t}.{group.start}", eids), eids,
                                      write=False, tensor="eids"))
        if m.any():
            rb = np.bincount(plan.pair_dst_tile[m], weights=self.wlay.row_bytes[plan.pair_src[m]], minlength=nt)
            done = self._write_condensed(start, done, rb)
        st["condense"].busy_cycles += condense_cycles(hi - lo)
        return done

    def _write_condensed(self, start: float, done: float, rb: np.ndarray) -> float:
        """Append ``rb[d]`` condensed bytes to each subgraph ``d``: on chip up to its share, the rest to DRAM."""
        cond_fill, share = self.cond_fill, self.share
        for d in np.flatnonzero(rb):
            nb = int(rb[d])
            spill = max(0, cond_fill[d] + nb - share) - max(0, cond_fill[d] - share)
            self.buf["sparse"].write(nb - spill)
            if spill:
                done = max(done, self.dram.request(start, self.cond_base + int(self.cond_off[d] + cond_fill[d]),
                                                   spill, write=True, tensor="condensed"))
            cond_fill[d] += nb
        return done

    # ---- phase C: combination over node tiles --------------------------------------------------------------
    def load_x(self, t: int, s: float) -> float:
        buf = self.buf
        done, nbytes = self.sim._stream(s, f"L{self.li}.x", self.x_reg, t, write=False)
        consts, cbytes = self.sim._stream(s, f"L{self.li}.xw_constants", self.xw_const_reg, t, write=False)
        buf["input"].write(nbytes + cbytes)
        done = max(done, consts)
        buf["weight"].record(1, int(self.w_fits and t > 0))
        if t == 0 or not self.w_fits:
            done = max(done, self.dram.request(s, self.w_base, self.w_bytes, write=False, tensor="weights"))
            buf["weight"].write(min(self.w_bytes, buf["weight"].capacity))
        return done

    def decode_c(self, t: int, s: float) -> float:
        cfg = self.cfg
        nbytes = sum(int(v[2][t]) for v in self.x_reg.values())
        self.buf["input"].read(nbytes)
        self.sim.ops["codec_bytes"] += nbytes if cfg.feature_format != "dense" else 0
        self.st["decoder"].work_items += int(self.dec_x[t])
        return s + decode_cycles(int(self.dec_x[t]), cfg.num_decoders)

    def combine(self, t: int, s: float) -> float:
        cfg, st, ops, f_in, f_out = self.cfg, self.st, self.sim.ops, self.f_in, self.f_out
        lo, hi = self.tile_of(t)
        self.buf["weight"].read(self.w_bytes)
        if cfg.comb_bit_serial:
            work = int(self.bit_work_t[t])
            ops["bit_cycles"] += work * f_out
            st["combination"].work_items += work
            return s + bitserial_cycles(cfg, work, f_out)
        ops["macs"] += (hi - lo) * f_in * f_out
        st["combination"].work_items += (hi - lo) * f_in * f_out
        return s + mac_cycles(cfg, hi - lo, f_in, f_out)

    def writeback_c(self, t: int, s: float) -> float:
        cfg = self.cfg
        done, nbytes = self.sim._stream(s, f"L{self.li}.xw", self.xw_reg, t, write=True)
        self.buf["combination"].write(nbytes)
        lo, hi = self.tile_of(t)
        done = max(done, s + decode_cycles(int(self.dec_xw[t]), cfg.num_decoders),
                   s + requant_cycles((hi - lo) * self.f_out) // cfg.num_requant_units)
        if self.plan is not None:
            done = max(done, self.condense_pass(t, s, self.groups[0]))
        return done

    def combination_phase(self, prev_ready) -> list[float]:
        """Run phase C; returns the end cycle of each tile."""
        c_ready = self.sim._ready_for(prev_ready, self.n, self.tn)
        stages = self._stages([("load_x", self.load_x), ("decoder", self.decode_c), ("combination", self.combine),
                               ("writeback_c", self.writeback_c)])
        return run_pipeline(stages, self.nt, c_ready, depth=self.cfg.engine_buffers)[-1]

    def reread(self, t: int, s: float) -> float:
        return self.sim._stream(s, f"L{self.li}.xw_reread", self.xw_reg, t, write=False)[0]

    def extra_condense_passes(self, end_c: list[float]) -> dict[int, float]:
        """Extra Condense-Edge passes over XW, one per eID-FIFO group after the first, on the one re-read engine;
        returns group index -> end cycle of its condensed data."""
        sim = self.sim
        group_done = {0: max(end_c)}
        for gi, group in enumerate(self.groups[1:] if self.plan else [], start=1):
            extra = [Stage(name="reread", stats=self.st["reread"], service=self.reread),
                     Stage(name="condense", stats=StageStats(),
                           service=lambda t, s, g=group: self.condense_pass(t, s, g))]
            # one re-read engine: a pass starts once the previous one (of this or an earlier layer) has read its
            # last tile, and tile t no earlier than its combination (end_c[t])
            ends = run_pipeline(extra, self.nt, [max(e, sim.reread_free) for e in end_c],
                                depth=self.cfg.engine_buffers)
            sim.reread_free, group_done[gi] = ends[0][-1], max(ends[-1])
        return group_done

    # ---- phase A: aggregation over destination tiles -------------------------------------------------------
    def _place_aggregation(self) -> None:
        """Edge list and XW row regions, each tile's aggregation beats and the tiles its sources live in."""
        cfg, wl, li, wlay = self.cfg, self.wl, self.li, self.wlay
        src = wl.indices
        self.beats_t = np.add.reduceat(np.maximum(np.diff(wl.indptr), 1), self.starts) * -(-self.f_out //
                                                                                             cfg.agg_lanes)
        self.edges_base = self.sim._alloc_edges(f"L{li}.edges", self.n, src.size)
        self.src_tiles_of = [np.unique(src[wl.indptr[lo]:wl.indptr[hi]] // self.tn)
                             for lo, hi in map(self.tile_of, range(self.nt))]
        self.row_off = np.cumsum(wlay.row_bytes) - wlay.row_bytes
        self.rows_base = self.amap.alloc(f"L{li}.xw_rows", int(wlay.row_bytes.sum()))

    def load_a(self, d: int, s: float) -> float:
        wl, buf = self.wl, self.buf
        lo, hi = self.tile_of(d)
        e0, e1 = int(wl.indptr[lo]), int(wl.indptr[hi])
        done = self.sim._read_edges(s, self.edges_base, e0, e1, lo, hi)
        consts, cbytes = self.sim._stream(s, f"L{self.li}.out_constants", self.out_const_reg, d, write=False)
        buf["aggregation"].write(cbytes)
        done = max(done, consts)
        own, _ = self.sim._stream(s, f"L{self.li}.xw", self.xw_reg, d, write=False)  # the tile's own XW block
        done = max(done, own)
        cross = np.unique(wl.indices[e0:e1])
        cross = cross[(cross < lo) | (cross >= hi)]
        return self._load_sources(d, s, done, cross)

    def _load_sources(self, d: int, s: float, done: float, cross: np.ndarray) -> float:
        """Fetch the cross-tile source rows of tile ``d`` by the configured ``source_reads`` policy."""
        cfg, dram, buf, wlay, share = self.cfg, self.dram, self.buf, self.wlay, self.share
        if cfg.source_reads == "condensed":
            nb = int(wlay.row_bytes[cross].sum())
            on_chip = min(nb, share)
            buf["sparse"].record(cross.size, int(np.searchsorted(np.cumsum(wlay.row_bytes[cross]), share,
                                                                  side="right")))
            buf["sparse"].read(on_chip)
            if nb > on_chip:
                done = max(done, dram.request(s, self.cond_base + int(self.cond_off[d]) + on_chip, nb - on_chip,
                                              write=False, tensor="condensed"))
        elif cfg.source_reads == "rows":
            for j in cross.tolist():
                if not buf["combination"].lookup(j, int(wlay.row_bytes[j])):
                    done = max(done, dram.request(s, self.rows_base + int(self.row_off[j]), int(wlay.row_bytes[j]),
                                                  write=False, tensor="xw.rows"))
        else:  # src_tiles: 2-D tiling, a touched source tile is fetched whole
            for k in np.unique(cross // self.tn).tolist():
                size = sum(int(v[2][k]) for v in self.xw_reg.values())
                if not buf["combination"].lookup(("tile", k), size):
                    done = max(done, self.sim._stream(s, f"L{self.li}.xw_tiles", self.xw_reg, k, write=False)[0])
        return done

    def decode_a(self, d: int, s: float) -> float:  # the tile's own block; condensed rows are decoded on the fly
        self.st["decoder"].work_items += int(self.dec_xw[d])
        return s + decode_cycles(int(self.dec_xw[d]), self.cfg.num_decoders)

    def aggregate(self, d: int, s: float) -> float:
        cfg, buf = self.cfg, self.buf
        lo, hi = self.tile_of(d)
        acc = int(self.wl.indptr[hi] - self.wl.indptr[lo]) * self.f_out
        self.sim.ops["accumulations"] += acc
        self.st["aggregation"].work_items += int(self.beats_t[d])
        buf["aggregation"].read(acc * cfg.psum_bits // 8)
        buf["aggregation"].write(acc * cfg.psum_bits // 8)
        return s + aggregation_cycles(int(self.beats_t[d]), cfg.num_agg_units // cfg.agg_lanes)

    def writeback_a(self, d: int, s: float) -> float:
        cfg = self.cfg
        lo, hi = self.tile_of(d)
        done, _ = self.sim._stream(s, f"L{self.li}.out", self.out_reg, d, write=True)
        return max(done, s + decode_cycles(int(self.dec_out[d]), cfg.num_decoders),
                   s + requant_cycles((hi - lo) * self.f_out) // cfg.num_requant_units)

    def aggregation_phase(self, end_c: list[float], group_done: dict[int, float]) -> list[float]:
        """Run phase A; a destination tile waits for the combination of its own and its sources' tiles and, with
        Condense-Edge, for its eID-FIFO group's condensed data. Returns the end cycle of each tile."""
        self._place_aggregation()
        a_ready = [max(max(end_c[s] for s in self.src_tiles_of[d]) if self.src_tiles_of[d].size else end_c[d],
                       group_done[d // self.cfg.num_eid_fifos] if self.plan else 0.0) for d in range(self.nt)]
        stages = self._stages([("load_a", self.load_a), ("decoder", self.decode_a), ("aggregation", self.aggregate),
                               ("writeback_a", self.writeback_a)])
        return run_pipeline(stages, self.nt, a_ready, depth=self.cfg.engine_buffers)[-1]
