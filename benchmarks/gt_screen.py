"""Screen graph-transformer configurations against the tuned default, on validation accuracy.

    .venv/bin/python benchmarks/gt_screen.py --dataset cora --seeds 5 \
        --variant base --variant ema0.9:ema_decay=0.9 --variant elu:branch_activation=elu

Each ``--variant NAME[:field=value,...]`` overrides fields of ``gt_accuracy.GT_CONFIG`` (a
:class:`graphtransformer.training.TrainConfig`; ``layer_kinds=sparse/dense`` for a tuple). Every variant runs the
same seeds 0..n-1 through the same single-process runner as ``gt_accuracy.py``, one thread. Variants are compared on
their mean validation accuracy (the selection criterion); test accuracy is reported beside it and never used to
choose. Results merge into ``benchmarks/results/gt_screen.json`` per (dataset, variant), so a screen can grow over
sessions. ``--device cuda`` runs the seeds on the GPU and files the variants under ``<dataset>_cuda`` (GPU numerics
differ from CPU ones, so each group has its own ``base``). Side-by-side screens write separate files
(``--out``) and are folded into the results file afterwards with ``--merge-file``:

    python benchmarks/gt_screen.py --device cuda --out /scratch/a.json --variant base --variant ...
    python benchmarks/gt_screen.py --merge-file /scratch/a.json --merge-file /scratch/b.json
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from benchmarks._common import RESULTS, device_name, load_json, machine, machine_line, pm, save_json, table_head
from benchmarks.gt_accuracy import GT_CONFIG, gt_seed, overrides_json, parse_overrides, percent_stats
from gnn.cli import UsageError


def parse_variant(text: str) -> tuple[str, dict]:
    """'name:field=value,field=value' -> (name, overrides typed like the TrainConfig field); bad fields are refused."""
    name, _, spec = text.partition(":")
    if not name:
        raise UsageError(f"--variant {text!r} has no name; use NAME or NAME:field=value,...")
    return name, parse_overrides(spec, f"--variant {text!r}")


def run_variant(dataset: str, overrides: dict, seeds: list[int], device: str = "cpu") -> dict:
    cfg = replace(GT_CONFIG, **overrides)  # TrainConfig validates the values
    t0 = time.perf_counter()
    records = [gt_seed(dataset, seed, cfg, 1, device=device) for seed in seeds]
    return {"overrides": overrides_json(overrides),
            "config": asdict(cfg), "seeds": seeds,
            "val_acc": percent_stats([r["val_acc"] for r in records]),
            "test_acc": percent_stats([r["test_acc"] for r in records]),
            "per_seed": [{"seed": r["seed"], "val_acc": r["val_acc"], "test_acc": r["test_acc"],
                          "epoch": r["epoch"]} for r in records],
            "seconds": time.perf_counter() - t0}


def merge_screens(result: dict, other: dict) -> list[str]:
    """Fold the variants of ``other`` into ``result`` (same (group, variant) replaced); returns what was added."""
    if "datasets" not in other:
        raise UsageError("--merge-file: not a gt_screen result (no 'datasets' key)")
    added = []
    for group, variants in other["datasets"].items():
        for name, entry in variants.items():
            if "val_acc" not in entry or "command" not in entry:
                raise UsageError(f"--merge-file: variant {group}/{name} has no val_acc or command")
            result.setdefault("datasets", {}).setdefault(group, {})[name] = entry
            added.append(f"{group}/{name}")
    return added


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--variant", action="append", default=[], metavar="NAME[:field=value,...]",
                   help="repeatable; 'base' with no overrides is the default configuration")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--out", type=Path, default=RESULTS / "gt_screen.json", help="result file (read, then extended)")
    p.add_argument("--merge-file", type=Path, action="append", default=[],
                   help="fold the variants of another screen's result file into --out (no training)")
    args = p.parse_args(argv)
    if bool(args.variant) == bool(args.merge_file):
        p.error("give --variant (run a screen) or --merge-file (fold result files in), not both or neither")
    result = load_json(args.out)
    result.setdefault("datasets", {})
    for path in args.merge_file:
        print(f"merged from {path}: {', '.join(merge_screens(result, load_json(path))) or 'nothing'}")
    if args.merge_file:
        save_json(args.out, result)
    variants = [parse_variant(v) for v in args.variant]
    torch.set_num_threads(1)
    seeds = list(range(args.seeds))
    group = args.dataset if args.device == "cpu" else f"{args.dataset}_cuda"
    device_flag = "" if args.device == "cpu" else f" --device {args.device}"
    for text, (name, overrides) in zip(args.variant, variants, strict=True):
        print(f"{group}: variant {name} {overrides}", flush=True)
        entry = run_variant(args.dataset, overrides, seeds, args.device)
        entry["command"] = (f"python benchmarks/gt_screen.py --dataset {args.dataset} --seeds {args.seeds}"
                            f"{device_flag} --variant {text}")
        entry["device"] = device_name(args.device)
        print(f"  val {entry['val_acc']['mean']:.2f}  test {entry['test_acc']['mean']:.2f} "
              f"+- {entry['test_acc']['std']:.2f}", flush=True)
        result["datasets"].setdefault(group, {})[name] = entry
        result["machine"] = machine()
        save_json(args.out, result)
    return result


def render(res: dict) -> list[str]:
    lines = ["## Graph transformer configuration screen (validation accuracy, %)", "",
             "File: `benchmarks/results/gt_screen.json`; each row names its command (`benchmarks/gt_screen.py`). "
             "Variants of the default configuration (`gt_accuracy.GT_CONFIG`, row `base`) on the same seeds, one "
             "thread each, sorted by mean validation accuracy, the selection criterion; test accuracy is shown, "
             "never used to choose.", "",
             *table_head("dataset", "variant", "overrides", "val acc", "val - base (pt)", "test acc",
                         "selected epochs", "command")]
    for name, variants in res.get("datasets", {}).items():
        base = variants.get("base", {}).get("val_acc", {}).get("mean")
        for key, v in sorted(variants.items(), key=lambda kv: -kv[1]["val_acc"]["mean"]):
            over = ", ".join(f"{k}={val}" for k, val in v["overrides"].items()) or "-"
            delta = f"{v['val_acc']['mean'] - base:+.2f}" if base is not None else "-"
            epochs = " ".join(str(r["epoch"]) for r in v["per_seed"])
            lines.append(f"| {name} | {key} | {over} | {pm(v['val_acc'])} | {delta} | {pm(v['test_acc'])} | "
                         f"{epochs} | `{v['command']}` |")
    return lines + ["", machine_line(res), ""]


if __name__ == "__main__":
    main()
