"""One rank's training run: load, partition, build, parallelize, train, evaluate, checkpoint.

Loss: each rank sums cross-entropy over its owned training nodes and divides by the GLOBAL number of training
nodes; weight gradients are then summed over ranks, which equals the single-process mean loss gradient.

Quantized training (``quant != "none"``): ``quant.quantize_`` on the full graph (as `gnn.trainer`), then
`parallelize_gnn` shards the per-node quantizer parameters (`distributed.quantized`); the optimizer has the
quantizer parameter groups of ``quant.qat.api.quant_param_groups`` and the loss adds A2Q's memory penalty, summed over
ranks (`distributed.quantized.quant_penalty_local`). Logged ``loss`` is the task loss (as `gnn.trainer`).

Checkpoints (``checkpoint_every``, ``resume``; `distributed.checkpoint`): model + optimizer through
torch.distributed.checkpoint, and per rank the RNG states, halo-exchange state, best record and history, in a fresh
step directory switched in by a hashed manifest; a resumed run equals the uninterrupted one bitwise, dropout included.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor

from distributed import checkpoint as ckpt
from distributed.codecs import CODECS
from distributed.halo import ExchangeConfig
from distributed.parallelize import ParallelConfig, parallelize_gnn
from distributed.partition import build_partition
from distributed.quantized import (
    SHARDED_ATTR,
    gather_quantized_model,
    global_state_dict,
    quant_penalty_local,
    to_global,
)
from gnn.data.partition import METHODS, cached_partition_nodes, partition_nodes
from gnn.models import CONVS, GNN, ModelConfig
from gnn.trainer import sparse_input_pays

QUANT_MODES = ("none", "a2q", "degree-aware", "dq-int8", "dq-int4")
DEVICES = ("cpu", "cuda")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
CRASH_POINTS = ("epoch", "checkpoint")


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
    target_bits: float = 4.0
    export_path: str = ""
    # None: sparse COO input when the features are large and sparse and layer 0 takes them unquantized (the rule of
    # gnn.trainer.wants_sparse_input); True/False force it (True fails if layer 0 would densify them)
    sparse_input: bool | None = None
    # codec of the one-time exchange of layer 0's input halo rows: "auto" = the narrowest exact one (ParallelConfig)
    input_codec: str = "auto"
    metrics_log: str = ""
    crash_at_epoch: int = -1
    crash_marker: str = ""
    crash_point: str = "epoch"  # "epoch" (raise before the forward) or "checkpoint" (kill -9 inside the write)
    device: str = "cpu"  # "cuda": every rank uses its current CUDA device (torch.cuda.set_device), with NCCL
    # "float64": parameters, features and every full-precision exchange in float64 (exchange codec fp64), so a run can
    # be compared with one process beyond float32 summation-order noise; "float32" is the training default
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.arch not in CONVS:
            raise ValueError(f"DistTrainConfig: unknown arch {self.arch!r}; valid: {', '.join(CONVS)}")
        if self.partition_method not in METHODS:
            raise ValueError(f"DistTrainConfig: unknown partition method {self.partition_method!r}; "
                             f"valid: {', '.join(METHODS)}")
        if self.input_codec != "auto" and self.input_codec not in CODECS:
            raise ValueError(f"DistTrainConfig: unknown input_codec {self.input_codec!r}; valid: auto, "
                             f"{', '.join(CODECS)}")
        if self.quant not in QUANT_MODES:
            raise ValueError(f"DistTrainConfig: unknown --quant {self.quant!r}; valid: {', '.join(QUANT_MODES)}")
        if self.export_path and (self.quant not in ("a2q", "degree-aware") or self.arch != "gcn"):
            raise ValueError("DistTrainConfig: export_path needs arch 'gcn' and quant 'a2q' or 'degree-aware' "
                             "(the integer golden model of quant.export); drop --export or change them")
        if self.dtype not in DTYPES:
            raise ValueError(f"DistTrainConfig: unknown dtype {self.dtype!r}; valid: {', '.join(DTYPES)}")
        if self.dtype == "float64" and (self.exchange.codec != "fp64" or self.exchange.backward_codec != "fp64"):
            raise ValueError("DistTrainConfig: dtype 'float64' keeps halo rows in float64; use exchange codec 'fp64' "
                             f"for both directions (got {self.exchange.codec!r} / {self.exchange.backward_codec!r})")
        if self.dtype == "float64" and self.export_path:
            raise ValueError("DistTrainConfig: export_path needs a float32 run (the export checks the trained float32 "
                             "model); drop --export or use dtype 'float32'")
        if self.device not in DEVICES:
            raise ValueError(f"DistTrainConfig: unknown device {self.device!r}; valid: {', '.join(DEVICES)}")
        if self.device == "cuda" and self.quant != "none":
            raise ValueError("DistTrainConfig: quantized distributed training keeps its per-node quantizer shards "
                             "on CPU ranks (gloo); use device 'cpu' with --quant")
        for name in ("epochs", "num_parts", "eval_every", "hidden_dim", "num_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"DistTrainConfig: {name}={getattr(self, name)}; must be >= 1")
        for name in ("log_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"DistTrainConfig: {name}={getattr(self, name)}; use 0 (off) or K >= 1")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"DistTrainConfig: lr={self.lr}; need a finite learning rate > 0")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"DistTrainConfig: weight_decay={self.weight_decay}; need a finite value >= 0")
        if not 0 <= self.dropout < 1:  # also refuses nan
            raise ValueError(f"DistTrainConfig: dropout={self.dropout}; need 0 <= dropout < 1")
        if not (math.isfinite(self.target_bits) and self.target_bits > 0):
            raise ValueError(f"DistTrainConfig: target_bits={self.target_bits}; need a finite value > 0")
        if self.crash_point not in CRASH_POINTS:
            raise ValueError(f"DistTrainConfig: unknown crash_point {self.crash_point!r}; valid: "
                             f"{', '.join(CRASH_POINTS)}")
        if self.crash_at_epoch >= 0 and not self.crash_marker:
            raise ValueError("DistTrainConfig: crash_at_epoch needs crash_marker (the crash happens once)")
        if self.crash_at_epoch >= 0 and self.crash_point == "checkpoint" and not self.checkpoint_every:
            raise ValueError("DistTrainConfig: crash_point 'checkpoint' needs checkpoint_every")
        if (self.checkpoint_every or self.resume) and not self.checkpoint_dir:
            raise ValueError("DistTrainConfig: checkpoint_every/resume need checkpoint_dir")
        if self.checkpoint_dir and not (self.checkpoint_every or self.resume):
            raise ValueError("DistTrainConfig: checkpoint_dir without checkpoint_every or resume does nothing; "
                             "pass --checkpoint-every K and/or --resume")


def _local_index(global_idx: Tensor, owned: Tensor, num_nodes: int) -> Tensor:
    """Positions in ``owned`` of the global ids in ``global_idx`` that this rank owns."""
    local = torch.full((num_nodes,), -1, dtype=torch.long)
    local[owned] = torch.arange(owned.numel())
    pos = local[global_idx]
    return pos[pos >= 0]


def check_layout(world_size: int, num_parts: int, num_nodes: int | None = None) -> None:
    """Raise a ValueError that says what to do when the launch does not fit the partitioning."""
    if world_size != num_parts:
        raise ValueError(f"world size {world_size} != --parts {num_parts}; launch with --nproc-per-node "
                         f"{num_parts} or pass --parts {world_size}")
    if num_nodes is not None and num_parts > num_nodes:
        raise ValueError(f"{num_parts} partitions for a graph of {num_nodes} nodes: every rank needs at least one "
                         f"node; launch at most {num_nodes} ranks")


def _sharded_keys(model) -> dict[str, torch.Size]:
    """FQNs (in `get_state_dict` naming) of per-node quantizer parameters -> their local (owned) shape."""
    return {n: p.shape for n, p in model.named_parameters() if getattr(p, SHARDED_ATTR, False)}


def _globalize(msd: dict, osd: dict, model, load: bool) -> None:
    """In place: sharded entries (model + optimizer state) become (N, ...) tensors in global node order, so that
    every rank checkpoints the same full tensor (placeholders when ``load``)."""
    n = model.shard.num_nodes if model.shard is not None else 0

    def convert(t: Tensor) -> Tensor:
        return torch.empty((n, *t.shape[1:]), dtype=t.dtype) if load else to_global(t, model.shard)

    for k, shape in _sharded_keys(model).items():
        msd[k] = convert(msd[k])
        if k in osd.get("state", {}):  # a new dict: the optimizer's own state must stay untouched
            osd["state"][k] = {name: convert(v) if isinstance(v, Tensor) and v.shape == shape else v
                               for name, v in osd["state"][k].items()}


def _localize(msd: dict, osd: dict, model) -> None:
    owned = model.part.owned
    for k, shape in _sharded_keys(model).items():
        msd[k] = msd[k][owned].clone()
        if k in osd.get("state", {}):
            osd["state"][k] = {name: v[owned].clone() if isinstance(v, Tensor) and v.dim() == len(shape)
                               and v.size(0) == model.shard.num_nodes else v
                               for name, v in osd["state"][k].items()}


def _dcp_state(model, opt, load: bool) -> dict:
    """(model, optimizer) as a torch.distributed.checkpoint state dict. Per-node quantizer parameters are saved as
    full (N, ...) tensors (gathered; placeholders when ``load``) and cut back to the owned rows by `_set_dcp_state`."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, opt)
    _globalize(msd, osd, model, load)
    return {"model": msd, "optim": osd}


def _set_dcp_state(model, opt, state: dict) -> None:
    from torch.distributed.checkpoint.state_dict import set_state_dict

    _localize(state["model"], state["optim"], model)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])


# Settings a resumed run must share with the checkpoint (epochs, logging and checkpoint cadence may change).
RESUME_FIELDS = ("dataset", "arch", "num_parts", "exchange", "hidden_dim", "num_layers", "dropout", "lr",
                 "weight_decay", "partition_method", "seed", "quant", "target_bits", "sparse_input", "device", "dtype",
                 "input_codec")


def resume_fingerprint(cfg: DistTrainConfig) -> dict:
    """The JSON-able settings of ``cfg`` that a checkpoint records and a resume must match."""
    d = asdict(cfg)
    return {k: d[k] for k in RESUME_FIELDS}


def _resume(cfg: DistTrainConfig, model, opt, device: torch.device, log) -> dict | None:
    """This rank's run state from ``cfg.checkpoint_dir`` after loading model + optimizer (None: start at epoch 0).
    A run that does not resume refuses a directory that already holds a checkpoint (it would mix two runs)."""
    ckdir = Path(cfg.checkpoint_dir)
    manifest = ckpt.read_manifest(ckdir)
    if manifest is None:
        if cfg.resume:
            log(f"no checkpoint in {ckdir} yet: starting at epoch 0")
        return None
    if not cfg.resume:
        raise ckpt.CheckpointError(f"{ckdir} holds a checkpoint (epoch {manifest['epoch']}); pass --resume to "
                                   "continue it or choose an empty --checkpoint-dir")
    state = _dcp_state(model, opt, load=True)
    run = ckpt.load_step(ckdir, manifest, state, resume_fingerprint(cfg))
    _set_dcp_state(model, opt, state)
    ckpt.restore_run_state(model, run, device)
    log(f"resumed from {ckdir / manifest['step']} at epoch {manifest['epoch'] + 1}")
    return run


def _save(cfg: DistTrainConfig, model, opt, epoch: int, best: dict, history: list, device: torch.device) -> None:
    """Checkpoint the end of ``epoch`` (`distributed.checkpoint.save_step`)."""
    run = ckpt.capture_run_state(model, epoch, best, history, device)  # first: resolves transfers in flight
    ckpt.save_step(Path(cfg.checkpoint_dir), epoch, _dcp_state(model, opt, load=False), run,
                   resume_fingerprint(cfg), before_switch=lambda: _maybe_crash(cfg, epoch, dist.get_rank(),
                                                                                "checkpoint"))


def _rank_device(cfg: DistTrainConfig) -> torch.device:
    """CPU, or this rank's current CUDA device (set by the launcher from LOCAL_RANK) under the NCCL backend."""
    if cfg.device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("DistTrainConfig: device 'cuda' but torch.cuda.is_available() is False; use device "
                           "'cpu' (gloo) on this machine")
    if dist.get_backend() != "nccl":
        raise RuntimeError(f"DistTrainConfig: device 'cuda' needs the nccl backend, not {dist.get_backend()!r}")
    return torch.device("cuda", torch.cuda.current_device())


def _maybe_crash(cfg: DistTrainConfig, epoch: int, rank: int, point: str) -> None:
    """Fault injection for the restart tests: rank 1 (or 0 alone) fails once at ``crash_at_epoch``, at
    ``crash_point`` "epoch" (raises before the epoch's forward) or "checkpoint" (kill -9 of itself inside the
    epoch's checkpoint write, after its files and before the manifest switch); the marker file records that the
    crash happened, so the restarted job runs through."""
    if (point != cfg.crash_point or epoch != cfg.crash_at_epoch
            or rank != min(1, dist.get_world_size() - 1)):
        return
    marker = Path(cfg.crash_marker)
    if marker.exists():
        return
    marker.write_text(f"crashed at epoch {epoch} ({point})\n")
    if point == "checkpoint":
        print(f"injected kill -9 in the checkpoint of epoch {epoch} on rank {rank}", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"injected crash at epoch {epoch} on rank {rank} (marker {marker})")


def train_rank(cfg: DistTrainConfig, log=print) -> dict:
    """Run ``cfg`` on this rank of an initialised process group; every rank returns the same summary dict
    (plus ``state_dict`` of the model parameters). ``cfg.dtype`` is the default dtype while it runs (so the model,
    its quantizers and every buffer they create take it); the previous default is restored after."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(DTYPES[cfg.dtype])
    try:
        return _train_rank(cfg, log)
    finally:
        torch.set_default_dtype(previous)


def _epoch_record(model, epoch: int, loss: float, seconds: float, device: torch.device) -> dict:
    """The epoch's log record, the same on every rank: loss and exchanged bytes summed over ranks, the epoch's
    and the communication wait's seconds the slowest rank's."""
    stats = torch.tensor([loss, seconds, float(model.counter.epoch_bytes(epoch)), model.counter.seconds[epoch]],
                         dtype=torch.float64, device=device)
    dist.all_reduce(stats[:1])
    dist.all_reduce(stats[2:3])
    dist.all_reduce(stats[1:2], op=dist.ReduceOp.MAX)
    dist.all_reduce(stats[3:4], op=dist.ReduceOp.MAX)
    rec = {"epoch": epoch, "loss": stats[0].item(), "epoch_s": stats[1].item(),
           "exchange_bytes": int(stats[2].item()), "comm_wait_s": stats[3].item(), "stale_halos": model.stale}
    if model.adaptor is not None:  # the boundary-row drift the adaptor decided this epoch's mode from
        rec["drift"] = model.adaptor.history[-1]["drift"]
    return rec


def _train_rank(cfg: DistTrainConfig, log) -> dict:
    from gnn.data.loaders import load_dataset

    rank, world = dist.get_rank(), dist.get_world_size()
    check_layout(world, cfg.num_parts)
    device = _rank_device(cfg)
    if rank != 0:  # rank 0 first: PyG may process the raw files, and concurrent readers see half-written ones
        dist.barrier()
    g = load_dataset(cfg.dataset, split_seed=cfg.seed)
    if rank == 0:
        dist.barrier()
    if g.task != "node":
        raise ValueError(f"dataset {cfg.dataset!r} is a {g.task!r} task; distributed training needs a node task")
    data, split = g.data, g.splits[0]
    x = (data.x.to_dense() if data.x.is_sparse else data.x).to(DTYPES[cfg.dtype])
    n = data.num_nodes
    check_layout(world, cfg.num_parts, n)  # on every rank, before the partition barrier
    if cfg.cache_partitions:
        if rank == 0:
            cached_partition_nodes(cfg.dataset, data.edge_index, n, world, cfg.partition_method, cfg.seed)
        dist.barrier()
        parts = cached_partition_nodes(cfg.dataset, data.edge_index, n, world, cfg.partition_method, cfg.seed)
    else:
        parts = partition_nodes(data.edge_index, n, world, cfg.partition_method, cfg.seed)
    part = build_partition(data.edge_index, parts, rank)
    x_own, y_own = x[part.owned].contiguous().to(device), data.y[part.owned].to(device)
    idx = {k: _local_index(getattr(split, k), part.owned, n).to(device) for k in ("train", "val", "test")}
    part = part.to(device)
    totals = {k: getattr(split, k).numel() for k in idx}

    torch.manual_seed(cfg.seed)
    mcfg = ModelConfig(arch=cfg.arch, in_dim=x.size(1), out_dim=g.num_classes, hidden_dim=cfg.hidden_dim,
                       num_layers=cfg.num_layers, dropout=cfg.dropout)
    gnn = GNN(mcfg).to(device)
    full_data = None
    if cfg.quant != "none":  # calibrated on the full graph, identically on every rank (see distributed.quantized)
        from quant.qat.api import QuantConfig, quantize_

        full_data = data.clone()
        full_data.x = x
        # A2Q's penalty: the exact budget projection (quant.qat.budget) needs every rank's bits and is not sharded yet
        quantize_(gnn, QuantConfig(method=cfg.quant, target_bits=cfg.target_bits, bits_control="penalty"), full_data)
    sparse_input = sparse_input_pays(gnn, x) if cfg.sparse_input is None else cfg.sparse_input
    if sparse_input:
        x_own = x_own.to_sparse().coalesce()  # (N_o, F) COO: dropout and the first linear map cost O(nnz)
    model = parallelize_gnn(gnn, part, ParallelConfig(exchange=cfg.exchange, seed=cfg.seed,
                                                      sparse_input=sparse_input, input_codec=cfg.input_codec),
                            group=dist.new_group(backend=dist.get_backend()))
    opt = _optimizer(model, cfg)
    ei = part.edge_index
    start_epoch, history, best = 0, [], {"val": -1.0, "test": 0.0, "epoch": -1}
    run = _resume(cfg, model, opt, device, log) if cfg.checkpoint_dir else None
    if run is not None:
        start_epoch, history, best = run["epoch"] + 1, run["history"], run["best"]
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    loop_start = time.perf_counter()
    for epoch in range(start_epoch, cfg.epochs):
        model.set_epoch(epoch)
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        _maybe_crash(cfg, epoch, rank, "epoch")
        logits = model(x_own, ei)  # (N_o, C)
        loss = F.cross_entropy(logits[idx["train"]], y_own[idx["train"]], reduction="sum") / totals["train"]
        penalty = quant_penalty_local(model.module) if cfg.quant != "none" else 0.0
        (loss + penalty).backward()
        opt.step()
        rec = _epoch_record(model, epoch, loss.item(), time.perf_counter() - t0, device)
        if (epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
            rec.update(evaluate(model, x_own, ei, y_own, idx, totals))
            if rec["val_acc"] > best["val"]:
                best = {"val": rec["val_acc"], "test": rec["test_acc"], "epoch": epoch}
        history.append(rec)
        if rank == 0 and cfg.metrics_log:
            with open(cfg.metrics_log, "a") as f:
                f.write(json.dumps({**rec, "attempt": attempt}) + "\n")
        if rank == 0 and cfg.log_every and (epoch % cfg.log_every == 0 or epoch == cfg.epochs - 1):
            acc = f" val {rec['val_acc']:.4f} test {rec['test_acc']:.4f}" if "val_acc" in rec else ""
            log(f"epoch {epoch:4d} loss {rec['loss']:.4f}{acc} {rec['epoch_s'] * 1e3:.1f} ms "
                f"{rec['exchange_bytes'] / 1e6:.3f} MB")
        if cfg.checkpoint_every and (epoch + 1) % cfg.checkpoint_every == 0:
            _save(cfg, model, opt, epoch, best, history, device)
    model.drain()
    loop_s = time.perf_counter() - loop_start  # training, evaluation and checkpoints of this attempt's epochs
    setup = sum(b for (e, _, d), b in model.counter.bytes.items() if d == "setup")
    setup_t = torch.tensor([float(setup)], device=device)
    dist.all_reduce(setup_t)
    out = {"config": asdict(cfg), "sparse_input": sparse_input, "world_size": world, "num_owned": part.num_owned,
           "num_halo": part.num_halo,
           "history": history, "best_val_acc": best["val"], "test_acc_at_best_val": best["test"],
           "best_epoch": best["epoch"], "setup_bytes": int(setup_t.item()), "loop_s": loop_s,
           "synchronous_epochs": sum(not r["stale_halos"] for r in history),
           "input_codec": model.input_codec or "reused from the checkpoint",
           "state_dict": {k: v.detach().cpu().clone() for k, v in model.module.state_dict().items()}}
    if cfg.quant != "none":
        out.update(_finish_quantized(model, cfg, g, full_data, log))
    dist.barrier(group=model.group)  # the run's exchange group: drained above, released here (train_many makes many)
    dist.destroy_process_group(model.group)
    return out


def _optimizer(model, cfg: DistTrainConfig) -> torch.optim.Optimizer:
    """Adam over the model parameters, plus quant's quantizer groups (own lrs, no weight decay) when quantized."""
    if cfg.quant == "none":
        return torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    from quant.qat.api import quant_config_of, quant_param_groups

    qgroups = quant_param_groups(model.module, quant_config_of(model.module), cfg.lr)
    qids = {id(p) for grp in qgroups for p in grp["params"]}
    base = [p for p in model.parameters() if id(p) not in qids]
    return torch.optim.Adam([{"params": base, "lr": cfg.lr, "weight_decay": cfg.weight_decay}] + qgroups)


def _finish_quantized(model, cfg: DistTrainConfig, g, full_data, log) -> dict:
    """Gather the single-process quantized model on rank 0: its quant summary and, with ``export_path``, the
    accelerator export (``quant.export.export_model``). Every rank returns the global state dict."""
    from quant.qat.api import quant_summary

    state = global_state_dict(model.module, model.shard)
    single = gather_quantized_model(model.module, model.shard, full_data)
    extra = {"global_state_dict": state}
    if single is not None:
        extra["quant_summary"] = quant_summary(single)
        if cfg.export_path:
            from quant.export import export_model

            graph = dataclasses.replace(g, data=full_data)  # dense features, as the training saw them
            path = export_model(single, graph, cfg.export_path, overwrite=True,
                                provenance={"trainer": "distributed.train", "world_size": dist.get_world_size()})
            extra["export_path"] = str(path)
            log(f"exported the gathered quantized model to {path}")
    return extra


@torch.no_grad()
def evaluate(model, x_own: Tensor, ei: Tensor, y_own: Tensor, idx: dict, totals: dict) -> dict:
    """Global val/test accuracy (correct counts summed over ranks)."""
    model.eval()
    pred = model(x_own, ei).argmax(dim=-1)
    correct = torch.tensor([float((pred[idx[k]] == y_own[idx[k]]).sum()) for k in ("val", "test")],
                           device=pred.device)
    dist.all_reduce(correct)
    return {"val_acc": correct[0].item() / max(totals["val"], 1),
            "test_acc": correct[1].item() / max(totals["test"], 1)}


def train_many(cfgs: list[DistTrainConfig], progress: bool = False) -> list[dict]:
    """`train_rank` for several configs in one process group (tests and benchmarks pay start-up once). With
    ``progress``, rank 0 prints one line per finished config (long benchmark spawns)."""
    out = []
    for i, c in enumerate(cfgs):
        t0 = time.perf_counter()
        out.append(train_rank(c, log=lambda *_: None))
        if progress and dist.get_rank() == 0:
            r = out[-1]
            print(f"[{i + 1}/{len(cfgs)}] {c.dataset} {c.arch} {c.exchange.codec} quant={c.quant} seed {c.seed}: "
                  f"best val {r['best_val_acc']:.4f} test {r['test_acc_at_best_val']:.4f} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return out
