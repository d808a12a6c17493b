"""Graph classification through the whole chain: A2Q training (1.7 bits), the integer export with its readout, and
the cycle model, on MUTAG and PROTEINS with GIN and GCN.

    python -m benchmarks.graph_level_chain --folds 3

Per (dataset, model): the preset of ``python -m gnn.train --quant a2q --target-bits 1.7 --penalty-weight 25`` (the
quantization table's graph-task protocol) trained on folds
0..K-1 (seed = fold, the ``gnn.train`` convention), every fold's best checkpoint (selected on validation) exported
with ``quant.export`` (the fold's test graphs as one block-diagonal graph plus the integer pooling and head,
``quant.readout``): test accuracy of the fake-quant model and of the integer path per fold, their difference, the
learned bits and the export's bytes against FP32; the first fold's export simulated on MEGA and the HyGCN-like
baseline with the functional check (every layer and the readout bit-exact). Writes
benchmarks/results/graph_level_chain.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from benchmarks._common import (
    RESULTS,
    machine,
    machine_line,
    mean_std,
    merge_subset,
    pm,
    save_json,
    table_head,
    table_row,
)
from gnn.data.loaders import load_dataset
from gnn.experiment import run_experiment
from gnn.presets import model_and_train_config, with_overrides

PATH = RESULTS / "graph_level_chain.json"
CASES = (("mutag", "gin"), ("mutag", "gcn"), ("proteins", "gin"), ("proteins", "gcn"))
TARGET_BITS = 1.7
PENALTY_WEIGHT = 25.0  # the graph-task A2Q runs of the quantization table (benchmarks/quant_table.py commands)




def _simulate(export: Path) -> dict:
    from hw.config import preset
    from hw.report import run_simulation
    from hw.workload import workload_from_export

    wl = workload_from_export(str(export))
    sims = {arch: run_simulation(wl, preset(arch), check=True) for arch in ("mega", "hygcn")}
    mega, base = sims["mega"], sims["hygcn"]
    return {"mega_cycles": mega["total_cycles"], "hygcn_cycles": base["total_cycles"],
            "speedup_vs_hygcn": base["total_cycles"] / mega["total_cycles"],
            "dram_reduction_vs_hygcn": base["dram"]["total_bytes"] / mega["dram"]["total_bytes"],
            "functional_check": mega["functional_check"], "readout_ops": mega.get("readout"),
            "nodes": mega["workload"]["num_nodes"], "edges": mega["workload"]["num_edges"]}


def run_case(dataset: str, arch: str, folds: int, work: Path) -> dict:
    from quant.export import export_run
    from quant.qgraph import load

    t0 = time.perf_counter()
    graph = load_dataset(dataset)
    model_cfg, train_cfg = model_and_train_config(graph, arch, "a2q")
    train_cfg = with_overrides(train_cfg, target_bits=TARGET_BITS, penalty_weight=PENALTY_WEIGHT)
    run_dir = work / f"{dataset}_{arch}"
    out = run_experiment(graph, model_cfg, train_cfg, [0], run_dir=run_dir, progress=False, num_folds=folds)
    per_fold = []
    for fold, r in enumerate(out["per_run"]):
        q = load(export_run(run_dir, work / f"{dataset}_{arch}_fold{fold}.qgraph", seed_dir=f"seed{fold}_fold{fold}"))
        q.verify()
        m = q.manifest["metrics"]
        per_fold.append({"fold": fold, "train_test_acc": 100 * r["test_acc"],
                         "avg_bits": r["quant_summary"]["avg_bits"],
                         "fake_quant_acc": 100 * m["test_acc_fake_quant"], "integer_acc": 100 * m["test_acc_integer"],
                         "delta_pt": m["test_acc_delta_pt"], "agreement": m["prediction_agreement"],
                         "test_graphs": q.manifest["readout"]["num_graphs"],
                         "all_in_bytes": m["storage"]["all_in_bytes"],
                         "fp32_all_in_bytes": m["storage"]["fp32_all_in_bytes"]})
    cell = {"dataset": dataset, "model": arch, "folds": folds, "per_fold": per_fold,
            "fake_quant_acc": mean_std([f["fake_quant_acc"] for f in per_fold]),
            "integer_acc": mean_std([f["integer_acc"] for f in per_fold]),
            "max_abs_delta_pt": max(abs(f["delta_pt"]) for f in per_fold),
            "avg_bits": mean_std([f["avg_bits"] for f in per_fold]),
            "bytes_ratio": mean_std([f["fp32_all_in_bytes"] / f["all_in_bytes"] for f in per_fold]),
            "simulation_fold0": _simulate(work / f"{dataset}_{arch}_fold0.qgraph")}
    cell["seconds"] = time.perf_counter() - t0
    return cell


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--folds", type=int, default=10, help="folds 0..K-1 of the 10-fold split (default: all)")
    p.add_argument("--cases", default="all", help="comma-separated dataset:model pairs (default: "
                   + ", ".join(f"{d}:{m}" for d, m in CASES) + "); a subset replaces its rows in the results file")
    args = p.parse_args(argv)
    cases = CASES if args.cases == "all" else [tuple(c.split(":")) for c in args.cases.split(",")]
    cells = []
    with tempfile.TemporaryDirectory() as tmp:
        for dataset, arch in cases:
            cells.append(run_case(dataset, arch, args.folds, Path(tmp)))
            print(render({"cells": cells})[-1], flush=True)
    command = f"python -m benchmarks.graph_level_chain --folds {args.folds}" + (
        f" --cases {args.cases}" if args.cases != "all" else "")
    if args.cases != "all":  # a subset: replace its rows, keep the others (and their command)
        cells, command = merge_subset(PATH, cells, lambda c: (c["dataset"], c["model"]), command)
    cells.sort(key=lambda c: CASES.index((c["dataset"], c["model"])) if (c["dataset"], c["model"]) in CASES else 99)
    res = {"cells": cells, "target_bits": TARGET_BITS, "penalty_weight": PENALTY_WEIGHT, "machine": machine(),
           "command": command, "torch_threads": torch.get_num_threads()}
    save_json(PATH, res)
    return res


def render(res: dict) -> list[str]:
    """RESULTS.md: one row per (dataset, model)."""
    lines = ["## Graph classification through export and simulation", "",
             f"Command: `{res.get('command', 'python -m benchmarks.graph_level_chain')}` (file: "
             "`benchmarks/results/graph_level_chain.json`). A2Q at "
             f"{res.get('target_bits', TARGET_BITS)} bits (penalty weight "
             f"{res.get('penalty_weight', PENALTY_WEIGHT):g}) "
             "with the `gnn.train` preset, one run per fold (seed = "
             "fold), best checkpoint on validation; each fold's test graphs exported as one block-diagonal graph "
             "with the integer readout (pooling and head, `quant.readout`) and compared with the fake-quant model on "
             "the same graphs; fold 0's export simulated (MEGA vs the HyGCN-like baseline, cycles of the layers; "
             "the readout is checked, not timed). Accuracies depend on the thread count (float summation order "
             "changes the trajectories): these runs used "
             f"{res.get('torch_threads', 'the default number of')} torch thread(s) per process.", "",
             *table_head("dataset", "model", "folds", "fake-quant (%)", "integer (%)", "max abs delta (pt)", "bits",
                         "bytes vs FP32", "MEGA vs HyGCN cycles", "functional check")]
    for c in res.get("cells", []):
        s = c["simulation_fold0"]
        check = "all bit-exact" if all("bit-exact" in m for m in s["functional_check"]) else \
            ", ".join(s["functional_check"])
        lines.append(table_row(c["dataset"], c["model"], c["folds"], pm(c["fake_quant_acc"]), pm(c["integer_acc"]),
                               f"{c['max_abs_delta_pt']:.2f}", f"{c['avg_bits']['mean']:.2f}",
                               f"{c['bytes_ratio']['mean']:.1f}x", f"{s['speedup_vs_hygcn']:.2f}x", check))
    return [*lines, "", machine_line(res), ""] if "machine" in res else lines


if __name__ == "__main__":
    main()
