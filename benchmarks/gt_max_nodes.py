"""Largest graph on which one graph-transformer training step fits on one device (a GPU), and its time.

For each attention kind and node count: a community graph of ``community_graph`` (average degree ~11 with self loops,
generated on the device), dense random node features, random labels over all nodes, the model
:class:`graphtransformer.model.GraphTransformer` with every layer of that kind, and full training steps (forward,
cross-entropy over all nodes, backward, Adam). One warm-up step, then the median of ``--steps`` timed steps; peak
memory = the device's peak allocation during the timed steps. Sizes run in increasing order per kind and stop at
the first out-of-memory, which is recorded: the row before it is the largest that trains. Writes
benchmarks/results/gt_max_nodes.json after every row.

    python benchmarks/gt_max_nodes.py --device cuda --sizes 1048576,2097152,4194304
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from benchmarks._common import device_name, machine, table_head
from benchmarks.gt_attention import community_graph
from gnn.cli import UsageError
from graphtransformer.cluster import ClusterConfig
from graphtransformer.flex import FlexConfig
from graphtransformer.model import GraphTransformer, GraphTransformerConfig, attention_graph


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(n: int, kind: str, args) -> dict:
    """One row: graph build, model, warm-up step, timed steps on ``args.device``."""
    device = args.device
    t0 = time.perf_counter()
    ei = community_graph(n, device=device)
    clusters = max(1, n // 256)
    flex = FlexConfig(num_clusters=clusters) if kind == "flex" else None
    cluster = ClusterConfig(num_clusters=clusters, density_threshold=0.02) if kind == "cluster" else None
    graph = attention_graph(ei, n, max_degree=64, cluster=cluster, flex=flex)
    num_edges = int(graph.edge_index.shape[1])
    del ei
    _sync(device)
    setup_s = time.perf_counter() - t0
    cfg = GraphTransformerConfig(in_dim=args.features, out_dim=args.classes, hidden_dim=args.hidden,
                                 num_heads=args.heads, num_layers=args.layers, schedule=(kind,) * args.layers,
                                 ffn_ratio=args.ffn_ratio, dropout=0.1, pe_dim=0, max_degree=64)
    torch.manual_seed(0)
    model = GraphTransformer(cfg).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, args.features, generator=gen, device=device)
    y = torch.randint(0, args.classes, (n,), generator=gen, device=device)

    def step() -> float:
        logits = model(x, graph, step=0)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()  # synchronises

    step()  # warm-up (allocator, FlexAttention compile)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    return {"num_nodes": n, "num_edges": num_edges, "kind": kind, "step_ms": 1e3 * statistics.median(times),
            "peak_mem_gib": peak, "setup_s": setup_s, "loss": loss,
            "params": sum(p.numel() for p in model.parameters())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (the measurement this script is for) or cpu (a smoke run)")
    p.add_argument("--sizes", default="1048576,2097152,4194304", help="node counts, increasing")
    p.add_argument("--kinds", default="sparse", help="comma list of attention kinds (sparse, flex, cluster)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=8)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--ffn-ratio", type=int, default=2)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=2, help="timed steps after one warm-up")
    p.add_argument("--deadline-s", type=float, default=float("inf"), help="start no new size after this many s")
    p.add_argument("--out", default="benchmarks/results/gt_max_nodes.json")
    args = p.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise UsageError("--device cuda but PyTorch sees no CUDA device; use --device cpu for a smoke run")
    sizes = [int(s) for s in args.sizes.split(",")]
    if sizes != sorted(sizes):
        raise UsageError(f"--sizes must increase (the first out-of-memory ends a kind); got {sizes}")
    command = "python benchmarks/gt_max_nodes.py " + " ".join(sys.argv[1:])
    device_label = device_name(args.device)
    rows, t_start = [], time.perf_counter()
    for kind in args.kinds.split(","):
        for n in sizes:
            if time.perf_counter() - t_start > args.deadline_s:
                print(f"deadline: stopping before {kind} N={n}", flush=True)
                break
            try:
                row = measure(n, kind, args)
            except torch.OutOfMemoryError:
                row = {"num_nodes": n, "kind": kind, "error": "out of memory"}
            except Exception as exc:  # noqa: BLE001 - recorded in the row and printed; the next kind goes on
                row = {"num_nodes": n, "kind": kind, "error": f"{type(exc).__name__}: {exc}"[:500]}
            rows.append(row)
            print(json.dumps(row), flush=True)
            largest = {k: max((r["num_nodes"] for r in rows if r["kind"] == k and "error" not in r), default=None)
                       for k in args.kinds.split(",")}
            result = {"device": device_label, "model": {k: getattr(args, k) for k in
                                                       ("hidden", "heads", "layers", "ffn_ratio", "features",
                                                        "classes")},
                      "rows": rows, "largest_trained": largest, "command": command, "torch": torch.__version__,
                      "machine": machine()}
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(result, indent=1))
            if args.device.startswith("cuda"):
                torch.cuda.empty_cache()
            if "error" in row:
                break


def render(res: dict) -> list[str]:
    model = res.get("model", {})
    lines = ["## Graph transformer: largest graph whose training step fits on one device", "",
             f"File: `benchmarks/results/gt_max_nodes.json`; command: `{res.get('command', '')}`. Device: "
             f"{res.get('device')} (torch {res.get('torch')}). Model: {model.get('layers')} layers of the named kind, "
             f"hidden {model.get('hidden')}, {model.get('heads')} heads, FFN ratio {model.get('ffn_ratio')}, "
             f"{model.get('features')} dense input features, {model.get('classes')} classes; one step = forward, "
             "cross-entropy over all nodes, backward, Adam, fp32. Graph: the community graph of gt_attention "
             "(average degree ~11 with self loops). Sizes stop at the first out-of-memory.", "",
             *table_head("kind", "nodes", "edges", "step ms", "peak GPU GiB")]
    for r in res.get("rows", []):
        if "error" in r:
            lines.append(f"| {r['kind']} | {r['num_nodes']} | - | {r['error']} | - |")
        else:
            lines.append(f"| {r['kind']} | {r['num_nodes']} | {r['num_edges']} | {r['step_ms']:.0f} | "
                         f"{r['peak_mem_gib']:.1f} |")
    largest = ", ".join(f"{k}: {v:,} nodes" for k, v in res.get("largest_trained", {}).items() if v)
    return lines + ["", f"Largest that trains: {largest}.", ""]


if __name__ == "__main__":
    main()
