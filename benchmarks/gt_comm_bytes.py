"""Communication bytes per attention layer and rank for every sequence-parallel layout, on the real graphs.

    .venv/bin/python benchmarks/gt_comm_bytes.py [--datasets cora,citeseer,amazon-computers,coauthor-cs]
        [--world-sizes 2,4,8] [--hidden 64 --heads 8]

Forward bytes of one layer (the backward moves the same rows back), from ``graphtransformer.volume`` and the halo plans
that ``graphtransformer.parallel.shard_graph`` builds (the same functions a run uses; tests/graphtransformer check
that the bytes a real run counts equal them). Layouts: Ulysses (hp = P), ring (cp = P), and the halo layout of the
sparse layers in fp32 and with the int1 codec. Node order: METIS clusters, one per rank, as ``graphtransformer.train``
relabels distributed runs, and the dataset's own order for comparison. Writes benchmarks/results/gt_comm_bytes.json.
"""

from __future__ import annotations

import argparse
import sys

import torch

from benchmarks._common import machine, save_results, table_head
from distributed.codecs import row_bytes
from gnn.cli import UsageError
from gnn.data.loaders import load_dataset
from graphtransformer.cluster import metis_relabeling
from graphtransformer.model import attention_graph
from graphtransformer.parallel import SequenceParallelConfig, shard_graph
from graphtransformer.volume import dense_forward_bytes, halo_forward_bytes


def layouts(edge_index: torch.Tensor, num_nodes: int, world: int, heads: int, head_dim: int) -> dict:
    """Per-rank forward bytes of one layer: {layout: {"max": max over ranks, "total": sum over ranks}}."""
    graph = attention_graph(edge_index, num_nodes)
    n = -(-num_nodes // world)
    width = heads * head_dim
    per_rank = {"ulysses": [dense_forward_bytes(n, heads, head_dim, 1, world)] * world,
                "ring": [dense_forward_bytes(n, heads, head_dim, world, 1)] * world,
                "halo fp32": [], "halo int1": []}
    for rank in range(world):
        plan = shard_graph(graph, SequenceParallelConfig(cp=world), rank).halo_plan
        per_rank["halo fp32"].append(halo_forward_bytes(plan, row_bytes("fp32", width)))
        per_rank["halo int1"].append(halo_forward_bytes(plan, row_bytes("int1", width)))
    return {k: {"max": max(v), "total": sum(v)} for k, v in per_rank.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cora,citeseer,amazon-computers,coauthor-cs")
    p.add_argument("--world-sizes", default="2,4,8")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=8)
    args = p.parse_args()
    if args.hidden % args.heads:
        raise UsageError(f"--hidden {args.hidden} is not divisible by --heads {args.heads}")
    head_dim = args.hidden // args.heads
    rows = []
    for name in args.datasets.split(","):
        data = load_dataset(name).data
        for world in (int(w) for w in args.world_sizes.split(",")):
            for order in ("metis", "dataset"):
                ei = data.edge_index
                if order == "metis":  # cluster-major, as graphtransformer.train relabels distributed runs
                    ei = metis_relabeling(ei, data.num_nodes, world)[1][ei]
                vol = layouts(ei, data.num_nodes, world, args.heads, head_dim)
                row = {"dataset": name, "num_nodes": data.num_nodes, "num_edges": int(data.edge_index.shape[1]),
                       "world": world, "order": order, "bytes": vol,
                       "ulysses_over_halo_fp32": vol["ulysses"]["total"] / max(vol["halo fp32"]["total"], 1)}
                rows.append(row)
                print(f"{name:<17} P={world} {order:<8} ulysses {vol['ulysses']['total'] / 1e6:8.2f} MB  halo fp32 "
                      f"{vol['halo fp32']['total'] / 1e6:8.2f} MB  int1 {vol['halo int1']['total'] / 1e6:7.3f} MB  "
                      f"saving x{row['ulysses_over_halo_fp32']:.1f}", flush=True)
    save_results("gt_comm_bytes", {"command": "python benchmarks/gt_comm_bytes.py " + " ".join(sys.argv[1:]),
                                   "hidden": args.hidden, "heads": args.heads, "rows": rows, "machine": machine()})


def render(res: dict) -> list[str]:
    lines = ["## Graph transformer: communication bytes per attention layer (forward, all ranks)", "",
             f"File: `benchmarks/results/gt_comm_bytes.json`; command: `{res.get('command', '')}`. Hidden "
             f"{res.get('hidden')}, {res.get('heads')} heads, fp32 unless named. From `graphtransformer.volume` and "
             "the halo plans of `shard_graph`; tests check that a real run counts exactly these bytes. Order: METIS "
             "clusters, one per rank (what distributed runs use), or the dataset's own node order.", "",
             *table_head("dataset", "ranks", "order", "Ulysses MB", "ring MB", "halo fp32 MB", "halo int1 MB",
                         "Ulysses / halo fp32")]
    for r in res.get("rows", []):
        b = r["bytes"]
        lines.append(f"| {r['dataset']} | {r['world']} | {r['order']} | {b['ulysses']['total'] / 1e6:.2f} | "
                     f"{b['ring']['total'] / 1e6:.2f} | {b['halo fp32']['total'] / 1e6:.2f} | "
                     f"{b['halo int1']['total'] / 1e6:.3f} | {r['ulysses_over_halo_fp32']:.1f} |")
    return lines + [""]


if __name__ == "__main__":
    main()
