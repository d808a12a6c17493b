"""Design-space exploration speed and what it finds: ``python -m hw.explore`` over Cora and Coauthor CS.

Runs the same sweep (default: the built-in space, 500 random designs plus the MEGA preset, on each workload) once
per worker count of ``--workers`` (1 = this process, one core; 2 = a local pool of two), each into a fresh cache
so every point is simulated, and records the measured points/s (the executor phase: worker start-up and every
simulation; the one functional check per workload is timed apart). Then, from the sweep's Pareto fronts, per
workload: how much faster / how much less energy the best design with at most MEGA's (relative) area is, and how
many designs dominate MEGA in latency, energy and area. The runs must agree point for point. Writes
benchmarks/results/hw_explore.json with the command, the machine and the load average before and after.

    python benchmarks/hw_explore.py --train-exports runs/dse        # trains both exports first (degree-aware GCN)
    python benchmarks/hw_explore.py cora.qgraph coauthor-cs.qgraph  # existing exports
    python benchmarks/hw_explore.py sbm-300 --samples 8             # a quick check (degree-rule bits, no accuracy)

Workloads as ``python -m hw.simulate`` takes them; a dataset name has degree-rule bits and random weights (no
accuracy), an export its learned bits and its integer test accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import RESULTS, machine, save_json, table_head, train_and_export
from hw.explore.pareto import versus_base

DATASETS = ("cora", "coauthor-cs")
RECIPE = ("--model", "gcn", "--quant", "degree-aware", "--target-bits", "4", "--seeds", "1")  # + --dataset, --epochs
TIMING = ("sim_wall_s", "eval_wall_s")


def train_exports(work: Path, epochs: int | None) -> list[str]:
    """Degree-aware GCN exports of :data:`DATASETS` under ``work`` (kept: an existing export is reused)."""
    paths = []
    for dataset in DATASETS:
        qgraph = work / f"{dataset}_gcn_degree-aware.qgraph"
        if not qgraph.exists():
            extra = ["--epochs", str(epochs)] if epochs else []
            train_and_export(["--dataset", dataset, *RECIPE, *extra], work / f"{dataset}_run", qgraph)
        paths.append(str(qgraph))
    return paths


def sweep(workloads: list[str], workers: int, samples: int, seed: int, space: str | None, out: Path) -> dict:
    """One ``python -m hw.explore`` run into the fresh directory ``out``; its pareto payload."""
    from hw.explore.__main__ import main as explore

    argv = [*workloads, "--out", str(out), "--workers", str(workers), "--samples", str(samples), "--seed", str(seed),
            "--no-progress", *(["--space", space] if space else [])]
    return explore(argv)


def read_points(folder: Path) -> list[dict]:
    """A sweep's points.jsonl."""
    return [json.loads(line) for line in (folder / "points.jsonl").read_text().splitlines()]


def _same_points(a: Path, b: Path) -> bool:
    """Whether two sweeps' points.jsonl hold the same figures (timings aside)."""
    def figures(folder: Path) -> dict:
        return {(r["workload"], r["config_hash"]): {k: v for k, v in r.items() if k not in TIMING}
                for r in read_points(folder)}

    return figures(a) == figures(b)


def _design(point: dict | None, base: dict) -> dict | None:
    """A design's figures and the fields where it differs from the base preset."""
    if point is None:
        return None
    changed = {k: v for k, v in point["config"].items() if base["config"][k] != v}
    return {k: point[k] for k in ("latency_us", "energy_pj", "area_ge", "dram_bytes")} | {"changed": changed}


def summarize(payload: dict, points: list[dict]) -> dict:
    """Per workload: base figures, front size and the best designs against the base preset (also among the
    designs at the preset's clock: the relative area is timing-free, so a faster clock costs no area in it)."""
    out = {}
    for name, v in payload["versus_base"].items():
        base = v["base"]
        same = versus_base([p for p in points if p["workload"] == name and not p["is_base"]], base, ("clock_ghz",))
        out[name] = {"accuracy": payload["workloads"][name]["accuracy"],
                     "base": {k: base[k] for k in ("latency_us", "energy_pj", "area_ge", "dram_bytes")},
                     "front_size": payload["front_sizes"][f"design:{name}"],
                     "designs_at_most_base_area": v["designs_at_most_base_area"],
                     "speedup_at_equal_area": v["speedup_at_equal_area"],
                     "energy_saving_at_equal_area": v["energy_saving_at_equal_area"],
                     "fastest_at_equal_area": _design(v["fastest_at_equal_area"], base),
                     "cheapest_at_equal_area": _design(v["cheapest_at_equal_area"], base),
                     "num_dominating_base": v["num_dominating_base"],
                     "best_dominating": _design(v["best_dominating"], base),
                     "same_clock": {"speedup_at_equal_area": same["speedup_at_equal_area"],
                                    "energy_saving_at_equal_area": same["energy_saving_at_equal_area"],
                                    "fastest_at_equal_area": _design(same["fastest_at_equal_area"], base),
                                    "num_dominating_base": same["num_dominating_base"]}}
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads", nargs="*", help="exports / dataset names (default: --train-exports, else the "
                   "dataset names cora coauthor-cs)")
    p.add_argument("--train-exports", type=Path, help="train (or reuse) degree-aware GCN exports of Cora and "
                   "Coauthor CS in this folder and sweep them")
    p.add_argument("--train-epochs", type=int, help="epochs of those trainings (default: the preset's)")
    p.add_argument("--samples", type=int, default=500, help="random designs per sweep (default 500)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--space", help="TOML design space (default: hw.explore's built-in space)")
    p.add_argument("--workers", default="1,2", help="comma-separated worker counts, one sweep each (default 1,2)")
    p.add_argument("--keep", type=Path, help="keep the sweeps' folders (points, fronts, PNGs) under this folder")
    p.add_argument("--out", type=Path, default=RESULTS / "hw_explore.json", help="results file")
    args = p.parse_args(argv)
    workers = [int(w) for w in args.workers.split(",")]
    load_before = os.getloadavg()
    workloads = args.workloads or (train_exports(args.train_exports, args.train_epochs) if args.train_exports
                                   else list(DATASETS))
    runs, t0 = [], time.time()
    with tempfile.TemporaryDirectory(prefix="hw_explore_") as tmp:
        root = args.keep or Path(tmp)
        for w in workers:
            payload = sweep(workloads, w, args.samples, args.seed, args.space, root / f"workers{w}")
            runs.append({"workers": w, **{k: payload["stats"][k] for k in
                                          ("points", "evaluated", "eval_wall_s", "check_wall_s", "startup_s",
                                           "points_per_s", "wall_s")}})
        agree = all(_same_points(root / f"workers{workers[0]}", root / f"workers{w}") for w in workers[1:])
        points = read_points(root / f"workers{workers[-1]}")
    if not agree:
        raise RuntimeError("the sweeps with different worker counts disagree on some point")
    command = "python benchmarks/hw_explore.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = {"command": command.strip(), "machine": machine(), "load_average": {"before": load_before,
                                                                                "after": os.getloadavg()},
              "workloads": payload["workloads"], "space": payload["space"], "model_version": payload["model_version"],
              "area_note": payload["area_note"], "functional_check": payload["functional_check"], "runs": runs,
              "runs_agree": agree, "per_workload": summarize(payload, points), "wall_seconds": time.time() - t0}
    save_json(args.out, result)
    print("\n".join(render(result)))
    return result


def _fmt_design(d: dict | None) -> str:
    if d is None:
        return "-"
    return ", ".join(f"{k}={v}" for k, v in sorted(d["changed"].items())) or "(the preset)"


def render(res: dict) -> list[str]:
    """Sweep throughput per worker count, and per workload the best designs against the base preset."""
    if not res.get("runs"):
        return []
    space = res["space"]
    lines = ["## Design-space exploration (hw.explore)", "",
             f"Command: `{res['command']}` (file: `benchmarks/results/hw_explore.json`); {space['sampler']} "
             f"sampling, {space['samples']} designs (seed {space['seed']}) of {len(space['fields'])} fields around "
             f"`{space['base']}`, plus the preset, on each workload; cycle model with the functional check off "
             f"(on the preset, once per workload: {res['functional_check']}). Machine: {res['machine']['cpu_count']} "
             f"cores, load average {res['load_average']['before'][0]:.2f} before, "
             f"{res['load_average']['after'][0]:.2f} after. {res['area_note']}. Points/s: simulations in the "
             "sweep phase, after the workers started (start-up apart).", "",
             *table_head("workers", "points", "simulated", "start-up s", "sweep s", "points/s"),
             *[f"| {r['workers']} | {r['points']} | {r['evaluated']} | {r['startup_s']:.1f} | {r['eval_wall_s']:.1f} | "
               f"{r['points_per_s']:.2f} |" for r in res["runs"]], "",
             f"Best designs with at most {space['base']}'s relative area, against {space['base']} (speedup = its "
             "latency / theirs; energy saving = its energy / theirs); 'same clock': only designs at its clock "
             "(the area model charges nothing for a faster clock).", "",
             *table_head("workload", "test acc (integer)", f"{space['base']} latency us", f"{space['base']} energy uJ",
                         "front", "speedup", "energy saving", "speedup, same clock", "energy saving, same clock",
                         f"designs dominating {space['base']}", "fastest design, same clock (changed fields)")]

    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}x"

    for name, w in res["per_workload"].items():
        acc = "-" if w["accuracy"] is None else f"{100 * w['accuracy']:.2f}"
        same = w["same_clock"]
        lines.append(f"| {name} | {acc} | {w['base']['latency_us']:.1f} | {w['base']['energy_pj'] / 1e6:.2f} | "
                     f"{w['front_size']} | {ratio(w['speedup_at_equal_area'])} | "
                     f"{ratio(w['energy_saving_at_equal_area'])} | {ratio(same['speedup_at_equal_area'])} | "
                     f"{ratio(same['energy_saving_at_equal_area'])} | {w['num_dominating_base']} | "
                     f"{_fmt_design(same['fastest_at_equal_area'])} |")
    return lines + [""]


if __name__ == "__main__":
    main()
