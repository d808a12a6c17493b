"""Bounded staleness on a real slow link: fixed synchronisation period against Sylvie's adaptor, in accuracy and time.

    python -m benchmarks.dist_staleness [--dataset coauthor-cs] [--gbit 0.1] [--ranks 2] [--seeds 1] [--epochs 0]

Trains the distributed GCN (the single-process preset of `gnn.presets`) on ``--ranks`` gloo ranks whose traffic
crosses a tc-shaped network of ``--gbit`` per rank (`distributed.shaped_network.ShapedNetwork`), once per variant:
fp32 and int1 synchronous, int1 pipelined with a synchronous epoch every 10, and int1 pipelined with the Bounded
Staleness Adaptor (`distributed.staleness`, budget 1.0, bound 20: the `int1+pipeline(BSA)` variant of
benchmarks/dist_accuracy.py, which measures the accuracy over 5 seeds and 4 partitions). Per run: the
validation-selected test accuracy, synchronous epochs, and the mean training-step time over epochs 1.. (a
synchronous epoch costs more than a stale one, so the mean, not the median, is what a run pays; evaluation is not
in it), and the whole run's wall time with evaluation every 2 epochs (a pipelined transfer keeps flowing during
evaluation, which the step time alone would credit to pipelining). Writes benchmarks/results/dist_staleness.json,
keeping the runs of other (dataset, ranks, bandwidth) already there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from benchmarks._common import load_results, machine, mean_std, save_results, table_head, table_row
from gnn.cli import UsageError

VARIANTS = ("fp32", "int1", "int1+pipeline(K=10)", "int1+pipeline(BSA)")


def run(args: argparse.Namespace) -> dict:
    from benchmarks.dist_accuracy import VARIANTS as EXCHANGES
    from distributed.launch import spawn
    from distributed.runner import DistTrainConfig, train_many
    from distributed.shaped_network import ShapedNetwork, shaped_network_available
    from gnn.data.loaders import load_dataset
    from gnn.presets import model_and_train_config

    ok, why = shaped_network_available()
    if not ok:
        raise UsageError(f"the shaped network is not available here: {why}")
    mcfg, tcfg = model_and_train_config(load_dataset(args.dataset), "gcn")
    epochs = args.epochs or tcfg.epochs
    cfgs = [(name, DistTrainConfig(dataset=args.dataset, arch="gcn", num_parts=args.ranks, seed=seed,
                                   hidden_dim=mcfg.hidden_dim, dropout=mcfg.dropout, lr=tcfg.lr,
                                   weight_decay=tcfg.weight_decay, epochs=epochs, eval_every=2, log_every=0,
                                   exchange=EXCHANGES[name]))
            for seed in range(args.seeds) for name in VARIANTS]
    load_start, t = os.getloadavg()[0], time.perf_counter()
    with ShapedNetwork(args.ranks, args.gbit) as net:
        link = net.describe()
        results = spawn(train_many, args.ranks, [c for _, c in cfgs], False, rank_setup=net.rank_setup,
                        master_addr=net.address(0))[0]
    rows: dict[str, dict] = {}
    for (name, cfg), r in zip(cfgs, results, strict=True):
        steps = [h["epoch_s"] for h in r["history"][1:]]  # epoch 0 also moves the layer-0 input rows
        row = rows.setdefault(name, {"seed": [], "test_acc": [], "synchronous_epochs": [], "epoch_s_mean": [],
                                     "loop_s": []})
        row["loop_s"].append(r["loop_s"])
        row["seed"].append(cfg.seed)
        row["test_acc"].append(r["test_acc_at_best_val"])
        row["synchronous_epochs"].append(r["synchronous_epochs"])
        row["epoch_s_mean"].append(statistics.mean(steps))
    for row in rows.values():
        row.update(test=mean_std(row["test_acc"]), epoch_s=mean_std(row["epoch_s_mean"]), run_s=mean_std(row["loop_s"]))
    return {"dataset": args.dataset, "ranks": args.ranks, "gbit": args.gbit, "link": link, "epochs": epochs,
            "model": {"hidden": mcfg.hidden_dim, "dropout": mcfg.dropout, "lr": tcfg.lr}, "variants": rows,
            "wall_s": time.perf_counter() - t, "machine": machine(),
            "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
            "command": "python -m benchmarks.dist_staleness " + " ".join(sys.argv[1:])}


def _key(run: dict) -> tuple:
    return run.get("dataset"), run.get("ranks"), run.get("gbit")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="coauthor-cs")
    p.add_argument("--gbit", type=float, default=0.1, help="link rate per rank (Gbit/s)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--epochs", type=int, default=0, help="override the preset's epochs (0: preset)")
    args = p.parse_args()
    if not args.gbit > 0 or args.ranks < 2 or args.seeds < 1:
        raise UsageError("need --gbit > 0, --ranks >= 2 and --seeds >= 1")
    new = run(args)
    old = load_results("dist_staleness")
    old_runs = old.get("runs", [old] if "variants" in old else [])  # the first files held one run
    res = {"runs": sorted([r for r in old_runs if _key(r) != _key(new)] + [new], key=lambda r: -r["gbit"]),
           "machine": new["machine"]}
    print("\n".join(render(res)))
    print(f"written {save_results('dist_staleness', res)} in {new['wall_s']:.0f} s")


def render(res: dict) -> list[str]:
    lines = ["## Distributed training: bounded staleness on a slow link", "",
             "File: `benchmarks/results/dist_staleness.json`. GCN (the single-process preset) on ranks behind a "
             "tc-shaped link; test accuracy at the best validation epoch; step = mean training step over epochs 1.. "
             "(evaluation not timed); run = the whole run's wall time with evaluation every 2 epochs. Accuracy over "
             "5 seeds and 4 partitions: the accuracy table above.", ""]
    for run in res.get("runs", []):
        lines += _run_lines(run)
    return lines


def _run_lines(res: dict) -> list[str]:
    rows = res.get("variants", {})
    ref = rows.get("fp32", {}).get("epoch_s", {}).get("mean")
    ref_run = rows.get("fp32", {}).get("run_s", {}).get("mean")
    lines = [f"{res.get('dataset')}, {res.get('ranks')} ranks, {res.get('gbit')} Gbit/s per rank, {res.get('epochs')} "
             f"epochs (`{res.get('command')}`):", "",
             *table_head("variant", "seeds", "test acc (%)", "synchronous epochs", "step s (mean)",
                         "step speedup vs fp32", "run s", "run speedup vs fp32")]
    for name, r in rows.items():
        t, run_s = r["epoch_s"]["mean"], r["run_s"]["mean"]
        lines.append(table_row(name, len(r["seed"]), f"{100 * r['test']['mean']:.2f} +- {100 * r['test']['std']:.2f}",
                               f"{statistics.mean(r['synchronous_epochs']):.1f}", f"{t:.3f}",
                               f"{ref / t:.2f}x" if ref else "-", f"{run_s:.1f}",
                               f"{ref_run / run_s:.2f}x" if ref_run else "-"))
    load = res.get("load_average_1min", {})
    return lines + ["", f"1-minute load average {load.get('start', 0):.1f} at the start and {load.get('end', 0):.1f} "
                    "at the end (this job's ranks included).", ""]


if __name__ == "__main__":
    main()
