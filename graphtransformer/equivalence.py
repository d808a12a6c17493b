"""Check a sequence-parallel layout against the single-process model: same outputs and same gradients.

``run_equivalence(EquivalenceCase(cp=2, hp=2))`` spawns ``cp * hp`` CPU processes over gloo
(`distributed.launch.spawn`), each builds the same float64 model and random graph (N chosen not divisible by the
world size, so padding is exercised), runs the single-process reference and the parallelized model on its rows,
and reports the max absolute error of its output rows and of the all-reduced parameter gradients, plus the bytes
it sent per layer.
With ``fsdp`` / ``checkpoint_layers`` the parallel model is also FSDP2-sharded / activation-checkpointed, and with
``optimizer_step`` both models take one AdamW step and the parameters after it are compared (``param_err``).
Used by the tests; also ``python -m graphtransformer.equivalence --cp 2 --hp 2``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from distributed.launch import spawn
from graphtransformer.cluster import ClusterConfig
from graphtransformer.comm import CommCounter
from graphtransformer.model import GraphTransformer, GraphTransformerConfig, attention_graph
from graphtransformer.parallel import (
    SequenceParallelConfig,
    broadcast_parameters,
    build_mesh,
    ddp_of,
    parallelize_graph_transformer,
    shard_graph,
    shard_rows,
)
from graphtransformer.sharding import full_tensor


@dataclass(frozen=True, kw_only=True)
class EquivalenceCase:
    cp: int = 1
    hp: int = 1
    sparse_comm: str = "halo"
    schedule: tuple[str, ...] = ("sparse", "dense")
    num_nodes: int = 37
    num_heads: int = 4
    head_dim: int = 2
    edge_prob: float = 0.08
    seed: int = 0
    chunk_rows: int = 7  # small, not dividing the block, so the chunked ring kernels are exercised
    fsdp: bool = False
    ring_window: int = 0  # Double-Ring window (0: one ring)
    halo_codec: str = "fp32"  # lossy codecs make the comparison approximate (tests bound the error instead)
    halo_grad_codec: str = ""
    checkpoint_layers: tuple[int, ...] = ()
    optimizer_step: bool = False  # one AdamW step (lr 1e-2, weight decay 1e-2) on both models
    dtype: str = "float64"  # "float32" exercises the reduce ops gloo gets for fp32 gradients (FSDP2)


def _problem(case: EquivalenceCase):
    g = torch.Generator().manual_seed(case.seed)
    n = case.num_nodes
    a = torch.rand(n, n, generator=g) < case.edge_prob
    dst, src = torch.nonzero(a | a.T, as_tuple=True)
    graph = attention_graph(torch.stack([src, dst]), n, max_degree=8, cluster=ClusterConfig(num_clusters=3))
    cfg = GraphTransformerConfig(in_dim=5, out_dim=3, hidden_dim=case.num_heads * case.head_dim,
                                 num_heads=case.num_heads, num_layers=len(case.schedule), schedule=case.schedule,
                                 dropout=0.0, pe_dim=2, max_degree=8)
    dt = getattr(torch, case.dtype)
    x = torch.randn(n, 5, generator=g, dtype=torch.float64).to(dt)
    pe = torch.randn(n, 2, generator=g, dtype=torch.float64).to(dt)
    w = torch.randn(n, 3, generator=g, dtype=torch.float64).to(dt)  # loss = sum(logits * w)
    return graph, cfg, x, pe, w


def _model(cfg: GraphTransformerConfig, seed: int, dtype: str = "float64") -> GraphTransformer:
    torch.manual_seed(seed)
    return GraphTransformer(cfg).to(getattr(torch, dtype))


def _grad_sync(model) -> dict | None:
    """How the replicated gradients were summed (None under FSDP2): DDP's engine, its comm hook, and how many
    bucketed all-reduces one backward makes for how many parameters."""
    ddp = ddp_of(model)
    if ddp is None:
        return None
    log = ddp._get_ddp_logging_data()
    return {"engine": type(ddp).__name__, "comm_hook": log["comm_hook"],
            "all_reduces": len(str(log["bucket_sizes"]).split(",")), "params": sum(1 for _ in model.parameters())}


def _rank_check(case: EquivalenceCase) -> dict:
    """One rank of `run_equivalence` (run by `distributed.launch.spawn`, which owns the group and its teardown)."""
    rank = dist.get_rank()
    graph, cfg, x, pe, w = _problem(case)
    ref = _model(cfg, case.seed, case.dtype)
    ref_out = ref(x, graph, pe)
    (ref_out * w).sum().backward()

    sp = SequenceParallelConfig(cp=case.cp, hp=case.hp, sparse_comm=case.sparse_comm, fsdp=case.fsdp,
                                ring_window=case.ring_window, halo_codec=case.halo_codec,
                                halo_grad_codec=case.halo_grad_codec, checkpoint_layers=case.checkpoint_layers)
    counter = CommCounter()
    model = _model(cfg, case.seed, case.dtype)
    broadcast_parameters(model)
    model = parallelize_graph_transformer(model, build_mesh(sp), sp, counter, case.chunk_rows)
    sharded = shard_graph(graph, sp, rank)
    out = model(shard_rows(x, sharded), sharded, shard_rows(pe, sharded))
    (out * shard_rows(w, sharded)).sum().backward()  # DDP (or FSDP2) sums the gradients over the ranks

    real = min(sharded.rows_per_rank, max(0, case.num_nodes - sharded.row_slice.start))
    out_err = (out[:real] - shard_rows(ref_out, sharded)[:real]).abs().max().item() if real else 0.0
    pairs = list(zip(model.parameters(), ref.parameters(), strict=True))
    grad_err = max((full_tensor(p.grad) - q.grad).abs().max().item() for p, q in pairs)
    param_err = None
    if case.optimizer_step:
        # Adam's first step is lr * g / (|g| + eps): a gradient difference d moves a parameter by up to
        # lr * d / (4 eps), so eps = 1e-8 would turn 1e-14 gradient noise into 1e-9; eps = 1e-6 keeps it < 1e-10
        # in float64, eps = 1e-2 keeps float32's ~4e-6 gradient noise < 1e-5.
        eps = 1e-6 if case.dtype == "float64" else 1e-2
        for m in (model, ref):
            torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=1e-2, eps=eps).step()
        param_err = max((full_tensor(p.detach()) - q.detach()).abs().max().item() for p, q in pairs)
    per_layer = {f"layers.{i}": {ph: counter.total(layer=f"layers.{i}", phase=ph) for ph in ("forward", "backward")}
                 for i in range(cfg.num_layers)}
    return {"rank": rank, "out_err": out_err, "grad_err": grad_err, "param_err": param_err,
            "out_scale": ref_out.abs().max().item(),
            "grad_scale": max(q.grad.abs().max().item() for _, q in pairs),
            "sharded": sum(type(p).__name__ == "DTensor" for p in model.parameters()), "bytes": per_layer,
            "grad_sync": _grad_sync(model),
            "halo_recv_rows": sum(sharded.halo_plan.recv_counts), "rows_per_rank": sharded.rows_per_rank}


def run_equivalence(case: EquivalenceCase, timeout_s: float = 300.0) -> list[dict]:
    """Spawn cp * hp processes (one thread each); returns one result dict per rank (raises
    `distributed.launch.RankFailure` naming a failed rank's status, traceback and stderr)."""
    return spawn(_rank_check, case.cp * case.hp, case, timeout_s=timeout_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cp", type=int, default=2, help="ring (context-parallel) degree")
    parser.add_argument("--hp", type=int, default=1, help="Ulysses (head-parallel) degree")
    parser.add_argument("--sparse-comm", default="halo", choices=("halo", "ring"))
    parser.add_argument("--ring-window", type=int, default=0, help="Double-Ring window (0: one ring)")
    parser.add_argument("--schedule", default="sparse,dense", help="comma-separated kinds per layer")
    parser.add_argument("--num-nodes", type=int, default=37)
    parser.add_argument("--fsdp", action="store_true", help="FSDP2-shard parameters over the world")
    parser.add_argument("--checkpoint-layers", default="", help="comma-separated layer indices to checkpoint")
    parser.add_argument("--step", action="store_true", help="compare parameters after one AdamW step")
    args = parser.parse_args()
    ckpt = tuple(int(i) for i in args.checkpoint_layers.split(",") if i)
    case = EquivalenceCase(cp=args.cp, hp=args.hp, sparse_comm=args.sparse_comm,
                           schedule=tuple(args.schedule.split(",")), num_nodes=args.num_nodes, fsdp=args.fsdp,
                           checkpoint_layers=ckpt, optimizer_step=args.step, ring_window=args.ring_window)
    print(json.dumps({"case": asdict(case), "ranks": run_equivalence(case)}, indent=1))


if __name__ == "__main__":
    main()
