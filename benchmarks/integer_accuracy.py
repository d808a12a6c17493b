"""Test accuracy of the integer golden models against the fake-quant models they come from, over seeds.

    python benchmarks/integer_accuracy.py --datasets cora,citeseer --models gcn,sage --methods a2q,degree-aware \
        --targets 4,1.7 --seeds 5

Per (dataset, model, method, target) and seed: train the quantized model with its preset and the grid's penalty
weight (``gnn.trainer.train_one``, validation-selected weights) and evaluate the float32 fake-quant model; convert it
to integers (``quant.archs.gcn.convert.to_quantized_gcn``, ``quant.archs.sage.convert.to_quantized_sage``,
``quant.archs.gin.convert.to_quantized_gin`` or ``quant.archs.gat.convert.to_quantized_gat``, default fixed-point
format) and run the integer path (``quant.archs.gcn.integer``, ``quant.archs.sage.integer``,
``quant.archs.gin.integer``, ``quant.archs.gat.integer``).
GIN is trained with its MLP's hidden activation quantized (``--gin-hidden quantized``: ``quantize_mlp_hidden``, as
A2Q's code) or, as the grid's GIN cells, without it (``--gin-hidden fixed``: the integer path carries the hidden
activation in 16-bit fixed point, ``quant.archs.gin.convert``); the cell records which (``gin_hidden``).
Reports both test accuracies (mean +- std over seeds), the per-seed change in points (issue target: within 0.3 pt)
and the fraction of all nodes whose predicted class agrees. Writes benchmarks/results/integer_accuracy.json
(``--merge`` keeps other cells).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace

import numpy as np
import torch

from benchmarks._common import load_results, machine, machine_line, mean_std, pm, save_results, table_head
from gnn.data.loaders import load_dataset
from gnn.models import build_model
from gnn.presets import model_and_train_config
from gnn.trainer import seed_everything, train_one
from quant.archs.gat.convert import to_quantized_gat
from quant.archs.gat.integer import gat_forward_int
from quant.archs.gcn.convert import to_quantized_gcn
from quant.archs.gcn.integer import gcn_forward_int
from quant.archs.gin.convert import to_quantized_gin
from quant.archs.gin.integer import gin_forward_int
from quant.archs.sage.convert import to_quantized_sage
from quant.archs.sage.integer import sage_forward_int

NAME = "integer_accuracy"
INTEGER_PATHS = {"gcn": (to_quantized_gcn, gcn_forward_int), "sage": (to_quantized_sage, sage_forward_int),
                 "gin": (to_quantized_gin, gin_forward_int), "gat": (to_quantized_gat, gat_forward_int)}
TARGET_GAP_PT = 0.3


def integer_logits(model, data) -> np.ndarray:
    """Logits (N, C) float64 of the integer golden model of a trained quantized GCN / GraphSAGE / GIN / GAT."""
    if model.cfg.arch not in INTEGER_PATHS:
        raise ValueError(f"no integer path for arch {model.cfg.arch!r}; valid: {', '.join(INTEGER_PATHS)}")
    convert, forward = INTEGER_PATHS[model.cfg.arch]
    conv = convert(model, data.x, data.edge_index)
    _, logits = forward(conv.model, conv.edge_index)
    return logits


GIN_HIDDEN = ("quantized", "fixed")


def run_seed(graph, arch: str, method: str, target: float, seed: int, penalty_weight: float,
             gin_hidden: str = "quantized") -> dict:
    model_cfg, train_cfg = model_and_train_config(graph, arch)
    train_cfg = replace(train_cfg, quant=method, target_bits=target, penalty_weight=penalty_weight, device="cpu",
                        bits_control="penalty",  # as its recorded cells trained (--penalty-weight)
                        quantize_mlp_hidden=arch == "gin" and gin_hidden == "quantized")
    seed_everything(seed)
    model = build_model(model_cfg)
    result = train_one(model, graph, graph.splits[0], train_cfg, seed=seed, progress=False)
    model.eval()
    d, test, y = graph.data, graph.splits[0].test.numpy(), graph.data.y.numpy()
    if d.x.is_sparse:  # the converters take dense X
        d = d.clone()
        d.x = d.x.to_dense()
    x = d.x
    with torch.no_grad():
        fake = model(x, d.edge_index).numpy()
    t0 = time.perf_counter()
    logits = integer_logits(model, d)
    acc_fake = float((fake[test].argmax(1) == y[test]).mean())
    acc_int = float((logits[test].argmax(1) == y[test]).mean())
    return {"seed": seed, "test_acc_fake_quant": acc_fake, "test_acc_integer": acc_int,
            "delta_pt": 100.0 * (acc_int - acc_fake), "avg_bits": result.quant_summary["avg_bits"],
            "prediction_agreement": float((logits.argmax(1) == fake.argmax(1)).mean()),
            "integer_seconds": time.perf_counter() - t0}




def summarize_cell(dataset: str, arch: str, method: str, target: float, penalty_weight: float, runs: list[dict],
                   gin_hidden: str | None = None) -> dict:
    deltas = [r["delta_pt"] for r in runs]
    return {"dataset": dataset, "model": arch, "method": method, "target_bits": target, "gin_hidden": gin_hidden,
            "penalty_weight": penalty_weight, "seeds": len(runs),
            "test_acc_fake_quant": mean_std([100 * r["test_acc_fake_quant"] for r in runs]),
            "test_acc_integer": mean_std([100 * r["test_acc_integer"] for r in runs]),
            "delta_pt": mean_std(deltas), "max_abs_delta_pt": max(abs(v) for v in deltas),
            "avg_bits": mean_std([r["avg_bits"] for r in runs]),
            "prediction_agreement_min": min(r["prediction_agreement"] for r in runs),
            "within_target": abs(statistics.fmean(deltas)) <= TARGET_GAP_PT, "per_seed": runs}


def cell_key(cell: dict, key: tuple[str, ...]) -> tuple:
    """A cell's identity for ``--merge``; GIN cells written before ``gin_hidden`` existed were trained with the
    hidden quantizer."""
    hidden = cell.get("gin_hidden") or ("quantized" if cell["model"] == "gin" else None)
    return tuple(hidden if k == "gin_hidden" else cell[k] for k in key)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cora", help="comma-separated node-task datasets")
    p.add_argument("--models", default="gcn,sage", help=f"comma-separated: {', '.join(INTEGER_PATHS)}")
    p.add_argument("--methods", default="a2q,degree-aware", help="comma-separated: a2q, degree-aware")
    p.add_argument("--targets", default="4", help="comma-separated target average bits")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--penalty-weight", type=float, default=25.0,
                   help="a of the memory penalty (25: the quantization grid's value, benchmarks/quant_table.py)")
    p.add_argument("--gin-hidden", default="quantized", choices=GIN_HIDDEN,
                   help="GIN: train with the MLP's hidden activation quantized (A2Q's code) or not (the grid's recipe; "
                        "16-bit fixed point in the integer path)")
    p.add_argument("--merge", action="store_true", help="keep the cells of earlier commands in the results file")
    args = p.parse_args(argv)
    models = args.models.split(",")
    unknown = [m for m in models if m not in INTEGER_PATHS]
    if unknown:
        p.error(f"no integer path for {unknown}; valid: {', '.join(INTEGER_PATHS)}")
    torch.set_num_threads(1)
    old = load_results(NAME).get("cells", []) if args.merge else []
    cells = []
    for name in args.datasets.split(","):
        graph = load_dataset(name)
        if graph.task != "node":
            p.error(f"{name} is a graph task; the integer paths cover node tasks")
        for arch in models:
            for method in args.methods.split(","):
                for target in (float(t) for t in args.targets.split(",")):
                    hidden = args.gin_hidden if arch == "gin" else None
                    runs = [run_seed(graph, arch, method, target, s, args.penalty_weight, args.gin_hidden)
                            for s in range(args.seeds)]
                    cells.append(summarize_cell(name, arch, method, target, args.penalty_weight, runs, hidden))
                    c = cells[-1]
                    label = arch if hidden is None else f"{arch} ({hidden} hidden)"
                    print(f"{name} {label} {method} {target}: fake-quant {c['test_acc_fake_quant']['mean']:.2f}, "
                          f"integer {c['test_acc_integer']['mean']:.2f}, delta {c['delta_pt']['mean']:+.2f} "
                          f"(max |delta| {c['max_abs_delta_pt']:.2f})", flush=True)
    command = "python benchmarks/integer_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])
    for c in cells:
        c["command"] = command
    key = ("dataset", "model", "method", "target_bits", "penalty_weight", "gin_hidden")
    new_keys = {cell_key(c, key) for c in cells}
    cells = [c for c in old if cell_key(c, key) not in new_keys] + cells
    out = {"command": command, "cells": cells, "target_gap_pt": TARGET_GAP_PT, "machine": machine()}
    print(f"wrote {save_results(NAME, out)}")
    return out


def render(res: dict) -> list[str]:
    """Integer golden models against the fake-quant models they come from (``benchmarks/integer_accuracy.py``)."""
    lines = ["## Integer path against fake-quant (test accuracy, %)", "",
             f"File: `benchmarks/results/integer_accuracy.json`; commands in the last column. Per seed the trained "
             f"(validation-selected) quantized model is evaluated in float32 fake-quant and through its integer golden "
             f"model (GCN: `quant.archs.gcn.integer`, GraphSAGE: `quant.archs.sage.integer`, "
             f"GIN: `quant.archs.gin.integer`, "
             f"trained with its MLP's hidden activation quantized (`gin (quantized hidden)`, A2Q's code) or without "
             f"it as the grid's GIN cells (`gin (16-bit hidden)`: the integer path carries the hidden activation in "
             f"16-bit fixed point), GAT: `quant.archs.gat.integer`; frac_bits 14 (GAT 20), 32-bit partial sums); "
             f"delta = integer - fake-quant, mean +- std over seeds (target: within "
             f"{res.get('target_gap_pt', 0.3)} pt).", "",
             *table_head("dataset", "model", "method", "target bits", "seeds", "avg bits", "fake-quant", "integer",
                         "delta (pt)", "max abs delta (pt)", "min prediction agreement", "command")]
    for c in res.get("cells", []):
        model = c["model"]
        if model == "gin":  # cells written before gin_hidden existed were trained with the hidden quantizer
            model += " (16-bit hidden)" if c.get("gin_hidden") == "fixed" else " (quantized hidden)"
        lines.append(f"| {c['dataset']} | {model} | {c['method']} | {c['target_bits']:g} | {c['seeds']} | "
                     f"{c['avg_bits']['mean']:.2f} | {pm(c['test_acc_fake_quant'])} | {pm(c['test_acc_integer'])} | "
                     f"{c['delta_pt']['mean']:+.2f} +- {c['delta_pt']['std']:.2f} | {c['max_abs_delta_pt']:.2f} | "
                     f"{100 * c['prediction_agreement_min']:.2f} % | `{c.get('command', '')}` |")
    return lines + ["", machine_line(res), ""]


if __name__ == "__main__":
    main()
