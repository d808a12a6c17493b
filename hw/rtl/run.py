"""Run the GCN layers of a ``.qgraph`` export on the RTL accelerator top (``hw/rtl/accel_top.v``) and check them.

    python -m hw.rtl.run EXPORT.qgraph [--layers all|0,1] [--sim verilator|icarus] [--out DIR]

Per layer: the memory image from the export's input codes (:mod:`hw.rtl.top`), a cached build, one run to
``done``, every output code compared bit for bit with the export's ``layer<l>.out`` (the first mismatch named by
layer, node and feature), the RTL's per-phase cycle counters against :func:`hw.timing.accel_top_layer_cycles`,
and for reference the cycles of the layer alone in the dataflow model (``hw.scheduler``, as ``python -m
hw.simulate``) on the same config, on it with the RTL's engine counts (:func:`rtl_matched_config`) and on it
moved to the RTL's design one choice at a time (:func:`rtl_design_steps`). Prints a table and writes
``DIR/layer<l>.json``. Exit status: 0 all layers bit-exact and cycle-exact, 1 a mismatch, 2 bad input (one
``error:`` line).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np


class UsageError(Exception):
    """Bad command-line input: one line, exit status 2."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hw.rtl.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("export", help="a quant.export .qgraph of a GCN")
    p.add_argument("--layers", default="all", help="'all' or comma-separated layer indices (default: all)")
    p.add_argument("--sim", default=None, choices=("verilator", "icarus"), help="simulator (default: $SIM or "
                   "verilator)")
    p.add_argument("--out", default="rtl_run", help="directory for layer<l>.json, the images and logs "
                   "(default: ./rtl_run)")
    p.add_argument("--arch", default="mega", help="accelerator preset for the memory timing (default: mega)")
    p.add_argument("--config", help="TOML file overriding the preset (hw/configs/*.toml)")
    p.add_argument("--max-nodes", type=int, default=256, help="local nodes per tile (default 256)")
    p.add_argument("--max-rows", type=int, default=64, help="destination rows per tile (default 64)")
    p.add_argument("--build-dir", default=None, help="build cache (default: DIR/build)")
    p.add_argument("--no-model", action="store_true", help="skip the hw.scheduler reference run")
    return p


def _layers(spec: str, count: int) -> list[int]:
    if spec == "all":
        return list(range(count))
    try:
        chosen = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--layers {spec!r}: give 'all' or comma-separated layer indices") from None
    bad = [li for li in chosen if not 0 <= li < count]
    if bad or not chosen:
        raise UsageError(f"--layers {spec!r}: the export has layers 0..{count - 1}")
    return chosen


def _setup(args):
    """(export, config, simulator, layers) or UsageError."""
    from hw.config import ConfigError, load_config, preset
    from hw.rtl.sim import default_simulator, locate
    from quant.qgraph import load

    path = Path(args.export)
    if not path.exists():
        raise UsageError(f"{path}: no such export")
    try:
        q = load(path)
    except Exception as e:  # noqa: BLE001 - any reader failure is a bad input file: one line
        raise UsageError(f"{path}: not a readable .qgraph export ({str(e).splitlines()[0] if str(e) else e!r})") \
            from None
    if q.arch not in (None, "gcn") or q.is_graph_transformer:
        raise UsageError(f"{path}: a {q.arch} export; the RTL top runs GCN layers")
    try:
        cfg = load_config(args.config, base=args.arch) if args.config else preset(args.arch)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    try:
        sim = args.sim or default_simulator()
    except ValueError as e:
        raise UsageError(str(e)) from None
    exe, why = locate(sim)
    if exe is None:
        raise UsageError(f"simulator {sim} is not usable: {why}")
    if args.max_nodes < 2 or args.max_rows < 1 or args.max_rows > args.max_nodes:
        raise UsageError("--max-nodes must be >= 2 and --max-rows in 1..max-nodes")
    return q, cfg, sim, _layers(args.layers, len(q.manifest["layers"]))


def rtl_matched_config(cfg, lanes: int, max_rows: int, psum_bits: int):
    """``cfg`` with the RTL top's engine counts and order: combination first, one decoder, one C-PE of ``lanes``
    bit-serial engines, one ``lanes``-wide aggregation unit (one edge beat per cycle), ``lanes`` requant units, a
    64-bit memory port at one beat per cycle and an aggregation buffer of two ``max_rows``-row tiles (the memory
    latency is kept)."""
    agg_kib = max(1, -(-2 * max_rows * lanes * psum_bits // 8 // 1024))
    return replace(cfg, name=f"{cfg.name}_rtl_top", order="combination_first", num_comb_tiles=1,
                   num_cpe_per_tile=1, num_bse_per_cpe=lanes,
                   num_agg_units=lanes, agg_lanes=lanes, num_decoders=1, num_requant_units=lanes,
                   dram_bandwidth_gbs=8.0 * cfg.clock_ghz, aggregation_buffer_kib=agg_kib)


def rtl_design_steps(cfg, params, num_nodes: int, f_in: int) -> list[tuple[str, object]]:
    """``cfg`` moved toward ``hw/rtl/accel_top.v`` one design choice at a time, each step keeping the ones before:
    the RTL's engine counts (:func:`rtl_matched_config`); its weight buffer, which holds the layer's weights; its
    memory model, which has no DRAM rows to miss; its copy lists, which send every XW row to every tile that reads
    it in one pass (Condense-Edge with a FIFO per destination tile and no on-chip share: no re-read passes); the
    export's per-lane requantization constants streamed with the rows; 64-bit edge beats; a single-buffered
    engine. Returns ``[(step, config)]``; the last config is the RTL top as ``hw.scheduler`` describes it.
    ``params``: the layer's :class:`hw.rtl.top.TopParams`."""
    from hw.scheduler import tile_nodes

    steps = [("engines", rtl_matched_config(cfg, params.lanes, params.max_rows, params.psum_bits))]

    def step(name: str, **fields) -> None:
        steps.append((name, replace(steps[-1][1], **fields)))

    weight_kib = -(-f_in * params.lanes * params.w_bits // 8 // 1024)
    step("weights held", weight_buffer_kib=max(steps[-1][1].weight_buffer_kib, weight_kib))
    step("no row misses", dram_row_miss_cycles=0)
    tiles = -(-num_nodes // tile_nodes(steps[-1][1], params.lanes))
    step("copy lists", num_eid_fifos=max(1, tiles), sparse_buffer_kib=1)
    step("per-lane constants", requant_constants=True)
    step("64-bit edge beats", edge_bytes=8)
    step("single-buffered", engine_buffers=1)
    return steps


def one_pass_combination(layer, x: np.ndarray) -> dict:
    """The engine's combination cycles over the whole layer input as one stream (every node once, no halo
    recompute: :func:`hw.timing.combination_cycles`) against the bit work that ``hw.scheduler`` charges
    (``bitserial_cycles``: the sum of the bits of the non-zero input codes)."""
    from hw.timing import combination_cycles
    from quant.formats.adaptive_package import encode

    bits = np.asarray(layer.x_bits)
    work = int(((x != 0) * bits[:, None]).sum())
    return {"bit_work": work, "combination_cycles": combination_cycles(encode(x, bits)) if work else 0}


def scheduler_layer(wl, li: int, cfg) -> dict:
    """``hw.scheduler`` on layer ``li`` of the workload alone: its cycles and busy cycles per stage."""
    from hw.scheduler import Simulator

    sim = Simulator(cfg)
    total = sim.run(replace(wl, layers=(wl.layers[li],)))
    return {"config": cfg.name, "cycles": float(total),
            "busy_cycles": {k: float(v.busy_cycles) for k, v in sim.stats.items() if v.busy_cycles}}


def run_layers(args) -> list[dict]:
    """Build, run and check every chosen layer; returns the records (also written as ``DIR/layer<l>.json``)."""
    from hw.rtl.top import (
        LayerMismatch,
        build_image,
        check_layer,
        model_cycles,
        params_for,
        rtl_phases,
        simulate_layer,
    )
    from quant.archs.gcn.integer import gcn_graph

    q, cfg, sim, chosen = _setup(args)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    build_root = Path(args.build_dir).resolve() if args.build_dir else out / "build"
    model = q.to_quantized_gcn()
    graph = gcn_graph(np.asarray(q["graph.edge_index"]), model.x_codes.shape[0])
    wl = None
    if not args.no_model:
        from hw.workload import workload_from_export

        wl = workload_from_export(q)
    records = []
    for li in chosen:
        layer, x = model.layers[li], np.asarray(q[f"layer{li}.x_codes"])
        t0 = time.perf_counter()
        try:
            img = build_image(layer, x, graph, params_for(layer, x.shape[1], cfg, max_nodes=args.max_nodes,
                                                          max_rows=args.max_rows))
        except ValueError as e:
            raise UsageError(f"layer {li}: {e}") from None
        image_s = time.perf_counter() - t0
        want = np.asarray(q[f"layer{li}.out"], dtype=np.int64)
        try:  # the integer golden model must reproduce the export before the RTL is compared with it
            check_layer(img.golden, want, li)
        except LayerMismatch as e:
            raise LayerMismatch(f"{e} (golden model vs the export's layer{li}.out, before any simulation)") from None
        res = simulate_layer(img, sim=sim, build_root=build_root, work_dir=out / f"layer{li}",
                             log_file=out / f"layer{li}.log")
        model_c = model_cycles(img)
        sched = matched = design = None
        if wl is not None:
            sched = scheduler_layer(wl, li, cfg)
            steps = rtl_design_steps(cfg, img.params, img.num_rows, x.shape[1])
            design = [{"step": name, **scheduler_layer(wl, li, c)} for name, c in steps]
            matched = design[0]  # the top's engine counts, the preset's memory and buffers
        rtl = rtl_phases(res)
        mismatch = None
        if res["err"]:
            mismatch = f"layer {li}: the engine stopped with decoder error code {res['err']}"
        else:
            try:
                check_layer(res["out"], want, li)
            except LayerMismatch as e:
                mismatch = str(e)
        rec = {"layer": li, "simulator": sim, "bit_exact": mismatch is None, "mismatch": mismatch,
               "rtl_cycles": rtl["total"], "model_cycles": model_c["total"],
               "cycle_exact": rtl == model_c, "rtl_phases": rtl, "model_phases": model_c,
               "scheduler_cycles": None if sched is None else sched["cycles"], "scheduler_config": cfg.name,
               "scheduler": sched, "scheduler_rtl_matched": matched, "scheduler_rtl_design": design,
               "one_pass": None if args.no_model else one_pass_combination(layer, x),
               "tiles": img.num_tiles, "comb_tiles": len(img.comb_tiles), "agg_tiles": len(img.agg_tiles),
               "image_words": len(img.words), "rows": img.num_rows,
               "local_nodes": img.local_nodes, "xw_reads_per_row": img.local_nodes / img.num_rows,
               "sim_cycles_per_s": rtl["total"] / res["run_s"] if res["run_s"] > 0 else None,
               "run_s": res["run_s"], "wall_s": res["wall_s"], "cached_build": res["cached_build"],
               "image_s": image_s, "parameters": img.params.verilog()}
        (out / f"layer{li}.json").write_text(json.dumps(rec, indent=1))
        records.append(rec)
    return records


def run_export(export: str | Path, *, layers: str = "all", sim: str | None = None, out: str | Path = "rtl_run",
               build_dir: str | Path | None = None, scheduler: bool = True) -> list[dict]:
    """`run_layers` called from Python with the command line's options; raises `UsageError` on bad input."""
    argv = [str(export), "--layers", layers, "--out", str(out)]
    argv += ["--sim", sim] if sim else []
    argv += ["--build-dir", str(build_dir)] if build_dir else []
    argv += [] if scheduler else ["--no-model"]
    return run_layers(_parser().parse_args(argv))


def table(records: list[dict]) -> str:
    head = (f"{'layer':>5} {'bit-exact':>9} {'rtl cycles':>11} {'model':>11} {'diff':>6} {'load':>9} {'comb':>9} "
            f"{'xw wr':>7} {'agg':>8} {'wb':>7} {'tiles':>5} {'cyc/s':>9} {'sched preset / engines / design':>32}")
    lines = [head]
    for r in records:
        p = r["rtl_phases"]
        diff = (r["rtl_cycles"] - r["model_cycles"]) / max(1, r["model_cycles"])
        m, d = r["scheduler_rtl_matched"], r["scheduler_rtl_design"]
        sched = f"{r['scheduler_cycles']:.0f} / {m['cycles']:.0f} / {d[-1]['cycles']:.0f}" if m is not None else "-"
        lines.append(f"{r['layer']:>5} {'yes' if r['bit_exact'] else 'NO':>9} {r['rtl_cycles']:>11} "
                     f"{r['model_cycles']:>11} {diff:>6.1%} {p['load']:>9} {p['combination']:>9} "
                     f"{p['xw_writes']:>7} {p['aggregation']:>8} {p['writeback']:>7} {r['tiles']:>5} "
                     f"{r['sim_cycles_per_s']:>9.0f} "
                     f"{sched:>32}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from hw.rtl.top import LayerMismatch

    args = _parser().parse_args(argv)
    try:
        records = run_layers(args)
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except LayerMismatch as e:
        print(f"MISMATCH {e}")
        return 1
    print(table(records))
    print(f"model = hw.timing.accel_top_layer_cycles; sched = hw.scheduler on the layer alone, on preset "
          f"'{records[0]['scheduler_config']}' / with the RTL's engine counts / moved to the RTL's design (the "
          "steps are in the records; see hw/rtl/README.md); records in " + str(Path(args.out).resolve()))
    bad = [r for r in records if not r["bit_exact"]]
    for r in bad:
        print(f"MISMATCH {r['mismatch']}")
    off = [r["layer"] for r in records if not r["cycle_exact"]]
    if off:
        print(f"RTL cycles differ from hw.timing.accel_top_layer_cycles on layers {off}")
    return 1 if bad or off else 0


if __name__ == "__main__":
    sys.exit(main())
