"""One rank's training run: load, partition, build, parallelize, train, evaluate, checkpoint.

Loss: each rank sums cross-entropy over its owned training nodes and divides by the GLOBAL number of training
nodes; weight gradients are then summed over ranks, which equals the single-process mean loss gradient.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from distributed.halo import ExchangeConfig
from distributed.parallelize import ParallelConfig, parallelize_gnn
from distributed.partition import METHODS, build_partition, cached_partition_nodes, partition_nodes
from gnn.models import ARCHS, GNN, ModelConfig

QUANT_MODES = ("none",)


@dataclass(frozen=True, kw_only=True)
class DistTrainConfig:
    """A distributed full-graph training run (node classification). ``num_parts`` must equal the world size."""

    dataset: str = "cora"
    arch: str = "gcn"
    num_parts: int = 2
    exchange: ExchangeConfig = field(default_factory=ExchangeConfig)
    hidden_dim: int = 16
    num_layers: int = 2
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 5e-4
    epochs: int = 200
    partition_method: str = "metis"
    seed: int = 0
    eval_every: int = 1
    log_every: int = 10
    checkpoint_every: int = 0
    checkpoint_dir: str = ""
    resume: bool = False
    cache_partitions: bool = True
    quant: str = "none"
    sparse_input: bool = False

    def __post_init__(self) -> None:
        if self.arch not in ARCHS:
            raise ValueError(f"DistTrainConfig: unknown arch {self.arch!r}; valid: {', '.join(ARCHS)}")
        if self.partition_method not in METHODS:
            raise ValueError(f"DistTrainConfig: unknown partition method {self.partition_method!r}; "
                             f"valid: {', '.join(METHODS)}")
        if self.quant not in QUANT_MODES:
            raise ValueError(f"DistTrainConfig: --quant {self.quant!r} is not yet supported with distributed "
                             "training; use --quant none")
        if self.epochs < 1 or self.num_parts < 1 or self.eval_every < 1:
            raise ValueError("DistTrainConfig: epochs, num_parts and eval_every must be >= 1")
        if (self.checkpoint_every or self.resume) and not self.checkpoint_dir:
            raise ValueError("DistTrainConfig: checkpoint_every/resume need checkpoint_dir")


def _local_index(global_idx: Tensor, owned: Tensor, num_nodes: int) -> Tensor:
    """Positions in ``owned`` of the global ids in ``global_idx`` that this rank owns."""
    local = torch.full((num_nodes,), -1, dtype=torch.long)
    local[owned] = torch.arange(owned.numel())
    pos = local[global_idx]
    return pos[pos >= 0]


def _checkpoint(model, opt, epoch: int, path: str, load: bool) -> int:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd, "epoch": torch.tensor(epoch)}
    if not load:
        dcp.save(state, checkpoint_id=path)
        return epoch
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(state["epoch"])


def train_rank(cfg: DistTrainConfig, log=print) -> dict:
    """Run ``cfg`` on this rank of an initialised process group; every rank returns the same summary dict
    (plus ``state_dict`` of the model parameters)."""
    from gnn.data.loaders import load_dataset

    rank, world = dist.get_rank(), dist.get_world_size()
    if world != cfg.num_parts:
        raise ValueError(f"world size {world} != --parts {cfg.num_parts}; launch with --nproc-per-node "
                         f"{cfg.num_parts} or pass --parts {world}")
    g = load_dataset(cfg.dataset, split_seed=cfg.seed)
    if g.task != "node":
        raise ValueError(f"dataset {cfg.dataset!r} is a {g.task!r} task; distributed training needs a node task")
    data, split = g.data, g.splits[0]
    x = data.x.to_dense() if data.x.is_sparse else data.x
    n = data.num_nodes
    if cfg.cache_partitions:
        if rank == 0:
            cached_partition_nodes(cfg.dataset, data.edge_index, n, world, cfg.partition_method, cfg.seed)
        dist.barrier()
        parts = cached_partition_nodes(cfg.dataset, data.edge_index, n, world, cfg.partition_method, cfg.seed)
    else:
        parts = partition_nodes(data.edge_index, n, world, cfg.partition_method, cfg.seed)
    part = build_partition(data.edge_index, parts, rank)
    x_own, y_own = x[part.owned].contiguous(), data.y[part.owned]
    idx = {k: _local_index(getattr(split, k), part.owned, n) for k in ("train", "val", "test")}
    totals = {k: getattr(split, k).numel() for k in idx}

    torch.manual_seed(cfg.seed)
    mcfg = ModelConfig(arch=cfg.arch, in_dim=x.size(1), out_dim=g.num_classes, hidden_dim=cfg.hidden_dim,
                       num_layers=cfg.num_layers, dropout=cfg.dropout)
    model = parallelize_gnn(GNN(mcfg), part, ParallelConfig(exchange=cfg.exchange, seed=cfg.seed,
                                                           sparse_input=cfg.sparse_input),
                            group=dist.new_group(backend=dist.get_backend()))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    ei = part.edge_index
    start_epoch = 0
    if cfg.resume:
        start_epoch = _checkpoint(model, opt, 0, cfg.checkpoint_dir, load=True) + 1
        log(f"resumed from {cfg.checkpoint_dir} at epoch {start_epoch}")

    history = []
    best = {"val": -1.0, "test": 0.0, "epoch": -1}
    for epoch in range(start_epoch, cfg.epochs):
        model.set_epoch(epoch)
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        logits = model(x_own, ei)  # (N_o, C)
        loss = F.cross_entropy(logits[idx["train"]], y_own[idx["train"]], reduction="sum") / totals["train"]
        loss.backward()
        model.sync_gradients()
        opt.step()
        stats = torch.tensor([loss.item(), time.perf_counter() - t0,
                              float(model.counter.epoch_bytes(epoch)), model.counter.seconds[epoch]],
                             dtype=torch.float64)
        dist.all_reduce(stats[:1])
        dist.all_reduce(stats[2:3])
        dist.all_reduce(stats[1:2], op=dist.ReduceOp.MAX)
        dist.all_reduce(stats[3:4], op=dist.ReduceOp.MAX)
        rec = {"epoch": epoch, "loss": stats[0].item(), "epoch_s": stats[1].item(),
               "exchange_bytes": int(stats[2].item()), "comm_wait_s": stats[3].item()}
        if (epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
            rec.update(evaluate(model, x_own, ei, y_own, idx, totals))
            if rec["val_acc"] > best["val"]:
                best = {"val": rec["val_acc"], "test": rec["test_acc"], "epoch": epoch}
        history.append(rec)
        if rank == 0 and cfg.log_every and (epoch % cfg.log_every == 0 or epoch == cfg.epochs - 1):
            acc = f" val {rec['val_acc']:.4f} test {rec['test_acc']:.4f}" if "val_acc" in rec else ""
            log(f"epoch {epoch:4d} loss {rec['loss']:.4f}{acc} {rec['epoch_s'] * 1e3:.1f} ms "
                f"{rec['exchange_bytes'] / 1e6:.3f} MB")
        if cfg.checkpoint_every and (epoch + 1) % cfg.checkpoint_every == 0:
            _checkpoint(model, opt, epoch, cfg.checkpoint_dir, load=False)
    setup = sum(b for (e, _, d), b in model.counter.bytes.items() if d == "setup")
    setup_t = torch.tensor([float(setup)])
    dist.all_reduce(setup_t)
    return {"config": asdict(cfg), "world_size": world, "num_owned": part.num_owned, "num_halo": part.num_halo,
            "history": history, "best_val_acc": best["val"], "test_acc_at_best_val": best["test"],
            "best_epoch": best["epoch"], "setup_bytes": int(setup_t.item()),
            "state_dict": {k: v.detach().clone() for k, v in model.module.state_dict().items()}}


@torch.no_grad()
def evaluate(model, x_own: Tensor, ei: Tensor, y_own: Tensor, idx: dict, totals: dict) -> dict:
    """Global val/test accuracy (correct counts summed over ranks)."""
    model.eval()
    pred = model(x_own, ei).argmax(dim=-1)
    correct = torch.tensor([float((pred[idx[k]] == y_own[idx[k]]).sum()) for k in ("val", "test")])
    dist.all_reduce(correct)
    return {"val_acc": correct[0].item() / max(totals["val"], 1),
            "test_acc": correct[1].item() / max(totals["test"], 1)}


def train_many(cfgs: list[DistTrainConfig]) -> list[dict]:
    """`train_rank` for several configs in one process group (tests and benchmarks pay start-up once)."""
    return [train_rank(c, log=lambda *_: None) for c in cfgs]
