"""Quantized + distributed: a mixed-precision GCN trained on P ranks with compressed halo exchange, against the
same quantized model trained in one process, on the same seeds.

    python benchmarks/dist_quant_accuracy.py [--dataset coauthor-cs] [--quant a2q] [--target-bits 4] \\
        [--parts 4] [--exchange int1] [--seeds 5] [--epochs N]

Both sides: the `gnn.presets` GCN of the dataset, quantized by `quant.quantize_` with the same QuantConfig
(method, target bits, default penalty weight), the preset's epochs with no early stopping, evaluation every epoch,
test accuracy at the epoch of best validation accuracy. Seed s: split s, init seed s, METIS partition seed s.
Selection differs in one detail: the single-process trainer prefers epochs whose stored average bits are within
the target (`gnn.trainer._is_better`); the distributed runner takes the best validation epoch outright (its
reported bits are those of the final model). Results merge per (dataset, quant, target, exchange) into
benchmarks/results/dist_quant_accuracy.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import statistics
import sys
import time

from benchmarks._common import load_results, machine, mean_std, save_results, table_head
from distributed.codecs import CODECS
from distributed.halo import ExchangeConfig
from distributed.launch import spawn
from distributed.runner import DistTrainConfig, train_many
from gnn.data.loaders import load_dataset
from gnn.models import GNN
from gnn.presets import model_and_train_config
from gnn.trainer import seed_everything, train_one


def _stats(values: list[float]) -> dict:
    return {**mean_std(values), "values": values}


def single_process(args: argparse.Namespace, seed: int) -> dict:
    graph = load_dataset(args.dataset, split_seed=seed)
    mcfg, tcfg = model_and_train_config(graph, "gcn")
    tcfg = dataclasses.replace(tcfg, quant=args.quant, target_bits=args.target_bits, patience=0,
                               epochs=args.epochs or tcfg.epochs, bits_control="penalty")  # as distributed.runner
    seed_everything(seed)
    r = train_one(GNN(mcfg), graph, graph.splits[0], tcfg, seed=seed, progress=False)
    return {"test_acc": r.test_acc, "val_acc": r.val_acc, "best_epoch": r.best_epoch,
            "avg_bits": r.quant_summary.get("avg_bits"), "ms_per_epoch": r.ms_per_epoch}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="coauthor-cs")
    p.add_argument("--quant", default="a2q", choices=("a2q", "degree-aware", "dq-int8", "dq-int4"))
    p.add_argument("--target-bits", type=float, default=4.0)
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--exchange", default="int1", choices=CODECS)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epochs", type=int, default=0, help="override the preset's epochs (0: preset)")
    args = p.parse_args()

    graph = load_dataset(args.dataset)
    mcfg, tcfg = model_and_train_config(graph, "gcn")
    epochs = args.epochs or tcfg.epochs
    start = time.perf_counter()
    single = []
    for seed in range(args.seeds):
        single.append(single_process(args, seed))
        print(f"single-process seed {seed}: test {single[-1]['test_acc']:.4f} bits {single[-1]['avg_bits']}",
              flush=True)
    single_s = time.perf_counter() - start
    cfgs = [DistTrainConfig(dataset=args.dataset, arch="gcn", num_parts=args.parts, seed=seed,
                            hidden_dim=mcfg.hidden_dim, dropout=mcfg.dropout, lr=tcfg.lr,
                            weight_decay=tcfg.weight_decay, epochs=epochs, eval_every=1, log_every=0,
                            quant=args.quant, target_bits=args.target_bits,
                            exchange=ExchangeConfig(codec=args.exchange))
            for seed in range(args.seeds)]
    start = time.perf_counter()
    dist_runs = spawn(train_many, args.parts, cfgs, True)[0]  # rank 0 holds the gathered quant summary
    dist_s = time.perf_counter() - start
    dist = [{"test_acc": r["test_acc_at_best_val"], "val_acc": r["best_val_acc"], "best_epoch": r["best_epoch"],
             "final_avg_bits": r["quant_summary"]["avg_bits"],
             "bytes_per_epoch": statistics.mean(h["exchange_bytes"] for h in r["history"])} for r in dist_runs]
    for s, d in zip(single, dist, strict=True):
        print(f"single {s['test_acc']:.4f} ({s['avg_bits']:.2f} bits)  distributed {d['test_acc']:.4f} "
              f"({d['final_avg_bits']:.2f} bits)", flush=True)
    entry = {
        "dataset": args.dataset, "quant": args.quant, "target_bits": args.target_bits, "parts": args.parts,
        "exchange": args.exchange, "seeds": args.seeds, "epochs": epochs,
        "model": {"arch": "gcn", "hidden": mcfg.hidden_dim, "dropout": mcfg.dropout, "lr": tcfg.lr,
                  "weight_decay": tcfg.weight_decay},
        "single_process": {"test_acc": _stats([r["test_acc"] for r in single]),
                           "avg_bits": _stats([r["avg_bits"] for r in single]), "runs": single, "wall_s": single_s},
        "distributed": {"test_acc": _stats([r["test_acc"] for r in dist]),
                        "final_avg_bits": _stats([r["final_avg_bits"] for r in dist]), "runs": dist,
                        "wall_s": dist_s},
        "command": "python benchmarks/dist_quant_accuracy.py " + shlex.join(sys.argv[1:]),
    }
    entry["gap_pt"] = 100 * (entry["distributed"]["test_acc"]["mean"] - entry["single_process"]["test_acc"]["mean"])
    print(f"single {entry['single_process']['test_acc']['mean']:.4f} distributed "
          f"{entry['distributed']['test_acc']['mean']:.4f} gap {entry['gap_pt']:+.2f} pt", flush=True)
    res = load_results("dist_quant_accuracy")
    res.setdefault("runs", {})[f"{args.dataset}_{args.quant}_t{args.target_bits:g}_{args.exchange}_p{args.parts}"] \
        = entry
    res["machine"] = machine()
    print(f"written {save_results('dist_quant_accuracy', res)}")


def render(res: dict) -> list[str]:
    lines = ["## Quantized + distributed training against single-process (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/dist_quant_accuracy.json` (each row names its command). Same seeds, "
             "preset GCN, same QuantConfig on both sides.", "",
             *table_head("dataset", "quant", "target bits", "parts", "exchange", "seeds", "single-process", "bits",
                         "distributed", "final bits", "gap (pt)", "command")]
    for e in res.get("runs", {}).values():
        sp, dp = e["single_process"], e["distributed"]
        lines.append(f"| {e['dataset']} | {e['quant']} | {e['target_bits']:g} | {e['parts']} | {e['exchange']} | "
                     f"{e['seeds']} | {100 * sp['test_acc']['mean']:.2f} +- {100 * sp['test_acc']['std']:.2f} | "
                     f"{sp['avg_bits']['mean']:.2f} | {100 * dp['test_acc']['mean']:.2f} +- "
                     f"{100 * dp['test_acc']['std']:.2f} | {dp['final_avg_bits']['mean']:.2f} | {e['gap_pt']:+.2f} | "
                     f"`{e['command']}` |")
    return lines + [""]


if __name__ == "__main__":
    main()
