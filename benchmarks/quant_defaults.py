"""The plain command, as a user types it: ``python -m gnn.train --dataset D --model M --quant a2q --target-bits 1.7``
(the preset of gnn/presets.py, nothing else set) against the plain FP32 command ``--dataset D --model M`` on the
same seeds, for every (dataset, model) asked.

    python benchmarks/quant_defaults.py --datasets cora,citeseer --models gcn --seeds 5

Per cell: validation-selected test accuracy (mean +- std over seeds 0..n-1), the learned average feature bits
(without the sign bit) and their distance to the target, and the gap to FP32. Goals (issue 32): Cora GCN within
1.0 point of FP32 at <= 1.7 bits, every other node dataset within 1.5 points, the bits within 0.15 of the target.
Writes benchmarks/results/quant_defaults.json after every cell, merged with the cells other runs wrote meanwhile
(run datasets in parallel processes, one thread each).
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from benchmarks._common import QUANT_GRID_NODE, RESULTS, machine, mean_std, pm, table_head
from gnn.data.loaders import load_dataset
from gnn.experiment import run_experiment
from gnn.presets import describe, model_and_train_config, with_overrides

PATH = RESULTS / "quant_defaults.json"
GOAL_GAP_PT = {"cora": 1.0}  # every other dataset: DEFAULT_GOAL_GAP_PT
DEFAULT_GOAL_GAP_PT = 1.5
GOAL_BITS_DISTANCE = 0.15




def run_cell(dataset: str, model: str, method: str, target: float, seeds: list[int]) -> dict:
    graph = load_dataset(dataset)
    out = {}
    for quant in ("none", method):
        model_cfg, train_cfg = model_and_train_config(graph, model, quant)
        if quant != "none":
            train_cfg = with_overrides(train_cfg, target_bits=target)
        t0 = time.perf_counter()
        res = run_experiment(graph, model_cfg, train_cfg, seeds, progress=False)
        runs = res["per_run"]
        out[quant] = {"test_acc": mean_std([100 * r["test_acc"] for r in runs]),
                      "val_acc": mean_std([100 * r["val_acc"] for r in runs]),
                      "per_seed_test": [100 * r["test_acc"] for r in runs], "seconds": time.perf_counter() - t0,
                      "preset": describe(graph, model, quant)}
        if quant != "none":
            out[quant]["avg_bits"] = mean_std([r["quant_summary"]["avg_bits"] for r in runs])
    q, fp32 = out[method], out["none"]
    gap = q["test_acc"]["mean"] - fp32["test_acc"]["mean"]
    bits = q["avg_bits"]["mean"]
    goal = GOAL_GAP_PT.get(dataset, DEFAULT_GOAL_GAP_PT)
    return {"dataset": dataset, "model": model, "method": method, "target_bits": target, "seeds": seeds,
            "fp32": fp32, "quant": q, "gap_pt": gap, "goal_gap_pt": goal,
            "bits_distance": bits - target, "met": bool(gap >= -goal and bits <= target + 1e-9
                                                        and abs(bits - target) <= GOAL_BITS_DISTANCE),
            "command": f"python -m gnn.train --dataset {dataset} --model {model} --quant {method} "
                       f"--target-bits {target:g} --seeds {len(seeds)}",
            "threads": torch.get_num_threads()}


def merge_write(cell: dict) -> None:
    """Write ``cell`` into the results file as it is NOW (other processes may have added cells)."""
    data = json.loads(PATH.read_text()) if PATH.exists() else {"cells": []}
    key = (cell["dataset"], cell["model"], cell["method"], cell["target_bits"])
    data["cells"] = [c for c in data["cells"] if (c["dataset"], c["model"], c["method"], c["target_bits"]) != key]
    data["cells"].append(cell)
    data["machine"] = machine()
    data["note"] = ("validation-selected test accuracy (%); FP32 = the plain FP32 command on the same seeds; "
                    f"goals: gap >= -{GOAL_GAP_PT['cora']} pt on Cora, >= -{DEFAULT_GOAL_GAP_PT} pt elsewhere, "
                    f"bits within {GOAL_BITS_DISTANCE} of the target and not above it")
    PATH.parent.mkdir(parents=True, exist_ok=True)
    PATH.write_text(json.dumps(data, indent=1))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cora,citeseer,amazon-computers,coauthor-cs")
    p.add_argument("--models", default="gcn")
    p.add_argument("--method", default="a2q", choices=("a2q", "degree-aware"))
    p.add_argument("--target-bits", type=float, default=1.7)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: cells of parallel runs do not compete)")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.threads < 1:
        p.error("--seeds and --threads must be >= 1")
    torch.set_num_threads(args.threads)
    for dataset in args.datasets.split(","):
        for model in args.models.split(","):
            cell = run_cell(dataset, model, args.method, args.target_bits, list(range(args.seeds)))
            merge_write(cell)
            print(f"{dataset} {model}: FP32 {cell['fp32']['test_acc']['mean']:.2f}, {args.method} "
                  f"{cell['quant']['test_acc']['mean']:.2f} at {cell['quant']['avg_bits']['mean']:.2f} bits "
                  f"(gap {cell['gap_pt']:+.2f} pt, goal -{cell['goal_gap_pt']}): "
                  f"{'met' if cell['met'] else 'MISSED'}", flush=True)


def render(res: dict) -> list[str]:
    lines = ["## Quantization defaults: the plain command against FP32 (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/quant_defaults.json` (`python benchmarks/quant_defaults.py`). Each row is "
             "what a user gets from the command shown, with the preset of `gnn/presets.py` and nothing else set, "
             "against the plain FP32 command on the same seeds. " + res.get("note", "") + ".", "",
             *table_head("dataset", "model", "seeds", "FP32", "quantized", "avg bits (no sign)", "gap (pt)",
                         "goal (pt)", "met", "command")]
    presets = {}
    for c in sorted(res.get("cells", []), key=lambda c: (QUANT_GRID_NODE[0].index(c["dataset"])
                                                         if c["dataset"] in QUANT_GRID_NODE[0] else 99, c["model"])):
        q, f = c["quant"], c["fp32"]
        lines.append(f"| {c['dataset']} | {c['model']} | {len(c['seeds'])} | {pm(f['test_acc'])} | "
                     f"{pm(q['test_acc'])} | {q['avg_bits']['mean']:.2f} (target {c['target_bits']:g}) | "
                     f"{c['gap_pt']:+.2f} | -{c['goal_gap_pt']:g} | {'yes' if c['met'] else '**no**'} | "
                     f"`{c['command']}` |")
        presets[q["preset"]] = True
    return lines + ["", "Presets in force:", ""] + [f"- {p}" for p in presets] + [""]


if __name__ == "__main__":
    main()
