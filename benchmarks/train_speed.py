"""Training-step time of our GCN and GAT against the same architecture built from PyG's own layers.

    python benchmarks/train_speed.py [--repeats 5] [--steps 10]

Same run, same inputs, same optimiser; ours and PyG's alternate repeat by repeat so that machine noise hits
both alike; the median over repeats is reported, and the ratio ours / PyG (target <= 1.1).
Writes benchmarks/results/train_speed.json (cases of datasets not rerun are kept; each case names its command).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F
import torch_geometric.nn as pygnn

from benchmarks._common import load_results, machine, machine_line, save_results, table_head
from gnn.data.loaders import load_dataset
from gnn.models import build_model, dropout
from gnn.presets import model_and_train_config
from gnn.trainer import wants_sparse_input


class PygTwoLayer(torch.nn.Module):
    """Our two-layer node model (dropout -> conv -> act -> dropout -> conv) built from PyG's layers."""

    def __init__(self, cfg) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.arch == "gcn":
            self.c1 = pygnn.GCNConv(cfg.in_dim, cfg.hidden_dim, cached=True)
            self.c2 = pygnn.GCNConv(cfg.hidden_dim, cfg.out_dim, cached=True)
        else:
            self.c1 = pygnn.GATConv(cfg.in_dim, cfg.hidden_dim, heads=cfg.heads, dropout=cfg.attn_dropout)
            self.c2 = pygnn.GATConv(cfg.hidden_dim * cfg.heads, cfg.out_dim, heads=cfg.out_heads, concat=False,
                                    dropout=cfg.attn_dropout)

    def forward(self, x, edge_index):
        act = F.elu if self.cfg.arch == "gat" else F.relu
        h = act(self.c1(dropout(x, self.cfg.dropout, self.training), edge_index))
        return self.c2(F.dropout(h, self.cfg.dropout, self.training), edge_index)


def time_steps(model, x, edge_index, y, train_idx, steps: int) -> float:
    """Mean milliseconds of one training step (forward, loss, backward, Adam update)."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(2):  # warm-up (caches, allocator)
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index)[train_idx], y[train_idx]).backward()
        opt.step()
    t = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(x, edge_index)[train_idx], y[train_idx]).backward()
        opt.step()
    return 1000.0 * (time.perf_counter() - t) / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--datasets", default="cora,coauthor-cs")
    args = p.parse_args()
    command = "python benchmarks/train_speed.py " + " ".join(sys.argv[1:])
    previous = load_results("train_speed").get("cases", {})  # cases of other datasets stay
    out = {"machine": machine(), "cases": previous}
    for name in args.datasets.split(","):
        graph = load_dataset(name)
        d = graph.data
        for arch in ("gcn", "gat"):
            cfg, _ = model_and_train_config(graph, arch)
            torch.manual_seed(0)
            ours = build_model(cfg)
            theirs = PygTwoLayer(cfg)
            x = d.x.to_sparse() if wants_sparse_input(ours, graph) else d.x
            idx = graph.splits[0].train
            ms_ours, ms_pyg = [], []
            for r in range(args.repeats):  # alternate who goes first, so drifting load hits both alike
                for model, times in ((ours, ms_ours), (theirs, ms_pyg))[:: 1 if r % 2 == 0 else -1]:
                    times.append(time_steps(model, x, d.edge_index, d.y, idx, args.steps))
            case = {"ours_ms": statistics.median(ms_ours), "pyg_ms": statistics.median(ms_pyg),
                    "ours_all_ms": ms_ours, "pyg_all_ms": ms_pyg, "sparse_input": x.is_sparse,
                    "repeats": args.repeats, "steps": args.steps, "command": command}
            case["ratio"] = case["ours_ms"] / case["pyg_ms"]
            out["cases"][f"{name}:{arch}"] = case
            print(f"{name:<14}{arch:<5} ours {case['ours_ms']:9.2f} ms  pyg {case['pyg_ms']:9.2f} ms  "
                  f"ratio {case['ratio']:.3f}", flush=True)
    print(f"written to {save_results('train_speed', out)}")


def render(res: dict) -> list[str]:
    lines = ["## Training speed against PyG's own layers", "",
             "Command: `python benchmarks/train_speed.py` (file: `benchmarks/results/train_speed.json`). "
             "Median ms per training step (forward, loss, backward, Adam) over repeats that alternate ours and "
             "PyG's in one process; ratio = ours / PyG (target <= 1.1).", "",
             *table_head("case", "ours (ms)", "PyG (ms)", "ratio", "sparse input", "repeats x steps", "command")]
    for key, c in res.get("cases", {}).items():
        lines.append(f"| {key} | {c['ours_ms']:.2f} | {c['pyg_ms']:.2f} | {c['ratio']:.3f} | {c['sparse_input']} | "
                     f"{c.get('repeats', res.get('repeats'))} x {c.get('steps', res.get('steps'))} | "
                     f"`{c.get('command', 'python benchmarks/train_speed.py')}` |")
    lines += ["", machine_line(res), ""]
    return lines


if __name__ == "__main__":
    main()
