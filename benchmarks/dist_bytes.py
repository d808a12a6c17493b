"""Halo-exchange bytes per epoch by codec, measured by the transport byte counter (not computed).

    python benchmarks/dist_bytes.py [--dataset coauthor-cs] [--parts 4] [--hidden 256] [--epochs 2] \\
        [--codecs fp32,int1,...]

Spawns `--parts` gloo CPU ranks (oversubscribed when parts > cores: times are NOT meaningful here, bytes are),
trains a 2-layer GCN for a few epochs per codec, and reports the bytes every rank handed to all_to_all_single
per training epoch (forward + backward, summed over ranks), next to the formula 2 H sum_l row_bytes(F_l), and the
ratio fp32 / codec (target for int1 at F = 256: >= 25x). Writes benchmarks/results/dist_bytes.json.
"""

from __future__ import annotations

import argparse

from benchmarks._common import machine, save_results, table_head
from distributed import codecs
from distributed.halo import ExchangeConfig
from distributed.launch import spawn
from distributed.runner import DistTrainConfig, train_many
from gnn.cli import UsageError
from gnn.data.loaders import load_dataset
from gnn.data.partition import cached_partition_nodes, halo_rows_total

CODECS = ("fp32", "fp16", "int8", "int4", "int2", "int1", "int1-2c")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="coauthor-cs")
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--codecs", default=",".join(CODECS), help="comma list; must include fp32")
    args = p.parse_args()
    chosen = tuple(c for c in CODECS if c in args.codecs.split(","))
    if "fp32" not in chosen:
        raise UsageError(f"--codecs must include fp32 (the reference); valid: {', '.join(CODECS)}")
    g = load_dataset(args.dataset)
    ei, n = g.data.edge_index, g.data.num_nodes
    parts = cached_partition_nodes(args.dataset, ei, n, args.parts, "metis", 0)
    h = halo_rows_total(parts, ei)
    cfgs = [DistTrainConfig(dataset=args.dataset, arch="gcn", num_parts=args.parts, hidden_dim=args.hidden,
                            num_layers=args.layers, epochs=args.epochs, eval_every=10**6, log_every=0,
                            sparse_input=True,
                            exchange=ExchangeConfig(codec=c)) for c in chosen]
    results = spawn(train_many, args.parts, cfgs)[0]
    rows = {}
    for c, r in zip(chosen, results, strict=True):
        measured = [x["exchange_bytes"] for x in r["history"]]
        formula = 2 * h * (args.layers - 1) * codecs.row_bytes(c, args.hidden)
        rows[c] = {"bytes_per_epoch": measured[-1], "formula_bytes_per_epoch": formula,
                   "all_epochs_equal": len(set(measured)) == 1, "final_loss": r["history"][-1]["loss"]}
    for c in chosen:
        rows[c]["ratio_vs_fp32"] = rows["fp32"]["bytes_per_epoch"] / rows[c]["bytes_per_epoch"]
        print(f"{c:8s} {rows[c]['bytes_per_epoch'] / 1e6:10.3f} MB/epoch  formula "
              f"{rows[c]['formula_bytes_per_epoch'] / 1e6:10.3f}  x{rows[c]['ratio_vs_fp32']:.1f} vs fp32")
    sizes = [int((parts == k).sum()) for k in range(args.parts)]
    payload = {"dataset": args.dataset, "num_nodes": n, "parts": args.parts, "hidden": args.hidden,
               "layers": args.layers, "halo_rows_H": h, "owned_per_part": sizes,
               "setup_bytes_fp32_input_once": results[0]["setup_bytes"], "codecs": rows,
               "int1_target_ratio": 25.0, "int1_meets_target": rows.get("int1", {}).get("ratio_vs_fp32", 0) >= 25.0,
               "machine": machine(), "note": "bytes = sum over ranks of bytes handed to all_to_all_single per "
               "training epoch (forward + backward); layer-0 input features are exchanged once (setup)"}
    print(f"H = {h} halo rows; written {save_results('dist_bytes', payload)}")


def render(res: dict) -> list[str]:
    lines = ["## Distributed training: exchange volume per codec", "",
             f"File: `benchmarks/results/dist_bytes.json`. {res.get('dataset')}, {res.get('parts')} parts, hidden "
             f"{res.get('hidden')}, {res.get('layers')} layers; {res.get('note', '')}.", "",
             *table_head("codec", "bytes / epoch", "formula", "fp32 / codec")]
    for name, c in res.get("codecs", {}).items():
        lines.append(f"| {name} | {c['bytes_per_epoch']:,} | {c['formula_bytes_per_epoch']:,} | "
                     f"{c['ratio_vs_fp32']:.1f} |")
    return lines + [""]


if __name__ == "__main__":
    main()
