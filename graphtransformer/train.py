"""Train a graph transformer on a node-classification dataset; val-selected test accuracy over seeds -> JSON.

Single process:   python -m graphtransformer.train --dataset cora --attention interleaved
Sequence parallel: torchrun --nproc-per-node 4 -m graphtransformer.train --dataset coauthor-cs \\
                       --attention interleaved --cp 2 --hp 2 [--fsdp] [--checkpoint-layers 0,1]
(gloo on CPU). Quantization-aware training (single process): --quant a2q|degree-aware|dq-int8|dq-int4
[--target-bits 4]; the average feature bits go into the results JSON.
Distributed runs relabel nodes in METIS-cluster order (one cluster per rank) so that each rank's
contiguous chunk is a cluster and the halo exchange of sparse layers stays small; accuracies are unaffected.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, replace
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist

from distributed.checkpoint import CheckpointError
from distributed.codecs import CODECS
from distributed.teardown import finish_process_groups, run_rank_main
from distributed.train import init_process_group
from gnn.cli import UsageError
from graphtransformer.checkpointing import CheckpointConfig, SeedCheckpoints, ensure_process_group
from graphtransformer.cluster import metis_relabeling
from graphtransformer.model import BRANCH_ACTIVATIONS, GraphTransformer
from graphtransformer.training import (
    ATTENTION_CHOICES,
    OPTIMIZERS,
    PE_CHOICES,
    Rows,
    TrainConfig,
    model_config,
    prepare,
    single_process_rows,
    summarize,
    train_seed,
)
from quant.qat.config import METHODS as QUANT_METHODS
from quant.qat.config import QuantConfig


def _parse() -> argparse.Namespace:
    defaults = TrainConfig()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dataset", default="cora", help="a node-task registry name (e.g. cora, coauthor-cs) or a path to "
                   "a graph file (docs/datasets.md)")
    p.add_argument("--attention", default=defaults.attention, choices=ATTENTION_CHOICES,
                   help="interleaved = (sparse, sparse, dense) per 3 layers")
    p.add_argument("--layers", type=int, default=defaults.num_layers)
    p.add_argument("--hidden", type=int, default=defaults.hidden_dim)
    p.add_argument("--heads", type=int, default=defaults.num_heads)
    p.add_argument("--dense-every", type=int, default=0, help="every n-th step all layers dense (0 = off)")
    p.add_argument("--pe", default=defaults.pe, choices=PE_CHOICES)
    p.add_argument("--max-degree", type=int, default=defaults.max_degree,
                   help="degree-embedding rows: in-degrees clipped to it (0 = one learned vector added to every node, "
                        "no degree information; --no-degree-embedding for none)")
    p.add_argument("--no-degree-embedding", dest="degree_embedding", action="store_false",
                   default=defaults.degree_embedding, help="add no degree embedding to the input projection")
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--patience", type=int, default=None,
                   help=f"early-stopping patience in epochs (default {defaults.patience}; with --quant: --epochs, "
                        f"because quantized models start improving later, around epoch 50 on Cora)")
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--weight-decay", type=float, default=defaults.weight_decay)
    p.add_argument("--optimizer", default=defaults.optimizer, choices=OPTIMIZERS)
    p.add_argument("--dropout", type=float, default=defaults.dropout)
    p.add_argument("--input-dropout", type=float, default=defaults.input_dropout)
    p.add_argument("--attn-dropout", type=float, default=defaults.attn_dropout, help="sparse layers, 1 process")
    p.add_argument("--branch-activation", default=defaults.branch_activation, choices=tuple(BRANCH_ACTIVATIONS),
                   help="nonlinearity on every attention branch output (GAT uses elu)")
    p.add_argument("--layer-scale", type=float, default=defaults.layer_scale,
                   help="> 0: scale every residual branch by a learned per-channel vector starting at this value "
                        "(LayerScale; e.g. 0.1); 0 = off")
    p.add_argument("--ema-decay", type=float, default=defaults.ema_decay,
                   help="> 0: evaluate and select on a moving average of the weights (e.g. 0.9); 0 = off")
    p.add_argument("--label-smoothing", type=float, default=defaults.label_smoothing,
                   help="training-loss label smoothing in [0, 1) (selection uses plain cross-entropy); 0 = off")
    p.add_argument("--ffn-ratio", type=int, default=defaults.ffn_ratio,
                   help="feed-forward width / hidden (0 = attention-only layers)")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds (0..n-1)")
    p.add_argument("--cp", type=int, default=1, help="ring (context-parallel) degree")
    p.add_argument("--hp", type=int, default=1, help="Ulysses (head-parallel) degree")
    p.add_argument("--sparse-comm", default="halo", choices=("halo", "ring"))
    p.add_argument("--ring-window", type=int, default=0,
                   help="Double-Ring: inner rings of this many --cp ranks, an outer ring between them (0: one ring)")
    p.add_argument("--halo-codec", default="fp32", choices=CODECS,
                   help="codec of the halo K/V rows of sparse layers (distributed.codecs; int1 = one bit per value)")
    p.add_argument("--halo-grad-codec", default="", choices=("", *CODECS),
                   help="codec of their gradients on the way back (default: --halo-codec)")
    p.add_argument("--fsdp", action="store_true", help="FSDP2-shard parameters/grads/optimizer state")
    p.add_argument("--checkpoint-layers", default="", help="comma-separated layers to activation-checkpoint")
    p.add_argument("--quant", default="none", choices=("none", *QUANT_METHODS),
                   help="quantization-aware training through quant.quantize_ (single process only)")
    p.add_argument("--target-bits", type=float, default=QuantConfig.target_bits,
                   help="average feature bits (a2q, degree-aware)")
    p.add_argument("--penalty-weight", type=float, default=QuantConfig.penalty_weight,
                   help="a of the memory penalty a*relu(M-M_t)^2")
    p.add_argument("--checkpoint-dir", default="", help="checkpoint every --checkpoint-every epochs into this folder "
                   "(one sub-folder per seed; torch.distributed.checkpoint, crash-consistent)")
    p.add_argument("--checkpoint-every", type=int, default=10, help="epochs between checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from --checkpoint-dir (finished seeds are kept, "
                   "the running one resumes after its last checkpoint); with torchrun --max-restarts a crashed job "
                   "restarts into it")
    p.add_argument("--crash-at-epoch", type=int, default=-1, help=argparse.SUPPRESS)  # fault injection (tests)
    p.add_argument("--crash-marker", default="", help=argparse.SUPPRESS)
    p.add_argument("--export", default=None, metavar="PATH",
                   help="with --quant a2q|degree-aware: write the last seed's final model as a .qgraph export")
    p.add_argument("--device", default="cpu",
                   help="cpu or cuda[:i] (single process; distributed runs are gloo ranks on CPU)")
    p.add_argument("--out", default=None, help="results JSON (default runs/gt_<dataset>_<attention>.json)")
    return p.parse_args()


def _reorder(data, split, parts: int):
    """Relabel nodes cluster-major (METIS, ``parts`` clusters). Returns new (data, split)."""
    order, inverse = metis_relabeling(data.edge_index, data.num_nodes, parts)
    data = data.clone()
    data.x, data.y, data.edge_index = data.x[order], data.y[order], inverse[data.edge_index]
    return data, replace(split, train=inverse[split.train], val=inverse[split.val], test=inverse[split.test])


def _distributed_rows(graph, args) -> tuple:
    from graphtransformer.parallel import (
        SequenceParallelConfig,
        build_mesh,
        shard_graph,
        shard_rows,
        unshard_rows,
    )

    sp = SequenceParallelConfig(cp=args.cp, hp=args.hp, sparse_comm=args.sparse_comm, fsdp=args.fsdp,
                                ring_window=args.ring_window, halo_codec=args.halo_codec,
                                halo_grad_codec=args.halo_grad_codec,
                                checkpoint_layers=tuple(int(i) for i in args.checkpoint_layers.split(",") if i))
    mesh = build_mesh(sp)
    sharded = shard_graph(graph, sp, dist.get_rank())
    return Rows(sharded, lambda t: shard_rows(t, sharded), lambda t: unshard_rows(t, sharded)), mesh, sp


def _patience(args: argparse.Namespace) -> int:
    if args.patience is not None:
        return args.patience
    return args.epochs if args.quant != "none" else TrainConfig().patience


def main() -> None:
    args = _parse()
    if args.seeds < 1:  # bad input: one line and exit status 2, before any data is loaded
        raise UsageError(f"--seeds {args.seeds}: need at least 1 (seeds 0..n-1 are trained)")
    from gnn.data.loaders import load_dataset

    cfg = TrainConfig(attention=args.attention, num_layers=args.layers, hidden_dim=args.hidden, num_heads=args.heads,
                      dense_every=args.dense_every, dropout=args.dropout, input_dropout=args.input_dropout,
                      attn_dropout=args.attn_dropout, ffn_ratio=args.ffn_ratio,
                      branch_activation=args.branch_activation, layer_scale=args.layer_scale, ema_decay=args.ema_decay,
                      label_smoothing=args.label_smoothing, pe=args.pe,
                      max_degree=args.max_degree, degree_embedding=args.degree_embedding, lr=args.lr,
                      weight_decay=args.weight_decay,
                      optimizer=args.optimizer, epochs=args.epochs, patience=_patience(args))
    distributed = args.cp * args.hp > 1 or int(os.environ.get("WORLD_SIZE", "1")) > 1
    if args.export and args.quant not in ("a2q", "degree-aware"):
        raise UsageError("--export writes learned bitwidths; add --quant a2q or --quant degree-aware")
    if args.export and Path(args.export).exists():
        raise UsageError(f"--export {args.export} exists; remove it or choose another path")
    device = torch.device(args.device)
    if device.type != "cpu" and distributed:
        raise UsageError(f"--device {args.device} runs single-process training only; distributed ranks (gloo) "
                         "run on CPU: drop --device or --cp/--hp")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda but PyTorch sees no CUDA device; use --device cpu")
    if distributed and args.quant != "none":
        raise UsageError("--quant runs single-process only (per-node quantizer tables are indexed by global "
                         "node id); drop --quant or run with python -m graphtransformer.train and --cp 1 --hp 1")
    if args.checkpoint_dir and args.quant != "none":
        raise UsageError("--checkpoint-dir covers the unquantized training loop; drop --quant or the "
                         "checkpointing")
    if args.checkpoint_every < 1:
        raise UsageError(f"--checkpoint-every {args.checkpoint_every}: checkpoint after every K >= 1 epochs")
    if distributed and args.ema_decay > 0:
        raise UsageError("--ema-decay is single-process only (the weight average of FSDP2-sharded and "
                         "replicated parameters is not yet tested against one process); drop --ema-decay or run "
                         "with --cp 1 --hp 1")
    if distributed:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("WORLD_SIZE", "1"))))
        init_process_group(timedelta(seconds=COLLECTIVE_TIMEOUT_S))  # a restarted attempt: a fresh rendezvous
    gd = load_dataset(args.dataset)
    if gd.task != "node" or gd.data.x is None:
        raise ValueError(f"train: dataset {args.dataset!r} is not a node-classification dataset with features")
    data, split = gd.data, gd.splits[0]
    if distributed:
        data, split = _reorder(data, split, args.cp * args.hp)
    graph, pe = prepare(data, cfg)
    if distributed:
        from graphtransformer.parallel import broadcast_parameters, parallelize_graph_transformer

        rows, mesh, sp = _distributed_rows(graph, args)
    else:
        graph = graph.to(device)
        rows = single_process_rows(graph)
    checkpoints = _checkpoint_config(args, distributed)
    records = []
    for seed in range(args.seeds):
        seed_ck = SeedCheckpoints(checkpoints, seed) if checkpoints is not None else None
        done = seed_ck.done_record() if seed_ck is not None and args.resume else None
        if done is not None:  # finished before a restart
            records.append(done)
            continue
        torch.manual_seed(seed)
        model = GraphTransformer(model_config(cfg, gd.num_features, gd.num_classes)).to(device)
        if distributed:
            broadcast_parameters(model)  # before FSDP2 shards them
            model = parallelize_graph_transformer(model, mesh, sp)
        if args.quant != "none":
            from graphtransformer.quantize import train_quantized_seed

            qcfg = QuantConfig(method=args.quant, target_bits=args.target_bits, penalty_weight=args.penalty_weight,
                               bits_control="penalty")  # A2Q's penalty, as its RESULTS.md runs trained
            last = seed == args.seeds - 1
            records.append(train_quantized_seed(model, graph, pe, data, split, cfg, seed, qcfg,
                                                export_to=args.export if last else None, dataset=args.dataset))
        else:
            try:
                records.append(train_seed(model, data, split, pe, rows, cfg, seed, checkpoints=seed_ck))
            except CheckpointError as exc:  # every rank checks the same files: all refuse alike, one line, exit 2
                raise UsageError(str(exc)) from None
            if seed_ck is not None:
                seed_ck.finish(records[-1])
    result = {"dataset": args.dataset, "device": str(device), "config": asdict(cfg), "schedule": list(cfg.schedule()),
              "quant": args.quant,
              "cp": args.cp, "hp": args.hp, "halo_codec": args.halo_codec,
              "halo_grad_codec": args.halo_grad_codec or args.halo_codec,
              "world_size": dist.get_world_size() if distributed else 1,
              "seeds": records, **summarize(records)}
    if not distributed or dist.get_rank() == 0:
        out = Path(args.out or f"runs/gt_{args.dataset}_{args.attention}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=1))
        print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=1))
    if distributed or checkpoints is not None:
        finish_process_groups()


COLLECTIVE_TIMEOUT_S = 300  # no rank waits forever on a peer that died

# Settings that do not change what a resumed run computes (the rest must match the checkpoint's).
NOT_FINGERPRINTED = ("epochs", "seeds", "out", "resume", "checkpoint_dir", "checkpoint_every", "crash_at_epoch",
                     "crash_marker", "export", "device", "patience")


def _checkpoint_config(args: argparse.Namespace, distributed: bool) -> CheckpointConfig | None:
    """The run's checkpointing, or None; a single-process run gets a one-process group (DCP is collective)."""
    if not args.checkpoint_dir:
        return None
    if not distributed:
        ensure_process_group()
    fingerprint = {k: v for k, v in sorted(vars(args).items()) if k not in NOT_FINGERPRINTED}
    return CheckpointConfig(directory=Path(args.checkpoint_dir), every=args.checkpoint_every, resume=args.resume,
                            fingerprint=fingerprint, crash_at_epoch=args.crash_at_epoch,
                            crash_marker=args.crash_marker)


if __name__ == "__main__":
    run_rank_main(main)
