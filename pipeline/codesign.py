"""``python -m pipeline.codesign``: the joint sweep of bits and designs (issue 36, deliverable 4).

Per target bitwidth of ``--targets`` and per budget of ``--budgets`` (``memory``: the learned-bits preset's memory
budget; ``hardware``: ``--hw-cost`` on ``--arch`` / ``--hw-config``; ``memory+xw`` / ``hardware+xw``: the same with
XW's bits learned per node, ``--learn-xw-bits``), train one A2Q GCN (``python -m gnn.train``,
``--seeds`` seeds, the validation-selected model of the first one exported) and export it (``python -m
quant.export``); then sweep the accelerator's design space over every export (``python -m hw.explore``). The result
is the joint Pareto front of (bits x design) over error, energy, latency and relative area, in ``DIR/explore``, and
``DIR/codesign.json``: every export's accuracy and bits, and the front's points with the target and budget that
trained them. Finished runs and exports are reused and the sweep's cache resumes, so an interrupted command continues
where it stopped when run again.

    python -m pipeline.codesign --dataset cora --targets 1.0,1.3,1.7,2,3,4 --hw-cost energy --out codesign \\
        [--samples 200] [--space space.toml] [--epochs N] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gnn.cli import UsageError

BUDGETS = ("memory", "hardware", "memory+xw", "hardware+xw")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pipeline.codesign", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora", help="a dataset name or path, as python -m gnn.train takes it")
    p.add_argument("--targets", default="1.0,1.3,1.7,2,3,4", help="comma list of target average feature bits")
    p.add_argument("--budgets", default="memory,hardware+xw",
                   help=f"comma list of: {', '.join(BUDGETS)} (default: A2Q's memory budget against the hardware "
                        "cost with XW's bits learned, the best validated pair: benchmarks/hw_aware.py)")
    p.add_argument("--hw-cost", default="energy", choices=("dram", "energy", "latency"),
                   help="what the hardware budget holds (default energy)")
    p.add_argument("--arch", default="mega", help="accelerator preset of the hardware budget (the sweep's base is "
                   "its space's: the built-in space varies mega)")
    p.add_argument("--hw-config", help="TOML file overriding the preset's fields (hardware budget)")
    p.add_argument("--seeds", type=int, default=1, help="training seeds per (target, budget); the first is exported")
    p.add_argument("--epochs", type=int, help="override the preset's training epochs")
    p.add_argument("--out", required=True, type=Path, help="output directory (runs, exports, the sweep)")
    p.add_argument("--space", help="design space TOML of python -m hw.explore (default: its built-in space)")
    p.add_argument("--samples", type=int, help="random designs of the sweep (default: hw.explore's)")
    p.add_argument("--workers", type=int, help="sweep processes (default: all cores)")
    p.add_argument("--no-progress", action="store_true")
    return p


def _targets(text: str) -> list[str]:
    out = [t.strip() for t in text.split(",") if t.strip()]
    try:
        bad = [t for t in out if not 0.0 <= float(t) <= 8.0]
    except ValueError:
        raise UsageError(f"--targets {text!r}: give numbers of bits, e.g. 1.0,1.7,4") from None
    if not out or bad:
        raise UsageError(f"--targets {text!r}: give bitwidths in [0, 8], e.g. 1.0,1.7,4")
    return out


def train_and_export(args: argparse.Namespace, target: str, budget: str) -> tuple[Path, dict]:
    """One (target, budget): its run directory and export, reused when they exist; returns (export, record)."""
    from gnn.train import main as train
    from quant.export import main as export

    tag = f"{budget}_t{target}"
    run_dir, qgraph = args.out / "runs" / tag, args.out / "exports" / f"{tag}.qgraph"
    if not (run_dir / "results.json").exists():
        hw = ["--hw-cost", args.hw_cost, "--arch", args.arch, *(["--hw-config", args.hw_config]
                                                                  if args.hw_config else [])]
        train(["--dataset", args.dataset, "--model", "gcn", "--quant", "a2q", "--target-bits", target,
               "--seeds", str(args.seeds), *(["--epochs", str(args.epochs)] if args.epochs else []),
               *(hw if budget.startswith("hardware") else []),
               *(["--learn-xw-bits"] if budget.endswith("+xw") else []), "--run-dir", str(run_dir), "--overwrite",
               *(["--no-progress"] if args.no_progress else [])])
    if not qgraph.exists():
        export(["--run", str(run_dir), "--out", str(qgraph)])
    results = json.loads((run_dir / "results.json").read_text())
    metrics = json.loads((qgraph / "manifest.json").read_text())["metrics"]
    return qgraph, {"target": float(target), "budget": budget, "export": str(qgraph),
                    "test_acc": results["summary"]["test_acc"], "val_acc": results["summary"]["val_acc"],
                    "test_acc_integer": 100 * metrics["test_acc_integer"], "avg_bits": metrics["avg_bits"],
                    "predicted": metrics.get("hw_cost", {}).get("predicted")}


def main(argv: list[str] | None = None) -> dict:
    args = _parser().parse_args(argv)
    targets = _targets(args.targets)
    budgets = [b.strip() for b in args.budgets.split(",") if b.strip()]
    if not budgets or set(budgets) - set(BUDGETS):
        raise UsageError(f"--budgets {args.budgets!r}: a comma list of {', '.join(BUDGETS)}")
    from hw.explore.__main__ import main as explore

    exports, records = [], []
    for budget in budgets:
        for target in targets:
            path, record = train_and_export(args, target, budget)
            exports.append(str(path))
            records.append(record)
            print(f"{budget} budget, target {target}: test {record['test_acc']['mean']:.2f}% (integer "
                  f"{record['test_acc_integer']:.2f}%), {record['avg_bits']:.2f} bits -> {path}", flush=True)
    pareto = explore([*exports, "--out", str(args.out / "explore"),
                      *(["--space", args.space] if args.space else []),
                      *(["--samples", str(args.samples)] if args.samples else []),
                      *(["--workers", str(args.workers)] if args.workers else []),
                      *(["--no-progress"] if args.no_progress else [])])
    by_export = {Path(r["export"]).name: r for r in records}
    joint = [{**by_export.get(p["workload"], {}), **{k: p[k] for k in ("workload", "config_hash", "error",
                                                                          "energy_pj", "latency_us", "area_ge")}}
             for p in pareto["points"] if "joint" in p["on"]]
    command = "python -m pipeline.codesign " + " ".join(argv if argv is not None else sys.argv[1:])
    out = {"command": command.strip(), "dataset": args.dataset, "exports": records, "joint_front": joint}
    (args.out / "codesign.json").write_text(json.dumps(out, indent=1, sort_keys=True))
    print(f"joint front of (bits x design): {len(joint)} points; {args.out / 'codesign.json'}, plots in "
          f"{args.out / 'explore'}")
    for p in sorted(joint, key=lambda p: p["energy_pj"])[:10]:
        print(f"  {p.get('budget', '?'):>8} t={p.get('target', '?')}: error {100 * p['error']:.2f}%  energy "
              f"{p['energy_pj'] / 1e6:.2f} uJ  latency {p['latency_us']:.2f} us  area {p['area_ge'] / 1e6:.2f} M GE")
    return out


if __name__ == "__main__":
    main()
