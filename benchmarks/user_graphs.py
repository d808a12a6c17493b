"""Graphs given by path, as a user brings them: ``python -m gnn.train --dataset <file>`` FP32 and A2Q (1.7 bits),
the export and the cycle model, for one file of each node-task layout of ``gnn/data/graph_files.py``.

    python -m benchmarks.user_graphs --seeds 2

Graphs: the raw files of amazon-computers and coauthor-cs (gnn-benchmark .npz), cornell5 (Facebook100 .mat) and
cora (its Planetoid folder), taken from the dataset cache by path, each also trained by name on the same seeds (the
per-seed test accuracies must be equal); and a seeded stochastic-block-model graph written by this script as a .npz
and as a .pt. Per graph: GCN test accuracy FP32 and A2Q (validation-selected, mean +- std over seeds 0..n-1), the
learned bits, the integer path of the first seed's export against its fake-quant model, the export's bytes against
FP32, and MEGA against the HyGCN-like baseline (cycles, DRAM bytes) on that export. Graph classification through the
same chain: ``benchmarks/graph_level_chain.py``. Writes benchmarks/results/user_graphs.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
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
from gnn.data.graph_files import detect_format
from gnn.data.loaders import load_dataset
from gnn.data.registry import cache_dir, ensure_raw, get_entry
from gnn.data.synthetic import sbm_graph
from gnn.experiment import run_experiment
from gnn.presets import model_and_train_config, with_overrides

PATH = RESULTS / "user_graphs.json"
BUILT_IN = ("amazon-computers", "coauthor-cs", "cornell5", "cora")
TARGET_BITS = 1.7
SBM = {"num_nodes": 3000, "num_classes": 6, "num_features": 64, "homophily": 0.6, "feature_signal": 0.2, "seed": 7}


def raw_file(name: str) -> Path:
    """The verified raw file of a built-in dataset, as a user would pass it (its copy in the dataset cache); a
    dataset of several raw files (Planetoid): their folder."""
    ensure_raw(name)
    entry = get_entry(name)
    folder = cache_dir() / entry.raw_dir
    return folder / next(iter(entry.files)) if len(entry.files) == 1 else folder


def write_sbm(folder: Path) -> tuple[Path, Path]:
    """The seeded SBM graph as a gnn-benchmark .npz and as a .pt of its PyG Data."""
    data = sbm_graph(**SBM).data
    n = data.num_nodes
    ei = data.edge_index.numpy()
    adj = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(n, n))
    attr = sp.csr_matrix((data.x.numpy() > 0).astype(np.float32))
    npz = folder / "sbm.npz"
    np.savez(npz, adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=adj.shape,
             attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr, attr_shape=attr.shape,
             labels=data.y.numpy())
    pt = folder / "sbm.pt"
    data.x = (data.x > 0).float()
    torch.save(data, pt)
    return npz, pt


def _train(graph, quant: str, seeds: list[int], run_dir: Path | None) -> dict:
    model_cfg, train_cfg = model_and_train_config(graph, "gcn", quant)
    if quant != "none":
        train_cfg = with_overrides(train_cfg, target_bits=TARGET_BITS)
    out = run_experiment(graph, model_cfg, train_cfg, seeds, run_dir=run_dir, progress=False)
    runs = out["per_run"]
    res = {"test_acc": mean_std([100 * r["test_acc"] for r in runs]), "per_seed_test": [r["test_acc"] for r in runs]}
    if quant != "none":
        res["avg_bits"] = mean_std([r["quant_summary"]["avg_bits"] for r in runs])
    return res




def _export_and_simulate(run_dir: Path, out: Path) -> dict:
    from hw.config import preset
    from hw.report import run_simulation
    from hw.workload import workload_from_export
    from quant.export import export_run
    from quant.qgraph import load

    q = load(export_run(run_dir, out))
    q.verify()
    m, s = q.manifest["metrics"], q.manifest["metrics"]["storage"]
    wl = workload_from_export(str(out))
    sims = {arch: run_simulation(wl, preset(arch), check=True) for arch in ("mega", "hygcn")}
    mega, base = sims["mega"], sims["hygcn"]
    return {"integer_acc": 100 * m["test_acc_integer"], "fake_quant_acc": 100 * m["test_acc_fake_quant"],
            "all_in_bytes": s["all_in_bytes"], "fp32_all_in_bytes": s["fp32_all_in_bytes"],
            "mega_cycles": mega["total_cycles"], "hygcn_cycles": base["total_cycles"],
            "functional_check": mega.get("functional_check"),
            "speedup_vs_hygcn": base["total_cycles"] / mega["total_cycles"],
            "dram_reduction_vs_hygcn": base["dram"]["total_bytes"] / mega["dram"]["total_bytes"]}


def run_graph(label: str, path: Path, fmt: str, seeds: list[int], work: Path, by_name: str | None) -> dict:
    graph = load_dataset(path)
    t0 = time.perf_counter()
    cell = {"graph": label, "format": fmt, "file": path.name, "sha256": graph.info["source"]["sha256"],
            "nodes": int(graph.data.num_nodes), "edges": int(graph.data.edge_index.size(1)), "seeds": seeds,
            "fp32": _train(graph, "none", seeds, None),
            "a2q": _train(graph, "a2q", seeds, work / f"{label}_a2q")}
    cell["export"] = _export_and_simulate(work / f"{label}_a2q", work / f"{label}.qgraph")
    if by_name is not None:
        named = _train(load_dataset(by_name), "none", seeds, None)
        cell["by_name"] = {"dataset": by_name, "per_seed_test": named["per_seed_test"],
                           "equal": named["per_seed_test"] == cell["fp32"]["per_seed_test"]}
    cell["seconds"] = time.perf_counter() - t0
    return cell


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=2, help="seeds 0..n-1 per graph")
    p.add_argument("--graphs", default="all", help="comma-separated subset of: " + ", ".join(BUILT_IN) + ", sbm (a "
                   "subset replaces its rows in the results file and keeps the others)")
    args = p.parse_args(argv)
    wanted = set(BUILT_IN) | {"sbm"} if args.graphs == "all" else set(args.graphs.split(","))
    seeds = list(range(args.seeds))
    cells = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        jobs = [(name, raw_file(name), detect_format(raw_file(name)), name) for name in BUILT_IN if name in wanted]
        if "sbm" in wanted:
            npz, pt = write_sbm(work)
            jobs += [("sbm (npz)", npz, "npz", None), ("sbm (pt)", pt, "pt", None)]
        for label, path, fmt, by_name in jobs:
            cells.append(run_graph(label.replace(" ", "_").replace("(", "").replace(")", ""), path, fmt, seeds,
                                   work, by_name))
            print(render({"cells": cells})[-1], flush=True)
    command = f"python -m benchmarks.user_graphs --seeds {args.seeds}"
    if args.graphs != "all":  # a subset: replace its rows, keep the others
        cells, command = merge_subset(PATH, cells, lambda c: c["graph"], f"{command} --graphs {args.graphs}")
    res = {"cells": cells, "target_bits": TARGET_BITS, "sbm": SBM, "machine": machine(), "command": command}
    save_json(PATH, res)
    return res


def render(res: dict) -> list[str]:
    """RESULTS.md: one row per graph file."""
    lines = ["## Graphs given by path (bring your own graph)", "",
             f"Command: `{res.get('command', 'python -m benchmarks.user_graphs')}` (file: "
             "`benchmarks/results/user_graphs.json`). GCN with the preset of `python -m gnn.train --dataset <file>` "
             f"(FP32, and A2Q at {res.get('target_bits', TARGET_BITS)} bits), test accuracy mean +- std over the "
             "seeds; the first seed's A2Q run exported (integer path vs fake-quant) and simulated (MEGA vs the "
             "HyGCN-like baseline, functional check on). `by name = by path`: the per-seed FP32 accuracies of the "
             "same dataset loaded by its registry name are equal.", "",
             *table_head("graph", "format", "nodes", "edges", "FP32 (%)", "A2Q (%)", "bits", "integer - fake (pt)",
                         "bytes vs FP32", "MEGA vs HyGCN cycles", "by name = by path")]
    for c in res.get("cells", []):
        e = c["export"]
        lines.append(table_row(c["graph"], c["format"], c["nodes"], c["edges"], pm(c["fp32"]["test_acc"]),
                               pm(c["a2q"]["test_acc"]), f"{c['a2q']['avg_bits']['mean']:.2f}",
                               f"{e['integer_acc'] - e['fake_quant_acc']:+.2f}",
                               f"{e['fp32_all_in_bytes'] / e['all_in_bytes']:.1f}x",
                               f"{e['speedup_vs_hygcn']:.2f}x",
                               "-" if "by_name" not in c else ("yes" if c["by_name"]["equal"] else "**no**")))
    return [*lines, "", machine_line(res), ""] if "machine" in res else lines


if __name__ == "__main__":
    main()
