"""FP32 vs Degree-Quant INT8 / INT4 vs A2Q vs degree-aware (MEGA-style), through `gnn.trainer`.

    python benchmarks/quant_table.py --datasets cora --models gcn --seeds 3 --targets 4,1.7 --epochs 200
    python benchmarks/quant_table.py --datasets mutag --models gin --seeds 10   # graph task: 10 folds

Node tasks run seeds 0..n-1 on the dataset's split; graph tasks (MUTAG, PROTEINS) run folds 0..n-1 of the
10-fold cross-validation with seed = fold, as ``gnn.experiment`` does (A2Q then uses its Nearest Neighbor Strategy).

Per (dataset, model, method, target): validation-selected test accuracy mean +- std over seeds (and the
A2Q-code-style max test accuracy over epochs, never the headline), learned average feature bits without / with
the sign bit (the A2Q headline convention is *without*), gap to the target, and training time per epoch relative to
the FP32 cell of the same command (meaningful only when the cells ran one after another in one process; the
interleaved measurement is ``benchmarks/quant_speed.py``).
Writes benchmarks/results/quant_table.json (after every cell), quant_acc_vs_bits.png, quant_bits_vs_degree.png and,
once the A2Q headline has a selected recipe run at two or more targets, quant_pareto_cora_gcn.png.
``--merge`` keeps the cells of earlier commands (a cell with the same dataset, model, method, target, penalty
weight, epochs, dropout, weight decay, feature preprocessing, hidden width, FP32 warm-up and device is
replaced) and lists every command in the file.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmarks._common import (
    QUANT_GRID_COLUMNS,
    QUANT_GRID_GRAPH,
    QUANT_GRID_NODE,
    command_list,
    device_name,
    pm,
    preset_grid,
    quant_training_key,
    table_head,
)
from benchmarks.quant_headline import (
    HEADLINE_GAP_PT,
    HEADLINE_TARGET_BITS,
    a2q_pareto,
    render_headline,
    render_pareto,
    training_text,
)
from benchmarks.quant_headline import LEARNED_METHODS as LEARNED
from gnn.data.loaders import load_dataset
from gnn.data.registry import FEATURE_PREPROCESSING
from gnn.experiment import run_jobs
from gnn.models import build_model
from gnn.presets import model_and_train_config, with_overrides
from gnn.trainer import DEFAULT_FIXED_BITS, TrainConfig, seed_everything, summarize, train_one

RESULTS = Path(__file__).parent / "results"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cora", help="comma-separated datasets (node or graph tasks)")
    p.add_argument("--models", default="gcn", help="comma-separated: gcn, gat, gin, sage")
    p.add_argument("--methods", default="none,dq-int8,dq-int4,a2q,degree-aware", help="none = FP32")
    p.add_argument("--targets", default="4,1.7", help="target average bits of a2q")
    p.add_argument("--degree-targets", default="4,1.7", help="target average bits of degree-aware")
    p.add_argument("--seeds", type=int, default=3, help="seeds (node tasks) or folds (graph tasks)")
    p.add_argument("--penalty-weight", type=float, default=2.5, help="a of the memory penalty (learned-bit methods)")
    p.add_argument("--epochs", type=int, help="override the preset's epochs")
    p.add_argument("--dropout", type=float, help="override the preset's dropout (e.g. A2Q's GCN-Cora 0.35)")
    p.add_argument("--hidden", type=int, help="override the preset's hidden width (cells record it)")
    p.add_argument("--weight-decay", type=float, help="override the preset's weight decay (A2Q's GCN-Cora 0.02)")
    p.add_argument("--fp32-warmup", type=int, default=0,
                   help="quantized cells first train FP32 this many epochs, then quantize and train --epochs more "
                        "(cells record it; FP32 cells ignore it)")
    p.add_argument("--weight-bits", type=int, help="signed bits of the weights of a2q / degree-aware cells (default "
                   "4, A2Q's; cells record it when set)")
    p.add_argument("--xw-bits", type=int, help="signed bits of XW of a2q / degree-aware cells (default 4, A2Q's; "
                   "cells record it when set)")
    p.add_argument("--features", choices=FEATURE_PREPROCESSING,
                   help="input feature preprocessing in place of the registry's (Cora: row-normalized)")
    p.add_argument("--out", type=Path, default=RESULTS / "quant_table.json")
    p.add_argument("--merge", action="store_true", help="add to the cells already in --out instead of replacing")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where each run trains (ms/epoch and time ratios are then GPU figures; the cell names it)")
    return p.parse_args(argv)


def run_cell(graph, arch: str, method: str, target: float, seeds: list[int], epochs: int | None,
             penalty_weight: float = 2.5, dropout: float | None = None, weight_decay: float | None = None,
             device: str = "cpu", hidden: int | None = None, fp32_warmup: int = 0,
             fixed_bits: dict[str, int] | None = None) -> dict:
    model_cfg, train_cfg = model_and_train_config(graph, arch)
    model_cfg = with_overrides(model_cfg, dropout=dropout, hidden_dim=hidden)
    train_cfg = with_overrides(train_cfg, epochs=epochs, weight_decay=weight_decay)
    fixed_bits = (fixed_bits or {}) if method in LEARNED else {}  # weight / XW bits of the learned-bit methods
    # A2Q's penalty: the grid compares the methods as published (the preset's projection: quant_defaults.py)
    train_cfg = replace(train_cfg, quant=method, target_bits=target, penalty_weight=penalty_weight, device=device,
                        bits_control="penalty",
                        fp32_warmup_epochs=0 if method == "none" else fp32_warmup, **fixed_bits)
    runs = []
    for seed, fold in run_jobs(graph, seeds, num_folds=len(seeds)):
        seed_everything(seed)
        model = build_model(model_cfg)
        runs.append(train_one(model, graph, graph.splits[fold], train_cfg, seed=seed, fold=fold, progress=False))
    s = summarize(runs)
    cell = {"dataset": graph.name, "model": arch, "method": "fp32" if method == "none" else method,
            "runs": f"{len(runs)} {'folds' if graph.task == 'graph' else 'seeds'}",
            "target_bits": target if method in LEARNED else None, "epochs": train_cfg.epochs,
            "dropout": model_cfg.dropout, "weight_decay": train_cfg.weight_decay,
            "test_acc": s["test_acc"], "val_acc": s["val_acc"],
            "max_test_acc_over_epochs": s["max_test_acc_over_epochs"], "ms_per_epoch": s["ms_per_epoch"],
            "threads": torch.get_num_threads(),  # same seed, same result only at the same thread count
            "per_run": [{"seed": r.seed, "fold": r.fold, "test_acc": r.test_acc, "val_acc": r.val_acc}
                        for r in runs]}
    if method != "none":
        qs = [r.quant_summary for r in runs]
        for key in ("avg_bits", "avg_bits_with_sign"):
            v = np.array([q[key] for q in qs], dtype=np.float64)
            cell[key] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}
        if method in LEARNED:
            cell["gap_to_target_bits"] = cell["avg_bits"]["mean"] - target
            cell["penalty_weight"] = train_cfg.penalty_weight
            cell["runs_within_bit_budget"] = sum(bool(q.get("within_budget")) for q in qs)
        cell["bits_histogram_seed0"] = qs[0]["bits_histogram"]
        cell["mean_bits_by_in_degree_seed0"] = qs[0]["mean_bits_by_in_degree"]
        cell["compression"] = 32.0 / cell["avg_bits"]["mean"] if cell["avg_bits"]["mean"] else None
        if fp32_warmup:
            cell["fp32_warmup_epochs"] = fp32_warmup  # only when used: earlier cells keep their keys
        cell.update(fixed_bits)  # likewise, only when set
    return cell


DATASET_ORDER = QUANT_GRID_NODE[0] + QUANT_GRID_GRAPH[0]  # the table


def accuracy_panels(cells: list[dict]) -> tuple[dict[str, list[dict]], bool]:
    """Cells of the accuracy-against-bits plot per dataset, in the issue's table order, and whether they are the
    preset grid's (the tuning sweeps are left to the Pareto plot); all cells when none has the preset training."""
    grid = list(preset_grid(cells).values())
    chosen = grid or cells
    order = sorted({c["dataset"] for c in chosen},
                   key=lambda d: (DATASET_ORDER.index(d) if d in DATASET_ORDER else len(DATASET_ORDER), d))
    return {d: [c for c in chosen if c["dataset"] == d] for d in order}, bool(grid)


def plot(cells: list[dict], out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    # Accuracy against bits: one panel per dataset (the preset grid; the Cora GCN tuning sweeps have their own
    # Pareto plot), one colour per model, one marker per method, each model's FP32 accuracy as a dashed line.
    panels, from_grid = accuracy_panels(cells)
    datasets = list(panels)
    models = sorted({c["model"] for c in cells})
    methods = sorted({c["method"] for c in cells})
    model_colours = {m: plt.cm.tab10(i % 10) for i, m in enumerate(models)}
    markers = dict(zip(methods, "o^sDvP*X", strict=False))
    ncols = min(3, len(datasets))
    nrows = -(-len(datasets) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols, 3.4 * nrows + 0.8), squeeze=False)
    for ax, ds in zip(axes.flat, datasets, strict=False):
        for c in panels[ds]:
            colour = model_colours[c["model"]]
            if c["method"] == "fp32":
                ax.axhline(c["test_acc"]["mean"], color=colour, linestyle="--", linewidth=0.8, alpha=0.7)
            bits = 32.0 if c["method"] == "fp32" else c["avg_bits"]["mean"]
            ax.errorbar(bits, c["test_acc"]["mean"], yerr=c["test_acc"]["std"], fmt=markers.get(c["method"], "o"),
                        color=colour, capsize=2, markersize=5, alpha=0.85)
        ax.set_xscale("log", base=2)
        ax.set_xlim(0.2, 48)
        ax.set_title(ds, fontsize=10)
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(datasets):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("average feature bits (no sign bit; FP32 = 32)")
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy (%), val-selected")
    handles = [plt.Line2D([], [], color=model_colours[m], marker="o", linestyle="", label=m) for m in models]
    handles += [plt.Line2D([], [], color="grey", marker=markers.get(m, "o"), linestyle="", label=m) for m in methods]
    handles.append(plt.Line2D([], [], color="grey", linestyle="--", label="FP32 of the model"))
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=len(handles))
    fig.suptitle("Quantization grid: test accuracy against learned average feature bits "
                 f"({'preset training per model' if from_grid else 'all cells: none has the preset training'})",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    files.append("quant_acc_vs_bits.png")  # names inside the results folder
    fig.savefig(out_dir / files[-1], dpi=120)
    rows = sorted({(c["dataset"], c["model"]) for c in cells})
    colours = {r: plt.cm.tab20(i % 20) for i, r in enumerate(rows)}
    # Learned bits vs in-degree: the preset grid only (the tuning sweeps would bury it), one panel per learned
    # method and target, the (dataset, model) colours of the plot above, one shared legend.
    panels = [(m, t) for m in sorted(LEARNED) for t in (4.0, 1.7)]
    grid = {k: c for k, c in preset_grid(cells).items()
            if c["method"] in LEARNED and c.get("mean_bits_by_in_degree_seed0")}
    fig, axes = plt.subplots(2, 2, figsize=(12, 7), sharex=True, sharey=True)
    for ax, (method, target) in zip(axes.flat, panels, strict=True):
        for (ds, model, m, t), c in sorted(grid.items()):
            if (m, t) == (method, target):
                by_deg = c["mean_bits_by_in_degree_seed0"]
                d = sorted(int(k) for k in by_deg)
                ax.plot(d, [by_deg[str(k)] for k in d], marker=".", markersize=3, linewidth=1,
                        color=colours[(ds, model)])
        ax.set_title(f"{method}, target {target:g} bits", fontsize=9)
        ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("in-degree (clipped at 64)")
    for ax in axes[:, 0]:
        ax.set_ylabel("mean learned bits (no sign), seed 0")
    used = sorted({(ds, model) for ds, model, _, _ in grid})
    fig.legend(handles=[plt.Line2D([], [], color=colours[r], label=f"{r[0]}/{r[1]}") for r in used], fontsize=7,
               loc="center left", bbox_to_anchor=(0.86, 0.5))
    fig.tight_layout(rect=(0, 0, 0.85, 1))
    files.append("quant_bits_vs_degree.png")
    fig.savefig(out_dir / files[-1], dpi=120)
    fp32, rows = a2q_pareto(cells)
    if len(rows) >= 2:
        files.append(plot_pareto(fp32, rows, out_dir))
    return files


def plot_pareto(fp32: dict, rows: list[dict], out_dir: Path) -> str:
    """Test accuracy (mean +- std) against learned average bits of the A2Q headline recipe at every target, with the
    FP32 accuracy of that training, the 1-pt band under it and the 1.7-bit headline budget."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method, marker in zip(sorted({r["cell"]["method"] for r in rows}), "os", strict=False):
        pts = [r["cell"] for r in rows if r["cell"]["method"] == method]
        ax.errorbar([c["avg_bits"]["mean"] for c in pts], [c["test_acc"]["mean"] for c in pts],
                    yerr=[c["test_acc"]["std"] for c in pts], marker=marker, capsize=3, label=method)
    ref = fp32["test_acc"]["mean"]
    ax.axhline(ref, color="black", linewidth=1, label=f"FP32 {ref:.2f}")
    ax.axhspan(ref + HEADLINE_GAP_PT, ref, color="green", alpha=0.12, label=f"within {-HEADLINE_GAP_PT:g} pt of FP32")
    ax.axvline(HEADLINE_TARGET_BITS, color="grey", linestyle=":", label=f"{HEADLINE_TARGET_BITS} bits (headline)")
    ax.set_xlabel("learned average feature bits (without sign bit)")
    ax.set_ylabel("test accuracy (%), val-selected")
    c = rows[0]["cell"]
    w_bits, xw_bits = c.get("weight_bits", DEFAULT_FIXED_BITS), c.get("xw_bits", DEFAULT_FIXED_BITS)
    ax.set_title(f"Cora GCN, {c['test_acc']['n']} seeds, hidden {c.get('hidden_dim', 'preset')}, "
                 f"{c.get('epochs')} epochs, a = {c.get('penalty_weight')}, weights {w_bits}-bit, XW {xw_bits}-bit",
                 fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_dir / "quant_pareto_cora_gcn.png", dpi=120)
    return "quant_pareto_cora_gcn.png"


def main(argv=None) -> dict:
    args = parse_args(argv)
    seeds = list(range(args.seeds))
    targets = [float(t) for t in args.targets.split(",")]
    degree_targets = [float(t) for t in args.degree_targets.split(",")]
    cells = []
    t0 = time.time()
    command = "python benchmarks/quant_table.py " + " ".join(argv if argv is not None else sys.argv[1:])
    previous = json.loads(args.out.read_text()) if args.merge and args.out.exists() else None
    fixed_bits = {k: v for k, v in (("weight_bits", args.weight_bits), ("xw_bits", args.xw_bits)) if v is not None}
    for method in args.methods.split(",") if fixed_bits else []:  # before any cell runs; FP32 cells take none
        try:
            TrainConfig(quant=method, **(fixed_bits if method != "none" else {}))
        except ValueError as e:
            sys.exit(f"error: {e}")
    for name in args.datasets.split(","):
        graph = load_dataset(name, features=args.features)
        for arch in args.models.split(","):
            fp32_ms = {}
            for method in args.methods.split(","):
                cell_targets = {"a2q": targets, "degree-aware": degree_targets}.get(method, [4.0])
                for target in cell_targets:
                    cell = run_cell(graph, arch, method, target, seeds, args.epochs, args.penalty_weight,
                                    args.dropout, args.weight_decay, args.device, args.hidden,
                                    args.fp32_warmup, fixed_bits)
                    if args.device != "cpu":
                        cell["device"] = device_name(args.device)
                    if method == "none":
                        fp32_ms[method] = cell["ms_per_epoch"]
                    ref = fp32_ms.get("none")
                    cell["time_per_epoch_vs_fp32"] = cell["ms_per_epoch"] / ref if ref else None
                    cell["command"] = command
                    if args.features:
                        cell["features"] = args.features
                    if args.hidden:
                        cell["hidden_dim"] = args.hidden  # only when overridden: preset cells keep their keys
                    cells.append(cell)
                    _write(args.out, command, seeds, t0, cells, previous)  # partial results survive an interrupt
                    bits = cell.get("avg_bits", {}).get("mean", 32.0)
                    ratio = cell["time_per_epoch_vs_fp32"]  # None without an FP32 cell in this run
                    print(f"{name:<10}{arch:<6}{cell['method']:<14}{str(cell['target_bits']):<6}"
                          f"acc {cell['test_acc']['mean']:6.2f} +- {cell['test_acc']['std']:5.2f}  "
                          f"bits {bits:6.3f}  time vs fp32 " + (f"x{ratio:5.2f}" if ratio else "-"), flush=True)
    return _write(args.out, command, seeds, t0, cells, previous, plots=True)


def _cell_key(c: dict) -> tuple:
    return (c["dataset"], c["model"], c["method"], c.get("target_bits"), c.get("penalty_weight"),
            *quant_training_key(c))


def _write(path: Path, command: str, seeds, t0: float, cells: list[dict], previous: dict | None = None,
           plots: bool = False) -> dict:
    """Write the cells (after those of ``previous`` that no new cell replaces) and, at the end, the plots."""
    path.parent.mkdir(parents=True, exist_ok=True)
    commands = [command]
    if previous:
        new_keys = {_cell_key(c) for c in cells}
        cells = [c for c in previous.get("cells", []) if _cell_key(c) not in new_keys] + cells
        commands = [c for c in previous.get("commands", [previous.get("command")]) if c and c != command] + commands
    out = {"commands": commands, "seeds": seeds, "wall_seconds": time.time() - t0, "torch": torch.__version__,
           "machine": platform.platform(), "threads": torch.get_num_threads(), "complete": plots,
           "cells": cells}
    if plots:
        out["plots"] = plot(cells, path.parent)
    path.write_text(json.dumps(out, indent=2))
    return out


def _live_commands(res: dict) -> list[str]:
    """The file's commands that still own a cell, in their recorded order (cells without a command keep all)."""
    commands = res.get("commands", [res.get("command", "")])
    owners = {c.get("command") for c in res.get("cells", [])}
    return commands if None in owners else [c for c in commands if c in owners]


# quant_table.json is written by this script and by quant_merge.py (which folds in cells run elsewhere, e.g. on a lent
# GPU); its section renders here, the A2Q headline tables in quant_headline.
def render(res: dict) -> list[str]:
    listed, listing = command_list(_live_commands(res))
    lines = ["## Quantization (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/quant_table.json`; commands (those whose cells are still in the file; a "
             "cell rerun under another command replaces the old one): " + listed + ".", *listing,
             "", res.get("note", ""), "", *render_grid(res.get("cells", [])),
             *render_headline(res.get("cells", [])), *render_pareto(res.get("cells", [])),
             "Every cell, including the tuning runs of the A2Q headline (Cora GCN at 1.7 bits):", "",
             *table_head("dataset", "model", "method", "training", "target bits", "penalty a", "test acc", "val acc",
                         "max test over epochs (A2Q-code style, not the headline)", "avg bits (no sign)",
                         "avg bits (with sign)", "32/bits", "runs within budget")]
    for c in res.get("cells", []):
        bits = c.get("avg_bits")
        training = training_text(c)
        val = pm(c["val_acc"]) if "val_acc" in c else "-"
        lines.append(
            f"| {c['dataset']} | {c['model']} | {c['method']} | {training} | {c.get('target_bits') or '-'} | "
            f"{c.get('penalty_weight', '-')} | {pm(c['test_acc'])} | {val} | {pm(c['max_test_acc_over_epochs'])} | "
            f"{bits['mean']:.3f} | {c['avg_bits_with_sign']['mean']:.3f} | {c['compression']:.1f} | "
            f"{c.get('runs_within_bit_budget', '-')} |" if bits else
            f"| {c['dataset']} | {c['model']} | {c['method']} | {training} | - | - | {pm(c['test_acc'])} | {val} | "
            f"{pm(c['max_test_acc_over_epochs'])} | 32 | 32 | 1.0 | - |")
    lines += ["", "All-in compression (every feature tensor, weights, metadata and adjacency) of each learned-bit "
              "cell: the table \"All-in compression of the quantization grid\" (seed 0's export).", "",
              "Training time against FP32: see the quantization speed tables, `quant_speed.json` (Cora and "
              "Coauthor CS GCN, 20 repeats) and `quant_speed_grid.json` (every dataset and model of the grid, a few "
              "steps each); the cells above ran beside other jobs.", "", *render_gpu_time(res.get("cells", [])),
              "GAT at low targets: GAT's per-node learned tensors (the linear transform's output, and the post-ELU "
              "input of layer 2) are signed, so a node at the 1-bit floor has qmax = 2^0 - 1 = 0 and is stored as "
              "all zeros, and its straight-through gradient is masked off. GCN, GIN and SAGE learn bits on post-ReLU "
              "tensors, where 1 reported bit still keeps {0, s}. At the 1.7-bit target the GAT runs fall to the "
              "floor and predict one class; a weaker penalty (a = 3) and a 2.5-bit target are in the cell list above.",
              "",
              "GAT's signed rows count their sign bit: A2Q's `analysis_bit` would report each of them one bit lower "
              "(`quant/qat/config.py`).", "",
              "Plots (`benchmarks/results/`):", ""]
    captions = {"quant_acc_vs_bits.png": "test accuracy against average bits, one panel per dataset",
                "quant_bits_vs_degree.png": "learned bits against in-degree (seed 0)",
                "quant_pareto_cora_gcn.png": "the A2Q headline recipe at every target"}
    for name in (Path(f).name for f in res.get("plots", [])):
        lines += [f"![{captions.get(name, name)}](benchmarks/results/{name})", ""]
    return lines


def render_grid(cells: list[dict]) -> list[str]:
    """The issue's table as a matrix: one row per (dataset, model), one column per method; empty = not run yet."""
    grid = preset_grid(cells)
    head = ["FP32", "DQ-INT8", "DQ-INT4", "A2Q t4", "A2Q t1.7", "degree-aware t4", "degree-aware t1.7"]
    lines = ["Preset grid (each model's preset training, penalty a = 25; cell = test acc mean +- std @ average "
             "feature bits without sign; `not run` = still missing):", "",
             *table_head("dataset", "model", "runs", *head)]
    for datasets, models in (QUANT_GRID_NODE, QUANT_GRID_GRAPH):
        for ds in datasets:
            for model in models:
                row = [grid.get((ds, model, m, t)) for m, t in QUANT_GRID_COLUMNS]
                runs = next((c["runs"] for c in row if c and "runs" in c), "10 folds" if ds in QUANT_GRID_GRAPH[0]
                            else "10 seeds")
                devices = sorted({c.get("device", "cpu") for c in row if c})
                if devices and devices != ["cpu"]:
                    runs += ", " + " / ".join(devices)  # a row (or part of it) trained on a lent GPU
                text = ["not run" if c is None else pm(c["test_acc"]) + (
                    f" @ {c['avg_bits']['mean']:.2f}" if c.get("avg_bits") else "") for c in row]
                lines.append(f"| {ds} | {model} | {runs} | " + " | ".join(text) + " |")
    return lines + [""]


def render_gpu_time(cells: list[dict]) -> list[str]:
    """Time per epoch against the FP32 cell of the same GPU command (cells that trained one after another)."""
    gpu = [c for c in cells if c.get("device") and c.get("time_per_epoch_vs_fp32")]
    if not gpu:
        return []
    shared = sorted({c["shared_device_with"] for c in gpu if c.get("shared_device_with")})
    lines = ["On the GPU (cells of one command ran one after another, so their times compare): ms per epoch and "
             "time against the FP32 cell of the same command." + "".join(f" Shared with {s}." for s in shared), "",
             *table_head("dataset", "model", "device", "method", "target bits", "ms / epoch", "x FP32")]
    for c in gpu:
        lines.append(f"| {c['dataset']} | {c['model']} | {c['device']} | {c['method']} | {c.get('target_bits') or '-'} "
                     f"| {c['ms_per_epoch']:.1f} | {c['time_per_epoch_vs_fp32']:.2f} |")
    return lines + ["", "A full-batch FP32 GCN epoch takes a few ms on the GPU, so the quantizers' per-call work "
                    "(Degree-Quant: two order statistics of every quantized tensor per training step) weighs far more "
                    "than on the CPU.", ""]


if __name__ == "__main__":
    main()
