"""``python -m hw.explore [--space space.toml] --out DIR <exports or datasets ...>``: design-space exploration.

Sweeps accelerator fields (a space file, or without one the built-in space: every count, buffer, DRAM bandwidth
and clock of the base preset at x0.5 / x1 / x2, sampled at random) on every workload (a ``.qgraph`` export or a
dataset / synthetic name, as ``python -m hw.simulate``), with the cycle model and the functional check off (one
bit-exact check per workload on the base preset). Every point is cached in ``DIR/cache.jsonl`` by (workload
SHA-256, config hash): rerun the same command after an interrupt to resume. Writes ``DIR/points.jsonl``,
``DIR/pareto.json`` and ``DIR/{latency_energy,accuracy_energy,area_latency}.png``; area is relative (hw/area.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from gnn.cli import UsageError
from gnn.data.registry import DataError
from hw.config import ConfigError, preset
from hw.explore.cache import PointCache
from hw.explore.evaluate import WorkloadSpec, install, load_workload, loaded
from hw.explore.executors import make_executor
from hw.explore.space import SAMPLERS, default_space, load_space, sample
from hw.explore.sweep import run_sweep, write_outputs
from hw.workload import ORDERS
from quant.qgraph import ExportError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hw.explore", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="+", help="quantized export paths and/or dataset / synthetic names")
    p.add_argument("--out", required=True, help="output directory (also holds the cache)")
    p.add_argument("--space", help="TOML design space (base, sampler, samples, seed, [fields]); default: built in")
    p.add_argument("--sampler", choices=SAMPLERS, help="override the space's sampler")
    p.add_argument("--samples", type=int, help="override the space's number of random designs (default 64)")
    p.add_argument("--seed", type=int, help="override the space's random seed (default 0)")
    p.add_argument("--executor", default="local", choices=("local", "ray", "inprocess"),
                   help="local process pool (default), a Ray cluster (pip install -e .[ray]) or this process")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="local processes / Ray CPUs to start (default: all cores)")
    p.add_argument("--ray-address", default=None, help="Ray cluster to join ('auto', ray://host:10001); "
                   "default: start a local one")
    p.add_argument("--cache", help="cache file (default DIR/cache.jsonl); share it between sweeps to reuse points")
    p.add_argument("--hidden", type=int, default=128, help="hidden width of dataset workloads (default 128)")
    p.add_argument("--order", default="natural", choices=ORDERS, help="node order of dataset workloads")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (none is drawn off a terminal)")
    return p


def _space(args: argparse.Namespace):
    overrides = {k: getattr(args, k) for k in ("sampler", "samples", "seed") if getattr(args, k) is not None}
    if args.space is None:
        return default_space(**overrides)
    return replace(load_space(args.space), **overrides)


def _specs(args: argparse.Namespace) -> list[WorkloadSpec]:
    """The workloads, each built once here so that a bad name or export fails before any simulation."""
    specs = []
    for source in args.workloads:
        spec = WorkloadSpec(source=source, hidden=args.hidden, order=args.order)
        if source.endswith(".qgraph") and not Path(source).exists():
            raise UsageError(f"export {source} does not exist")
        try:
            load_workload(spec)
        except (DataError, ExportError, ValueError) as e:
            raise UsageError(f"{source}: {e}") from None
        specs.append(spec)
    if len({s.name for s in specs}) != len(specs):
        raise UsageError(f"two workloads share a name: {[s.name for s in specs]}; give each a distinct name")
    return specs


def _check_constants(specs: list[WorkloadSpec], designs: list) -> None:
    """A design that streams requantization constants needs combination-first GCN layers (one line, else)."""
    from hw.scheduler import constants_unsupported

    for spec in specs:
        wl = load_workload(spec)
        for cfg in designs:
            why = constants_unsupported(cfg, wl)
            if why:
                raise UsageError(why)


def main(argv: list[str] | None = None) -> dict:
    """The command line; bad input (space, export, dataset) ends with one ``error:`` line and exit status 2."""
    args = _parser().parse_args(argv)
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers} must be >= 1")
    try:
        space = _space(args)
        designs, invalid = sample(space)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    if not designs:
        raise UsageError(f"the space has no valid design ({invalid} combinations refused by AcceleratorConfig)")
    specs = _specs(args)
    _check_constants(specs, designs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        executor = make_executor(args.executor, args.workers, args.ray_address, initializer=install,
                                 initarg=loaded(specs))
    except ImportError as e:
        raise UsageError(f"--executor {args.executor} needs {e.name}: pip install -e .[ray]") from None
    executor.warm_up()
    startup_s = time.perf_counter() - t0
    cache = PointCache(args.cache or out / "cache.jsonl")
    print(f"hw.explore: {len(designs)} designs ({space.sampler}, {invalid} invalid combinations skipped) x "
          f"{len(specs)} workloads, {len(cache)} cached records, executor {args.executor} x {executor.workers}")
    try:
        points, stats = run_sweep(specs, designs, preset(space.base), cache, executor, not args.no_progress)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {len(cache)} records are in {cache.path}; rerun the same command to resume",
              file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        executor.close()
        cache.close()
    meta = {"space": {"base": space.base, "sampler": space.sampler, "samples": space.samples, "seed": space.seed,
                      "fields": {k: list(v) for k, v in space.dims}, "invalid_skipped": invalid},
            "workloads": {s.name: {"source": s.source, "sha256": s.sha256(), "accuracy": s.accuracy()} for s in specs},
            "stats": {"points": stats.total, "evaluated": stats.evaluated, "cached": stats.cached,
                      "workers": stats.workers, "eval_wall_s": stats.eval_wall_s, "check_wall_s": stats.check_wall_s,
                      "points_per_s": stats.points_per_s, "startup_s": startup_s,
                      "wall_s": time.perf_counter() - t0}}
    payload = write_outputs(out, points, stats, meta)
    print(f"{stats.total} points ({stats.evaluated} evaluated at {stats.points_per_s:.2f} points/s after "
          f"{startup_s:.1f} s of worker start-up, {stats.cached} cached); functional check on {space.base}: "
          f"{stats.checks}")
    for name, v in payload["versus_base"].items():
        speed, energy = v["speedup_at_equal_area"], v["energy_saving_at_equal_area"]
        print(f"  {name}: front {payload['front_sizes'][f'design:{name}']} designs; at <= {space.base}'s area: "
              f"{'-' if speed is None else f'{speed:.2f}x'} faster, {'-' if energy is None else f'{energy:.2f}x'} "
              f"less energy; {v['num_dominating_base']} designs dominate {space.base}")
    print(f"wrote {out}/points.jsonl, pareto.json, latency_energy.png, accuracy_energy.png, area_latency.png")
    return payload


if __name__ == "__main__":
    main()
