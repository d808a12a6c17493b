"""Distributed full-graph GNN training with compressed halo exchange.

    torchrun --nproc-per-node 4 -m distributed.train --dataset coauthor-cs --model gcn --exchange int1 \\
        --pipeline --sync-every 10

Parses flags, initialises the process group (gloo on CPU; with ``--device cuda``, or ``auto`` on a machine with
GPUs, NCCL with one GPU per rank chosen by LOCAL_RANK), runs `distributed.runner.train_rank`, and writes the
results JSON on rank 0. The CUDA/NCCL placement has not been run on a GPU yet (no GPU was available while it was
written); the CPU/gloo path is the tested one.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from distributed.checkpoint import CheckpointError
from distributed.codecs import CODECS
from distributed.halo import HALO_DROPOUT, ExchangeConfig
from distributed.runner import CRASH_POINTS, QUANT_MODES, DistTrainConfig, train_rank
from distributed.teardown import finish_process_groups, run_rank_main
from gnn.cli import UsageError
from gnn.data.partition import METHODS
from gnn.models import CONVS


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m distributed.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora",
                   help="a registry name (e.g. cora) or a path to a graph file / folder (docs/datasets.md)")
    p.add_argument("--model", default="gcn", choices=list(CONVS))
    p.add_argument("--parts", type=int, default=0, help="partitions (default: the world size; must equal it)")
    p.add_argument("--partition-method", default="metis", choices=METHODS)
    p.add_argument("--exchange", default="fp32", choices=CODECS, help="codec of forward halo rows")
    p.add_argument("--grad-exchange", default="", choices=("", *CODECS), help="codec of halo gradients")
    p.add_argument("--input-exchange", default="auto", choices=("auto", *CODECS),
                   help="codec of the one-time exchange of layer 0's input rows (auto: the narrowest exact one, e.g. "
                        "int1 for binary bag-of-words; a resumed run reuses them from its checkpoint)")
    p.add_argument("--pipeline", action="store_true", help="one-epoch-stale halos overlapped with compute")
    p.add_argument("--sync-every", type=int, default=0, help="with --pipeline: every K-th epoch synchronous (with "
                   "--staleness-budget: at least every K-th)")
    p.add_argument("--staleness-budget", type=float, default=0.0,
                   help="with --pipeline and --sync-every K: Sylvie's Bounded Staleness Adaptor, a synchronous epoch "
                        "whenever the stale epochs' summed relative drift of the boundary rows would exceed this")
    p.add_argument("--smoothing", type=float, default=0.0,
                   help="with --pipeline: PipeGCN's smoothing, stale epochs use a moving average of the stale halo "
                        "rows and halo gradients with this momentum (PipeGCN: 0.95); 0 = off")
    p.add_argument("--fresh-gradients", action="store_true",
                   help="with --pipeline: halo gradients travel synchronously in every step (only the forward "
                        "transfer overlaps compute; by default they are one step stale too)")
    p.add_argument("--delta", action="store_true", help="EF21-style delta coding of forward halo rows")
    p.add_argument("--refresh-every", type=int, default=20, help="with --delta: fp32 refresh period (epochs)")
    p.add_argument("--halo-dropout", default=ExchangeConfig.halo_dropout, choices=HALO_DROPOUT,
                   help="who draws the dropout mask of a halo row (layers >= 1): owner = rows travel dropped, as in "
                        "single-process training; receiver = rows travel undropped and each receiver drops them "
                        "(PipeGCN / Sylvie's order)")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--eval-every", type=int, default=1)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--checkpoint-dir", default="")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="checkpoint every K epochs (0: never) into a fresh step directory of --checkpoint-dir, "
                        "switched in by a hashed manifest (distributed.checkpoint)")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint-dir if it holds a checkpoint "
                   "(else start at epoch 0): safe to pass on every (re)start, e.g. under torchrun --max-restarts")
    p.add_argument("--metrics-log", default="", help="rank 0 appends one JSON line per epoch (with the restart "
                   "attempt) to this file")
    p.add_argument("--quant", default="none", choices=QUANT_MODES,
                   help="quantized training with quant.quantize_ (per-node parameters sharded by owner)")
    p.add_argument("--target-bits", type=float, default=4.0, help="A2Q memory-penalty target (average bits)")
    p.add_argument("--export", default="", help="after training: gather the quantized GCN on rank 0 and write a "
                   "quant.export .qgraph directory here (a2q / degree-aware)")
    p.add_argument("--crash-at-epoch", type=int, default=-1, help=argparse.SUPPRESS)  # fault injection (tests)
    p.add_argument("--crash-marker", default="", help=argparse.SUPPRESS)
    p.add_argument("--crash-point", default="epoch", choices=CRASH_POINTS, help=argparse.SUPPRESS)
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="cuda: NCCL, one GPU per rank (LOCAL_RANK); cpu: gloo; auto: cuda when available")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"),
                   help="float64: parameters, features and exchange (pass --exchange fp64) in float64, to compare a "
                        "run with one process beyond float32 rounding")
    p.add_argument("--timeout-s", type=float, default=300, help="collective timeout: no rank waits forever")
    p.add_argument("--out", default="", help="results JSON (rank 0); default runs/dist_<dataset>_<model>.json")
    return p.parse_args(argv)


def build_config(args: argparse.Namespace, world_size: int) -> DistTrainConfig:
    """The run's config from the flags; ValueError (naming the fix) for values that make no sense."""
    if args.parts < 0:
        raise ValueError(f"--parts {args.parts}; use 0 (the world size) or the world size itself")
    if not (math.isfinite(args.timeout_s) and args.timeout_s > 0):
        raise ValueError(f"--timeout-s {args.timeout_s}; need a finite number of seconds > 0")
    parts = args.parts or world_size
    if parts != world_size:
        raise ValueError(f"--parts {parts} != world size {world_size}: launch with torchrun --nproc-per-node "
                         f"{parts} or pass --parts {world_size}")
    exchange = ExchangeConfig(codec=args.exchange, grad_codec=args.grad_exchange, pipeline=args.pipeline,
                              sync_every=args.sync_every,
                              staleness_budget=args.staleness_budget, delta=args.delta,
                              refresh_every=args.refresh_every, halo_dropout=args.halo_dropout,
                              smoothing=args.smoothing, stale_gradients=not args.fresh_gradients)
    return DistTrainConfig(dataset=args.dataset, arch=args.model, num_parts=parts, exchange=exchange,
                           hidden_dim=args.hidden, num_layers=args.layers, dropout=args.dropout, lr=args.lr,
                           weight_decay=args.weight_decay, epochs=args.epochs,
                           partition_method=args.partition_method, seed=args.seed, eval_every=args.eval_every,
                           log_every=args.log_every, checkpoint_every=args.checkpoint_every,
                           checkpoint_dir=args.checkpoint_dir, resume=args.resume, quant=args.quant,
                           target_bits=args.target_bits, export_path=args.export,
                           metrics_log=args.metrics_log, crash_at_epoch=args.crash_at_epoch,
                           crash_marker=args.crash_marker, crash_point=args.crash_point,
                           device=resolve_device(args.device), dtype=args.dtype, input_codec=args.input_exchange)


def resolve_device(flag: str) -> str:
    """--device auto -> 'cuda' when a GPU is visible, else 'cpu'; an explicit 'cuda' without one is an error."""
    if flag == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if flag == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda but no CUDA device is visible; use --device cpu (gloo)")
    return flag


def init_process_group(timeout: timedelta, backend: str = "gloo") -> None:
    """gloo group from the env:// variables. Under torchrun, the keys go under a per-attempt prefix of the agent's
    store: restarted workers otherwise read the dead attempt's gloo addresses and time out connecting (seen with
    torch 2.13 and ``--max-restarts``)."""
    if "MASTER_ADDR" not in os.environ:  # plain `python -m distributed.train`: one rank, no port to race for
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        return
    if "TORCHELASTIC_RESTART_COUNT" not in os.environ:
        dist.init_process_group(backend, timeout=timeout)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, is_master=False,
                          timeout=timeout)
    store = dist.PrefixStore(f"distributed.train/attempt{os.environ['TORCHELASTIC_RESTART_COUNT']}", store)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    try:
        cfg = build_config(args, world_size)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    backend = "gloo"
    if cfg.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        backend = "nccl"
    init_process_group(timedelta(seconds=args.timeout_s), backend)
    finished = False
    try:
        rank = dist.get_rank()
        try:
            result = train_rank(cfg, log=print if rank == 0 else (lambda *_: None))
        except CheckpointError as exc:  # every rank checks the same files: all refuse alike
            raise UsageError(str(exc)) from None
        if rank == 0:
            result.pop("state_dict")
            result.pop("global_state_dict", None)
            out = Path(args.out or f"runs/dist_{cfg.dataset}_{cfg.arch}_{cfg.exchange.codec}.json")
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(result, indent=1))
            print(f"best val {result['best_val_acc']:.4f} test {result['test_acc_at_best_val']:.4f} -> {out}")
        finished = True
    finally:
        finish_process_groups(wait=finished)
    return 0


if __name__ == "__main__":
    run_rank_main(main)
