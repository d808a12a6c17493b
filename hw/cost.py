"""A differentiable hardware cost of learned per-node bitwidths: DRAM bytes, cycles and energy of a
combination-first GCN on a bit-serial, packed-feature (MEGA-style) accelerator, in closed form.

Why: A2Q's memory penalty counts kilobytes; the accelerator pays for bytes moved in bursts, bit-serial cycles and
pJ. This module writes the cycle model's own accounting (``hw/scheduler.py``: the same tiles, requests, access
rounding, buffers, engines and energy table) as one function of the per-node *value bits* ``z_i * b_i`` (non-zero
codes times bitwidth) of every layer's input, so that a training loss can use it and its gradient.

* **What depends on the learned bits**: a layer's input feature stream (Adaptive-Package value bits, the package
  headers / padding / boundary records of each run of equal-bitwidth nodes, decoder words), its bit-serial
  combination cycles and energy, and the previous layer's write of that stream; and, when XW's bits are learned
  too (``QuantConfig.learn_xw_bits``), the XW stream: its write, read and Condense-Edge re-reads, its decoding and
  its Combination Buffer traffic. Everything else (edges, weights, Condense-Edge eIDs and spills, aggregation) is
  a constant computed exactly from the graph, the configuration and the XW codes.
* **Where it is not exact**: per-node byte coefficients and run padding are taken at the bits the model was built
  with, and so are the XW row bytes that Condense-Edge gathers and spills (:class:`CostModel` is rebuilt when
  bits or non-zeros move); DRAM requests of a tile are charged
  ``row miss + latency + bytes / bandwidth`` with a per-phase bus bound in place of the cycle model's bus calendar;
  layers run one after another (the cycle model lets a layer's combination start under the previous layer's
  aggregation). Measured against the cycle model: ``benchmarks/hw_cost_fidelity.py``.
* **Array backend**: every formula goes through :class:`ArrayOps`, so the same code runs on numpy (here, no torch:
  the accelerator model stays numpy-only) and on torch with straight-through rounding (``quant.qat.hw_cost``),
  which gives the gradient with respect to the bits. Latency keeps the exact ``max`` of the pipeline recurrence
  (a subgradient: the critical path gets the gradient).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hw.condense import EID_BYTES, condense_plan
from hw.config import AcceleratorConfig
from hw.energy import HBM_PJ_PER_BIT, op_pj, sram_pj_per_byte
from hw.layout import BOUNDARY_RECORD_BYTES
from hw.scheduler import tile_nodes
from hw.timing import requant_cycles
from quant.formats.adaptive_package import HEADER_BITS, PACKAGE_BITS

COSTS = ("dram", "energy", "latency")  # what a training loss can ask for (--hw-cost)
COST_KEYS = {"dram": "dram_bytes", "energy": "energy_pj", "latency": "cycles"}


@dataclass(frozen=True)
class ArrayOps:
    """The array operations the cost formulas use: numpy's, or torch's with straight-through rounding."""

    ceil: Callable
    floor: Callable
    segment_sum: Callable  # (values (N,), starts (T,) int64) -> (T,) sums of values[starts[t]:starts[t+1]]
    cumsum: Callable
    asarray: Callable  # a numpy constant -> the backend's array


NUMPY = ArrayOps(ceil=np.ceil, floor=np.floor, segment_sum=lambda v, s: np.add.reduceat(v, s) if v.size else v,
                 cumsum=np.cumsum, asarray=lambda a: np.asarray(a, np.float64))


def package_value_capacity(bits: np.ndarray, length_bits: int) -> np.ndarray:
    """Values of ``bits`` width one package of ``length_bits`` holds after its header. (N,) -> (N,)."""
    return (length_bits - HEADER_BITS) // np.maximum(np.asarray(bits, np.int64), 1)


def packages_per_value_bit(bits: np.ndarray) -> np.ndarray:
    """Full 192-bit packages per value bit at ``bits`` (each is 24 bytes plus a 9-byte boundary record). (N,)."""
    b = np.maximum(np.asarray(bits, np.int64), 1)
    return 1.0 / (b * package_value_capacity(b, PACKAGE_BITS[-1]))


@dataclass(frozen=True, kw_only=True)
class StreamStatics:
    """A packed feature stream's terms that do not move with small bit changes, per tile of ``starts``.

    ``per_bit`` (N,) packages per value bit; ``extra_packages`` / ``extra_bytes`` (T,) packages and package bytes
    beyond ``per_bit * value bits`` (each run's last, shorter package: exact at the bits it was built with);
    ``bitmap`` (T,) bytes; ``values`` (T,) non-zero codes (decoder beats); ``skipped`` (T,) all-zero rows."""

    per_bit: np.ndarray
    extra_packages: np.ndarray
    extra_bytes: np.ndarray
    bitmap: np.ndarray
    values: np.ndarray
    skipped: np.ndarray


def stream_statics(nnz: np.ndarray, bits: np.ndarray, num_features: int, starts: np.ndarray) -> StreamStatics:
    """Adaptive-Package terms (quant/formats/adaptive_package.py rules 5 and 8) of rows with ``nnz`` non-zeros at
    ``bits`` (both (N,)), tiled at ``starts``. Runs of equal bitwidth over non-zero rows are cut greedily into
    192-bit packages plus the shortest package holding the rest; each package carries a boundary record."""
    nnz, bits = np.asarray(nnz, np.int64), np.asarray(bits, np.int64)
    n = nnz.size
    per_bit = packages_per_value_bit(bits)
    live = np.flatnonzero(nnz > 0)
    extra_pk, extra_b = np.zeros(n), np.zeros(n)
    if live.size:
        b = bits[live]
        new_run = np.r_[True, b[1:] != b[:-1]]
        run_id = np.cumsum(new_run) - 1
        first = live[new_run]
        rb = b[new_run]
        rv = np.bincount(run_id, weights=nnz[live], minlength=first.size).astype(np.int64)  # values per run
        cap = package_value_capacity(rb, PACKAGE_BITS[-1])
        full = np.maximum(0, -(-rv // cap) - 1)
        rest = rv - full * cap
        last = np.select([rest <= package_value_capacity(rb, L) for L in PACKAGE_BITS[:-1]],
                         [L for L in PACKAGE_BITS[:-1]], PACKAGE_BITS[-1])
        smooth = per_bit[first] * rv * rb  # full packages' worth of the run's value bits
        extra_pk[first] = full + 1 - smooth  # attributed to the run's first node, as its packages are
        extra_b[first] = (full * PACKAGE_BITS[-1] + last) // 8 - smooth * (PACKAGE_BITS[-1] // 8)
    zero = (nnz == 0).astype(np.int64)
    return StreamStatics(per_bit=per_bit, extra_packages=np.add.reduceat(extra_pk, starts),
                         extra_bytes=np.add.reduceat(extra_b, starts),
                         bitmap=np.add.reduceat(np.full(n, -(-num_features // 8), np.int64), starts),
                         values=np.add.reduceat(nnz, starts), skipped=np.add.reduceat(zero, starts))


def moved_bytes(per_tile: Sequence, access: int, ops: ArrayOps):
    """Bytes a DRAM channel moves for tile-by-tile requests over one row-aligned region: every request is cut into
    aligned ``access``-byte accesses (``hw.dram.DRAMChannel.request``); empty requests move nothing. (T,) -> (T,)."""
    end = ops.cumsum(per_tile)
    off = end - per_tile
    eps = 1e-6  # byte counts are sums of fractions (per-bit coefficients): keep 511.9999... and 512.0001 at 512
    moved = (ops.ceil(end / access - eps) - ops.floor(off / access + eps)) * access
    return moved * (per_tile > 0)


@dataclass(frozen=True, kw_only=True)
class LayerStatics:
    """One combination-first GCN layer's constants (everything but its input's and output's value bits)."""

    n: int
    f_in: int
    f_out: int
    starts: np.ndarray  # (T,) first node of each tile
    x: StreamStatics  # the layer's input stream on its own tiles
    xw: StreamStatics  # the layer's XW stream on its own tiles
    xw_vb: np.ndarray  # (N,) the XW value bits it was built with
    xw_passes: int  # times the XW stream is read: once, plus one re-read per extra Condense-Edge group
    out: StreamStatics | None  # the next layer's input stream on this layer's tiles (None: 32-bit accumulators)
    dram: dict  # constant DRAM bytes moved by kind (weights, edges, eids, condensed)
    sram: dict  # buffer name -> bytes accessed, constant part
    phase_c: dict  # per-tile (T,) constant service cycles / bytes of phase C (see CostModel._layer)
    phase_a: dict
    extra_passes: list  # per extra Condense-Edge group: (T,) re-read bytes and condense cycles
    agg_ops: int  # accumulations (edges x F_out)
    weight_bytes: int
    weight_fits: bool
    out_dense_bytes: np.ndarray | None  # (T,) bytes of the last layer's 32-bit outputs


class CostModel:
    """The closed-form cost of a combination-first GCN workload on ``cfg`` (MEGA-style: bit-serial combination,
    packed features, Condense-Edge). Build with :meth:`from_workload` (an export or a dataset workload) or
    :meth:`from_arrays` (what a training loop knows); evaluate with :meth:`evaluate` on per-layer value bits."""

    def __init__(self, cfg: AcceleratorConfig, layers: list[LayerStatics]) -> None:
        self.cfg, self.layers = cfg, layers

    # ---- construction --------------------------------------------------------------------------------------
    @classmethod
    def from_workload(cls, workload, cfg: AcceleratorConfig) -> CostModel:
        """Constants of a :class:`hw.workload.Workload` of GCN layers; its bits are the ones evaluated later."""
        from hw.workload import LayerTensors

        if not all(isinstance(lt, LayerTensors) for lt in workload.layers):
            raise ValueError("hw.cost: the hardware cost covers GCN layers (combination-first); this workload has "
                             "aggregation-first (GIN / GraphSAGE) layers")
        nnz = [np.count_nonzero(lt.x_codes, axis=1) for lt in workload.layers]
        return cls.from_arrays(cfg, workload.indptr, workload.indices, x_nnz=nnz,
                               x_bits=[np.asarray(lt.x_bits) for lt in workload.layers],
                               xw_nnz=[np.count_nonzero(lt.xw_codes, axis=1) for lt in workload.layers],
                               xw_bits=[np.asarray(lt.xw_bits) for lt in workload.layers],
                               w_bits=[lt.w_bits for lt in workload.layers],
                               f_in=[lt.dims[1] for lt in workload.layers],
                               f_out=[lt.dims[2] for lt in workload.layers])

    @classmethod
    def from_arrays(cls, cfg: AcceleratorConfig, indptr: np.ndarray, indices: np.ndarray, *, x_nnz: list,
                    x_bits: list, xw_nnz: list, xw_bits: list, w_bits: list, f_in: list, f_out: list) -> CostModel:
        """Per layer l: ``x_nnz[l]`` (N,) non-zero input codes per node, ``x_bits[l]`` (N,) their bitwidths (for
        the run structure and byte coefficients), ``xw_nnz[l]`` / ``xw_bits[l]`` (N,) the same of the XW stream,
        ``w_bits[l]`` the weight bits, ``f_in[l]`` / ``f_out[l]`` the widths. ``indptr``/``indices``: the
        destination-major CSR the layers aggregate (with self loops)."""
        _check_config(cfg)
        layers = []
        for li in range(len(x_nnz)):
            nxt = (x_nnz[li + 1], x_bits[li + 1], f_in[li + 1]) if li + 1 < len(x_nnz) else None
            layers.append(_layer_statics(cfg, np.asarray(indptr), np.asarray(indices), np.asarray(x_nnz[li]),
                                         np.asarray(x_bits[li]), int(f_in[li]), np.asarray(xw_nnz[li]),
                                         np.asarray(xw_bits[li]), int(f_out[li]), int(w_bits[li]), nxt))
        return cls(cfg, layers)

    # ---- evaluation ----------------------------------------------------------------------------------------
    def evaluate(self, value_bits: Sequence, ops: ArrayOps = NUMPY, xw_value_bits: Sequence | None = None) -> dict:
        """Cost of per-layer input value bits ``value_bits[l]`` (N,) = non-zero codes x bitwidth of each node
        (layer l's input; layer l also writes layer l+1's) and, optionally, of the XW rows ``xw_value_bits[l]`` (N,)
        (None, or None for a layer: the XW bits it was built with). Returns ``dram_bytes``, ``energy_pj``,
        ``cycles`` (the backend's scalars) and per-layer parts (``layers``)."""
        if len(value_bits) != len(self.layers) or (xw_value_bits is not None
                                                   and len(xw_value_bits) != len(self.layers)):
            raise ValueError(f"hw.cost: {len(value_bits)} value-bit vectors for {len(self.layers)} layers")
        cfg = self.cfg
        dram = energy = 0.0
        prev_end, prev_starts, layers = None, None, []
        for li, st in enumerate(self.layers):
            out_vb = value_bits[li + 1] if li + 1 < len(self.layers) else None
            xw_vb = xw_value_bits[li] if xw_value_bits is not None else None
            xw_vb = ops.asarray(st.xw_vb) if xw_vb is None else xw_vb
            part = _layer_cost(cfg, st, value_bits[li], out_vb, xw_vb, ops, prev_end, prev_starts)
            prev_end, prev_starts = part.pop("tile_end"), st.starts
            dram, energy = dram + part["dram_bytes"], energy + part["energy_pj"]
            layers.append(part)
        return {"dram_bytes": dram, "energy_pj": energy, "cycles": max(prev_end), "layers": layers}

    def evaluate_bits(self, x_nnz: Sequence, x_bits: Sequence) -> dict:
        """:meth:`evaluate` on numpy non-zeros and bitwidths per layer."""
        return self.evaluate([np.asarray(z, np.float64) * np.asarray(b, np.float64)
                              for z, b in zip(x_nnz, x_bits, strict=True)])


def _check_config(cfg: AcceleratorConfig) -> None:
    """The cost model covers the MEGA-style dataflow; other presets have no learned-bit cost to optimise."""
    wrong = [f"{k}={getattr(cfg, k)!r}" for k, ok in (("order", "combination_first"), ("comb_bit_serial", True),
                                                       ("feature_bits_override", 0), ("source_reads", "condensed"),
                                                       ("feature_format", "adaptive_package"),
                                                       ("requant_constants", False), ("edge_bytes", 4),
                                                       ("engine_buffers", 2))
             if getattr(cfg, k) != ok]
    if wrong:
        raise ValueError(f"hw.cost: the hardware cost of learned bits models MEGA-style configurations "
                         f"(combination-first, bit-serial, Adaptive-Package, Condense-Edge, double-buffered, "
                         f"4-byte edges, constants on chip); {cfg.name} has {', '.join(wrong)}")


def _moved_np(per_tile: np.ndarray, access: int) -> np.ndarray:
    return moved_bytes(np.asarray(per_tile, np.float64), access, NUMPY)


def _layer_statics(cfg, indptr, indices, x_nnz, x_bits, f_in, xw_nnz, xw_bits, f_out, w_bits, nxt) -> LayerStatics:
    """Constants of one layer, in the order the scheduler's phases issue them (``hw.scheduler._CombFirstLayer``)."""
    n = x_nnz.size
    a = cfg.dram_access_bytes
    tn = tile_nodes(cfg, f_out)
    starts = np.arange(0, n, tn)
    nt = starts.size
    rows = np.diff(np.r_[starts, n])
    x = stream_statics(x_nnz, x_bits, f_in, starts)
    out = stream_statics(nxt[0], nxt[1], nxt[2], starts) if nxt is not None else None
    xw = stream_statics(xw_nnz, xw_bits, f_out, starts)
    xw_vb = np.asarray(xw_nnz, np.float64) * np.asarray(xw_bits, np.float64)
    xw_row_bytes = -(-f_out // 8) + (np.asarray(xw_nnz, np.int64) * np.asarray(xw_bits, np.int64) + 7) // 8 + 1
    w_bytes = -(-f_in * f_out * w_bits // 8)
    w_fits = w_bytes <= cfg.buffer_bytes["weight"]
    w_moved = -(-w_bytes // a) * a

    # Condense-Edge: plan, eID-FIFO groups, spills of each subgraph's condensed rows beyond its Sparse Buffer share
    plan = condense_plan(indptr, indices, tn)
    groups = [range(g, min(nt, g + cfg.num_eid_fifos)) for g in range(0, nt, cfg.num_eid_fifos)]
    share = cfg.buffer_bytes["sparse"] // max(1, min(nt, cfg.num_eid_fifos))
    src_tile = plan.pair_src // tn
    pair_bytes = xw_row_bytes[plan.pair_src]
    cond_total = np.bincount(plan.pair_dst_tile, weights=pair_bytes, minlength=nt).astype(np.int64)  # (T,)
    cond_off = np.cumsum(cond_total) - cond_total
    fill = np.zeros(nt, np.int64)
    eid_moved = np.zeros((len(groups), nt))  # per pass and source tile
    spill_moved = np.zeros((len(groups), nt))
    sparse_writes = 0
    for gi, group in enumerate(groups):
        in_group = (plan.pair_dst_tile >= group.start) & (plan.pair_dst_tile < group.stop)
        for t in range(nt):
            m = in_group & (src_tile == t)
            eid_moved[gi, t] = -(-int(m.sum()) * EID_BYTES // a) * a
            if not m.any():
                continue
            rb = np.bincount(plan.pair_dst_tile[m], weights=pair_bytes[m], minlength=nt).astype(np.int64)
            for d in np.flatnonzero(rb):
                nb = int(rb[d])
                spill = max(0, fill[d] + nb - share) - max(0, fill[d] - share)
                sparse_writes += nb - spill
                if spill:
                    addr = int(cond_off[d] + fill[d])
                    spill_moved[gi, t] += (-(-(addr + spill) // a) - addr // a) * a
                fill[d] += nb

    # phase A: edges, own XW block, condensed rows beyond the on-chip share
    e0, e1 = indptr[starts], indptr[np.r_[starts[1:], n]]
    edge_bytes = 4 * (e1 - e0 + rows + 1)
    edge_off = 4 * (e0 + starts)
    edges_moved = np.array([(-(-(o + b) // a) - o // a) * a for o, b in zip(edge_off, edge_bytes, strict=True)])
    on_chip = np.minimum(cond_total, share)
    cond_read = np.array([(-(-(int(cond_off[d] + on_chip[d] + (cond_total[d] - on_chip[d]))) // a)
                           - int(cond_off[d] + on_chip[d]) // a) * a if cond_total[d] > on_chip[d] else 0
                          for d in range(nt)], np.float64)
    beats = np.add.reduceat(np.maximum(np.diff(indptr), 1), starts) * -(-f_out // cfg.agg_lanes)
    acc = (e1 - e0) * f_out
    out_dense = None if out is not None else _moved_np(4 * f_out * rows, a)

    dram = {"weights": float(w_moved if w_fits else w_moved * nt),
            "eids": float(eid_moved.sum()), "condensed": float(spill_moved.sum() + cond_read.sum()),
            "edges": float(edges_moved.sum())}
    sram = {"weight": (min(w_bytes, cfg.buffer_bytes["weight"]) if w_fits else min(w_bytes, cfg.buffer_bytes[
        "weight"]) * nt) + w_bytes * nt,
            "sparse": int(sparse_writes + on_chip.sum()), "edge": int(edge_bytes.sum()),
            "aggregation": int(2 * acc.sum() * cfg.psum_bits // 8)}
    # per-tile engine cycles that no bit moves: the requant of a tile's rows
    requant = np.array([requant_cycles(int(r) * f_out) // cfg.num_requant_units for r in rows], np.float64)
    phase_c = {"rows": rows, "weights_moved": np.where(np.arange(nt) == 0, w_moved, w_moved if not w_fits else 0),
               "eid_moved": eid_moved[0], "spill_moved": spill_moved[0], "requant": requant}
    phase_a = {"moved": edges_moved + cond_read, "beats": beats, "requant": requant}  # + the XW block
    extra = [{"eid_moved": eid_moved[g], "spill_moved": spill_moved[g]} for g in range(1, len(groups))]
    return LayerStatics(n=n, f_in=f_in, f_out=f_out, starts=starts, x=x, xw=xw, xw_vb=xw_vb,
                        xw_passes=len(groups), out=out, dram=dram, sram=sram,
                        phase_c=phase_c, phase_a=phase_a, extra_passes=extra, agg_ops=int(acc.sum()),
                        weight_bytes=w_bytes, weight_fits=w_fits, out_dense_bytes=out_dense)


def _stream_tiles(s: StreamStatics, value_bits, starts, ops: ArrayOps, access: int) -> dict:
    """A packed stream's per-tile bytes (packages + boundary, bitmap), moved bytes and decoder cycles."""
    full = ops.segment_sum(value_bits * ops.asarray(s.per_bit), starts)  # (T,) full packages' worth
    packages = full * (PACKAGE_BITS[-1] // 8) + ops.asarray(s.extra_bytes)  # (T,) bytes
    boundary = (full + ops.asarray(s.extra_packages)) * BOUNDARY_RECORD_BYTES
    bitmap = ops.asarray(s.bitmap)
    moved = sum(moved_bytes(v, access, ops) for v in (packages, bitmap, boundary))
    decode = packages / 8 + ops.asarray(s.values + s.skipped)  # decoder: one cycle per word, beat, zero row
    return {"bytes": packages + bitmap + boundary, "moved": moved, "decode": decode}


def _layer_cost(cfg, st: LayerStatics, x_vb, out_vb, xw_vb, ops: ArrayOps, prev_end, prev_starts) -> dict:
    """Bytes, energy and the per-tile end cycles of one layer."""
    a, bpc = cfg.dram_access_bytes, cfg.bytes_per_cycle
    request = cfg.dram_row_miss_cycles + cfg.dram_latency_cycles  # fixed cycles of a request besides its transfer
    ndec = cfg.num_decoders
    passes = -(-st.f_out // cfg.num_bse_per_cpe)
    ncpe = cfg.num_comb_tiles * cfg.num_cpe_per_tile
    groups = cfg.num_agg_units // cfg.agg_lanes
    x = _stream_tiles(st.x, x_vb, st.starts, ops, a)
    work = ops.segment_sum(x_vb, st.starts)  # (T,) bit-serial work of each tile
    if st.out is not None:
        out = _stream_tiles(st.out, out_vb, st.starts, ops, a)
        out_moved, out_decode, out_bytes = out["moved"], out["decode"], out["bytes"]
    else:
        out_moved, out_decode, out_bytes = ops.asarray(st.out_dense_bytes), 0 * work, 0 * work
    xw = _stream_tiles(st.xw, xw_vb, st.starts, ops, a)  # written in phase C, read in A, re-read per extra pass
    xw_moved, decode_xw = xw["moved"], ops.ceil(xw["decode"] / ndec)

    # cycles: phase C (load_x -> decoder -> combination -> writeback_c) then the extra Condense-Edge passes, then
    # phase A (load_a -> decoder -> aggregation -> writeback_a); the same pipeline recurrence as hw.pipeline
    c, pa = st.phase_c, st.phase_a
    load_moved = x["moved"] + ops.asarray(c["weights_moved"])
    wb_moved = xw_moved + ops.asarray(c["eid_moved"] + c["spill_moved"])
    services_c = [request + load_moved / bpc, ops.ceil(x["decode"] / ndec),
                  (ops.ceil(work * passes / ncpe) + 1) * (work > 0),
                  _maximum(_maximum(request + wb_moved / bpc, decode_xw),
                           ops.asarray(np.maximum(c["requant"], c["rows"])))]
    ready = _ready(prev_end, prev_starts, st.starts, st.n)
    end_c = _pipeline(services_c, ready)
    bus_c = (load_moved.sum() + wb_moved.sum()) / bpc
    end_c_max = max(max(end_c), min(ready) + request + bus_c)
    group_done, free = [end_c_max], end_c_max
    for ex in st.extra_passes:  # one re-read engine, passes one after another
        svc = [request + xw_moved / bpc,
               _maximum(ops.asarray(c["rows"].astype(np.float64)),
                        request + ops.asarray(ex["eid_moved"] + ex["spill_moved"]) / bpc)]
        ends = _pipeline(svc, [max(e, free) for e in end_c])
        free = ends[-1]
        group_done.append(max(ends))
    a_ready = [group_done[d // cfg.num_eid_fifos] for d in range(st.starts.size)]
    a_moved = ops.asarray(pa["moved"]) + xw_moved
    services_a = [request + a_moved / bpc, decode_xw,
                  ops.asarray(np.ceil(pa["beats"] / groups)),
                  _maximum(_maximum(request + out_moved / bpc, ops.ceil(out_decode / ndec)),
                           ops.asarray(pa["requant"]))]
    end_a = _pipeline(services_a, a_ready)
    bus_a = (a_moved.sum() + out_moved.sum()) / bpc
    bus_extra = sum(xw_moved.sum() + ops.asarray(ex["eid_moved"] + ex["spill_moved"]).sum() for ex in st.extra_passes)
    last = max(end_a)
    # bandwidth bounds: phase A on its own, and the whole layer (its phases share one bus)
    bound = max(min(a_ready) + request + bus_a, min(ready) + request + bus_c + bus_extra / bpc + bus_a)
    if bound > last:  # bandwidth-bound: the last tile ends with the bus
        end_a = [e + (bound - last) for e in end_a]

    # bytes and energy
    dram = sum(st.dram.values()) + x["moved"].sum() + out_moved.sum() + (1 + st.xw_passes) * xw_moved.sum()
    bufs = cfg.buffer_bytes
    sram_pj = sum(v * sram_pj_per_byte(bufs[k]) for k, v in st.sram.items())
    sram_pj = sram_pj + xw["bytes"].sum() * sram_pj_per_byte(bufs["combination"])
    sram_pj = sram_pj + 2 * x["bytes"].sum() * sram_pj_per_byte(bufs["input"])  # load_x writes, the decoder reads
    energy = (dram * 8 * HBM_PJ_PER_BIT + sram_pj + op_pj("bse_cycle") * work.sum() * st.f_out
              + (op_pj("mult_int8") + op_pj("add_int16")) * st.agg_ops + op_pj("add_int8") * x["bytes"].sum())
    return {"dram_bytes": dram, "energy_pj": energy, "cycles": max(end_a) - min(ready), "tile_end": end_a,
            "out_bytes": out_bytes.sum()}


def _maximum(u, v):
    """Elementwise maximum of two backend arrays of one shape (numpy or torch) without naming the backend."""
    return u + (v - u) * (v > u)


def _pipeline(services: list, ready: list) -> list:
    """End cycle of the last stage for every tile: ``hw.pipeline.run_pipeline``'s recurrence (queues of depth 2)
    on per-stage (T,) service durations. Returns a list of the backend's scalars."""
    ns, nt = len(services), len(ready)
    end = [[None] * nt for _ in range(ns)]
    for t in range(nt):
        for s in range(ns):
            start = end[s][t - 1] if t else ready[0]
            start = max(start, ready[t] if s == 0 else end[s - 1][t])
            if s + 1 < ns and t >= 2:
                start = max(start, end[s + 1][t - 2])
            end[s][t] = start + services[s][t]
    return end[-1]


def _ready(prev_end, prev_starts, starts, n) -> list:
    """Earliest start of each tile: the previous layer's end over the nodes the tile covers (``_ready_for``)."""
    if prev_end is None:
        return [0.0] * starts.size
    bounds = np.r_[prev_starts[1:], n]
    out = []
    for lo, hi in zip(starts, np.r_[starts[1:], n], strict=True):
        ks = np.flatnonzero((prev_starts < hi) & (bounds > lo))
        out.append(max(prev_end[k] for k in ks))
    return out


class CostProvider:
    """What ``quant.qat.hw_cost`` finds through the entry point group ``quant.hardware_costs`` (the project's
    ``hw = "hw.cost:PROVIDER"``): numpy arrays in, a :class:`CostModel` or a dict of floats out, so that ``quant``
    never imports ``hw`` and ``hw`` never imports torch."""

    @staticmethod
    def config(arch: str, config: str | None) -> AcceleratorConfig:
        from hw.config import load_config, preset

        return load_config(config, base=arch) if config else preset(arch)

    def cost_model(self, arch: str, config: str | None, edge_index: np.ndarray, **layers) -> CostModel:
        """The closed form on ``edge_index`` (2, E) with self loops added as the GCN golden model adds them;
        ``layers``: the per-layer lists of :meth:`CostModel.from_arrays`."""
        from quant.archs.gcn.integer import gcn_graph

        indptr, indices, _ = gcn_graph(np.asarray(edge_index, np.int64), int(np.asarray(layers["x_nnz"][0]).size))
        return CostModel.from_arrays(self.config(arch, config), indptr, indices, **layers)

    def fp32_cost(self, arch: str, config: str | None, edge_index: np.ndarray, dims: list, num_nodes: int) -> dict:
        """Simulated cost of the FP32 design of the configuration (its engines with 32-bit dense features and
        MACs, as ``hw.config.ablation_variants``'s ``fp32`` step) for a GCN of layer widths ``dims`` [(F_in,
        F_out), ...]: ``dram_bytes``, ``energy_pj``, ``cycles``. Dense bytes do not depend on the codes, so the
        workload's tensors are zeros."""
        from dataclasses import replace

        from hw.report import run_simulation
        from hw.workload import LayerTensors, Workload
        from quant.archs.gcn.integer import gcn_graph

        cfg = replace(self.config(arch, config), name="fp32", feature_format="dense", feature_bits_override=32,
                      condense_edge=False, source_reads="rows", comb_bit_serial=False)
        ei, n = np.asarray(edge_index, np.int64), int(num_nodes)
        indptr, indices, _ = gcn_graph(ei, n)
        zeros = lambda *shape: np.broadcast_to(np.int8(0), shape)  # noqa: E731 - read-only views, no memory
        layers = tuple(LayerTensors(x_codes=zeros(n, f_in), x_bits=np.full(n, 8), xw_codes=zeros(n, f_out),
                                    xw_bits=np.full(n, 8), out_codes=np.zeros((n, f_out), np.int64),
                                    out_bits=np.full(n, 8) if li + 1 < len(dims) else None, w_bits=32)
                       for li, (f_in, f_out) in enumerate(dims))
        wl = Workload(name="fp32", bits_source="fp32 design", indptr=indptr, indices=indices, model=None,
                      edge_index=ei, layers=layers)
        r = run_simulation(wl, cfg, check=False)
        return {"dram_bytes": float(r["dram"]["total_bytes"]), "energy_pj": float(r["energy_pj"]["total"]),
                "cycles": float(r["total_cycles"])}


PROVIDER = CostProvider()
