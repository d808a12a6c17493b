"""Graph transformer accuracy with a compressed halo K/V exchange against the exact (fp32) exchange.

    .venv/bin/python benchmarks/gt_halo_codec.py [--dataset cora] [--ranks 2] [--seeds 5] [--codecs fp32,int1]

For each codec: one ``torchrun --nproc-per-node <ranks> -m graphtransformer.train --cp <ranks>`` run over seeds
0..n-1 with the tuned defaults (sparse, sparse, dense layers). Sparse layers exchange only the K/V rows of nodes with
edges across ranks, through the codec (forward rows and backward gradients; ``int1`` = Sylvie's one-bit rows with
stochastic rounding); the dense layer stays exact (ring attention). Validation-selected test accuracy per seed; the
gap to fp32 is paired per seed (mean and standard error). Results: benchmarks/results/gt_halo_codec.json (per
dataset, merged).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._common import load_results, machine, save_results, table_head
from benchmarks.dist_accuracy import paired_gap
from distributed.codecs import CODECS
from gnn.cli import UsageError

ROOT = Path(__file__).resolve().parents[1]


def run_codec(dataset: str, ranks: int, seeds: int, codec: str, epochs: int | None) -> dict:
    """One torchrun job; returns per-seed accuracies (%) and the job's wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        train_args = ["--dataset", dataset, "--cp", str(ranks), "--seeds", str(seeds), "--halo-codec", codec,
                      *(["--epochs", str(epochs)] if epochs else [])]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
               "-m", "graphtransformer.train", *train_args, "--out", str(out)]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"},
                       stdout=subprocess.DEVNULL)
        wall_s = time.perf_counter() - start
        result = json.loads(out.read_text())
    records = result["seeds"]
    return {"seed": [r["seed"] for r in records], "test_acc": [100.0 * r["test_acc"] for r in records],
            "val_acc": [100.0 * r["val_acc"] for r in records], "epoch": [r["epoch"] for r in records],
            "wall_s": wall_s, "schedule": result["schedule"],
            "command": f"torchrun --nproc-per-node {ranks} -m graphtransformer.train " + " ".join(train_args)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--ranks", type=int, default=2, help="gloo CPU ranks (--cp)")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--codecs", default="fp32,int1", help=f"comma list of: {', '.join(CODECS)} (fp32 = reference)")
    p.add_argument("--epochs", type=int, default=None, help="override the training epochs (default: the tuned 150)")
    args = p.parse_args()
    codecs = args.codecs.split(",")
    unknown = sorted(set(codecs) - set(CODECS))
    if unknown:
        raise UsageError(f"unknown codecs {unknown}; valid: {', '.join(CODECS)}")
    if "fp32" not in codecs:
        codecs = ["fp32", *codecs]  # the reference of the paired gap
    entry = {"ranks": args.ranks, "codecs": {}}
    for codec in codecs:
        print(f"{args.dataset}: halo codec {codec} ({args.ranks} ranks, {args.seeds} seeds)", flush=True)
        entry["codecs"][codec] = run_codec(args.dataset, args.ranks, args.seeds, codec, args.epochs)
    ref = entry["codecs"]["fp32"]
    for codec, res in entry["codecs"].items():
        res["mean"], res["std"] = statistics.fmean(res["test_acc"]), statistics.stdev(res["test_acc"])
        gap, se, n = paired_gap(res, ref)
        res["paired_gap_pts"], res["paired_gap_se"], res["paired_seeds"] = gap, se, n
        print(f"  {codec:<8} {res['mean']:.2f} +- {res['std']:.2f}  gap to fp32 {gap:+.2f} (se {se:.2f})",
              flush=True)
    results = load_results("gt_halo_codec")
    results.setdefault("datasets", {})[args.dataset] = entry
    results["machine"] = machine()
    results["command"] = "python benchmarks/gt_halo_codec.py " + " ".join(sys.argv[1:])
    save_results("gt_halo_codec", results)


def render(res: dict) -> list[str]:
    lines = ["## Graph transformer: compressed halo K/V exchange (validation-selected test accuracy, %)", "",
             f"File: `benchmarks/results/gt_halo_codec.json`; command: `{res.get('command', '')}`. Sparse layers "
             "exchange only the K/V rows of nodes with edges across ranks, through the codec (rows forward, "
             "gradients back); the dense layer stays exact. Gap = paired per seed against fp32 exchange "
             "(standard error in brackets).", "",
             *table_head("dataset", "ranks", "codec", "seeds", "test acc", "gap to fp32 (pt)", "wall s", "command")]
    for name, d in res.get("datasets", {}).items():
        for codec, c in d["codecs"].items():
            gap = "-" if codec == "fp32" else f"{c['paired_gap_pts']:+.2f} ({c['paired_gap_se']:.2f})"
            lines.append(f"| {name} | {d['ranks']} | {codec} | {len(c['seed'])} | {c['mean']:.2f} +- {c['std']:.2f} "
                         f"| {gap} | {c['wall_s']:.0f} | `{c['command']}` |")
    return lines + [""]


if __name__ == "__main__":
    main()
