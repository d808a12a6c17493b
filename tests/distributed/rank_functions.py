"""Rank functions for the launcher tests (spawned ranks import them through the sys.path entry of conftest.py)."""

import os
import signal
import sys

import torch
import torch.distributed as dist

HELD = []  # groups kept alive past destroy_process_group(), as FSDP2's DeviceMesh keeps its groups


def leave_async_work_in_flight(rounds: int) -> float:
    """Post all-reduces on a subgroup and on the default group without waiting, keep both groups referenced, and
    return: the pattern that killed ranks in interpreter shutdown (gloo threads outliving destroy_process_group,
    dropping the last reference to a tensor whose Python object C++ preserved). Each tensor carries an attribute,
    so its Python object is preserved. Returns the value this rank contributed."""
    group = dist.new_group(backend="gloo")
    HELD.extend([group, dist.distributed_c10d._get_default_group()])
    for _ in range(rounds):
        for g in (group, None):
            t = torch.full((1 << 16,), float(dist.get_rank() + 1))
            t.tag = "preserved"
            dist.all_reduce(t, group=g, async_op=True)
    return float(dist.get_rank() + 1)


def abort_on_rank(rank: int) -> int:
    """``rank`` writes a line to stderr and dies of SIGABRT; the others return their rank."""
    if dist.get_rank() == rank:
        print("rank about to abort", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGABRT)
    return dist.get_rank()


def raise_on_rank(rank: int) -> int:
    if dist.get_rank() == rank:
        raise ValueError(f"deliberate failure on rank {rank}")
    return dist.get_rank()


def warn_to_stderr() -> int:
    print(f"note from rank {dist.get_rank()}", file=sys.stderr, flush=True)
    return dist.get_rank()


def agree_on_input_codec() -> str:
    """Rank 0 holds binary rows (int1 alone would do), rank 1 rows of 0..3 (int2 alone would do, but int2's grid
    misses rank 0's 1): the narrowest codec exact on both is fp16."""
    from distributed.codecs import exact_codecs
    from distributed.parallelize import agree_on_codec

    g = torch.Generator().manual_seed(dist.get_rank())
    top = 1 if dist.get_rank() == 0 else 3
    rows = torch.randint(0, top + 1, (20, 9), generator=g).float()
    rows[:, 0] = top  # every row spans 0..top
    rows[:, 1] = 0
    return agree_on_codec(exact_codecs([rows], torch.float32))


def halo_dropout_probe(halo_dropout: str) -> dict:
    """A 2-layer GCN (float64, dropout 0.5, fp64 exchange) on a seeded 2-part graph, ``ExchangeConfig.halo_dropout``
    as given. Returns this rank's layer-1 halo rows as received, the owners' undropped layer-1 input rows of the
    same nodes (all-gathered), and the autograd and central-difference gradients of the global loss for a few
    weight entries (the dropout masks redrawn identically for every evaluation by reseeding)."""
    from distributed.halo import ExchangeConfig
    from distributed.parallelize import ParallelConfig, parallelize_gnn
    from distributed.partition import build_partition
    from gnn.models import GNN, ModelConfig

    rank, n, f = dist.get_rank(), 60, 5
    g = torch.Generator().manual_seed(0)
    src, dst = torch.randint(0, n, (2, 240), generator=g)
    ei = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], dim=1)
    x = torch.randn(n, f, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (n,), generator=g)
    part = build_partition(ei, torch.arange(n) % 2, rank)
    torch.manual_seed(0)
    gnn = GNN(ModelConfig(arch="gcn", in_dim=f, out_dim=3, hidden_dim=4, num_layers=2, dropout=0.5)).double()
    model = parallelize_gnn(gnn, part, ParallelConfig(exchange=ExchangeConfig(codec="fp64",
                                                                              halo_dropout=halo_dropout)))
    x_own, y_own = x[part.owned], y[part.owned]
    layer1_input = {}
    model.module.convs[1].register_forward_pre_hook(lambda m, args: layer1_input.update(x=args[0].detach()))

    def global_loss() -> torch.Tensor:
        torch.manual_seed(100 + rank)  # the same dropout masks at every evaluation
        loss = torch.nn.functional.cross_entropy(model(x_own, part.edge_index), y_own, reduction="sum")
        total = loss.detach().clone()
        dist.all_reduce(total)
        return loss, total

    model.train()
    loss, _ = global_loss()
    loss.backward()  # DDP sums the weight gradients over ranks: the gradient of the global loss
    halo = model.module.convs[1].exchanger.last_halo.clone()  # (N_h, 4) as received
    rows = torch.zeros(n, 4, dtype=torch.float64)
    rows[part.owned] = layer1_input["x"]
    dist.all_reduce(rows)  # every node's undropped layer-1 input, from its owner
    weight = model.module.convs[0].conv.lin.weight
    entries = [(0, 0), (1, 3), (3, 4)]
    autograd = [float(weight.grad[i, j]) for i, j in entries]
    numeric, eps = [], 1e-6
    with torch.no_grad():
        for i, j in entries:
            weight[i, j] += eps
            up = global_loss()[1]
            weight[i, j] -= 2 * eps
            down = global_loss()[1]
            weight[i, j] += eps
            numeric.append(float((up - down) / (2 * eps)))
    return {"halo": halo, "owner_rows": rows[part.halo], "autograd": autograd, "numeric": numeric}


def smoothing_probe(momentum: float, steps: int, stale_gradients: bool = True) -> dict:
    """Drive one pipelined `HaloExchanger` (fp32, no synchronous epoch) with ``smoothing=momentum`` on a 2-part
    path graph: step t sends owned rows of value t + 1 and halo gradients of value 10 (t + 1). Returns per step
    the halo row values used and the gradient values the owner received for its sent rows."""
    from distributed.halo import ByteCounter, ExchangeConfig, HaloExchanger
    from distributed.partition import build_partition

    n = 8
    ei = torch.stack([torch.arange(n - 1), torch.arange(1, n)])
    part = build_partition(torch.cat([ei, ei.flip(0)], dim=1), torch.arange(n) // (n // 2), dist.get_rank())
    ex = HaloExchanger(part, ExchangeConfig(codec="fp32", pipeline=True, smoothing=momentum,
                                                      stale_gradients=stale_gradients), 1, ByteCounter())
    halos, grads = [], []
    for t in range(steps):
        ex.set_epoch(t)
        halos.append(ex.forward(torch.full((part.num_owned, 3), t + 1.0), training=True).tolist())
        grad = ex.backward(torch.full((part.num_halo, 3), 10.0 * (t + 1)), part.num_owned)
        grads.append(grad[torch.cat(part.send_index)].tolist())
    ex.drain()
    return {"halos": halos, "grads": grads}


def run_probes(calls: list[tuple[str, tuple]]) -> list:
    """Run several probes of this module in one spawn: ``calls`` = [(function name, args)], results in order."""
    return [globals()[name](*args) for name, args in calls]
