"""Screen graph-transformer configurations against the tuned default, on validation accuracy.

    .venv/bin/python benchmarks/gt_screen.py --dataset cora --seeds 5 \
        --variant base --variant ema0.9:ema_decay=0.9 --variant elu:branch_activation=elu

Each ``--variant NAME[:field=value,...]`` overrides fields of ``gt_accuracy.GT_CONFIG`` (a
:class:`graphtransformer.training.TrainConfig`; ``layer_kinds=sparse/dense`` for a tuple). Every variant runs the
same seeds 0..n-1 through the same single-process runner as ``gt_accuracy.py``, one thread. Variants are compared on
their mean validation accuracy (the selection criterion); test accuracy is reported beside it and never used to
choose. Results merge into ``benchmarks/results/gt_screen.json`` per (dataset, variant), so a screen can grow over
sessions.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import load_results, machine, save_results  # noqa: E402
from gt_accuracy import GT_CONFIG, _gt_seed, _stats  # noqa: E402

from graphtransformer.training import TrainConfig  # noqa: E402

_FIELD_TYPES = {f.name: type(getattr(GT_CONFIG, f.name)) for f in fields(TrainConfig)}


def parse_variant(text: str) -> tuple[str, dict]:
    """'name:field=value,field=value' -> (name, overrides typed like the TrainConfig field); bad fields are refused."""
    name, _, spec = text.partition(":")
    if not name:
        raise SystemExit(f"error: --variant {text!r} has no name; use NAME or NAME:field=value,...")
    overrides = {}
    for item in filter(None, spec.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in _FIELD_TYPES:
            raise SystemExit(f"error: --variant {text!r}: {item!r} is not field=value of a TrainConfig field; "
                             f"fields: {', '.join(sorted(_FIELD_TYPES))}")
        kind = _FIELD_TYPES[key]
        if kind is tuple:
            overrides[key] = tuple(value.split("/"))
        elif kind is bool:
            if value not in ("true", "false"):
                raise SystemExit(f"error: --variant {text!r}: {key} takes true or false")
            overrides[key] = value == "true"
        else:
            overrides[key] = kind(value)
    return name, overrides


def run_variant(dataset: str, overrides: dict, seeds: list[int]) -> dict:
    cfg = replace(GT_CONFIG, **overrides)  # TrainConfig validates the values
    t0 = time.perf_counter()
    records = [_gt_seed(dataset, seed, cfg, 1) for seed in seeds]
    return {"overrides": {k: list(v) if isinstance(v, tuple) else v for k, v in overrides.items()},
            "config": asdict(cfg), "seeds": seeds,
            "val_acc": _stats([r["val_acc"] for r in records]), "test_acc": _stats([r["test_acc"] for r in records]),
            "per_seed": [{"seed": r["seed"], "val_acc": r["val_acc"], "test_acc": r["test_acc"],
                          "epoch": r["epoch"]} for r in records],
            "seconds": time.perf_counter() - t0}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--variant", action="append", required=True, metavar="NAME[:field=value,...]",
                   help="repeatable; 'base' with no overrides is the default configuration")
    args = p.parse_args(argv)
    variants = [parse_variant(v) for v in args.variant]
    torch.set_num_threads(1)
    seeds = list(range(args.seeds))
    result = load_results("gt_screen")
    result.setdefault("datasets", {})
    for text, (name, overrides) in zip(args.variant, variants, strict=True):
        print(f"{args.dataset}: variant {name} {overrides}", flush=True)
        entry = run_variant(args.dataset, overrides, seeds)
        entry["command"] = (f"python benchmarks/gt_screen.py --dataset {args.dataset} --seeds {args.seeds} "
                            f"--variant {text}")
        print(f"  val {entry['val_acc']['mean']:.2f}  test {entry['test_acc']['mean']:.2f} "
              f"+- {entry['test_acc']['std']:.2f}", flush=True)
        result["datasets"].setdefault(args.dataset, {})[name] = entry
        result["machine"] = machine()
        save_results("gt_screen", result)
    return result


if __name__ == "__main__":
    main()
