"""Train a GNN: ``python -m gnn.train --dataset cora --model gcn --seeds 10``.

Node tasks train one model per seed on the dataset's split; graph tasks (mutag, proteins) run stratified
10-fold cross-validation. Model selection uses validation only. Prints a table and writes a run directory.

Presets (gnn/presets.py; the first line of every run names the one in force, and any flag overrides it):
FP32 follows each model's paper. Learned bits (--quant a2q / degree-aware) on node tasks also set 8-bit weights
and XW, a hidden width of at least 64, and project the bits onto --target-bits after every step (quant/qat/budget.py;
--bits-control penalty restores A2Q's memory penalty). Degree-Quant and graph tasks train as FP32 does.

An existing --run-dir is never reused silently: --resume continues its run (same settings, or a one-line refusal
naming the changed ones), --overwrite deletes it first; one process at a time writes a run directory.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from gnn import hooks
from gnn.cli import UsageError
from gnn.data.loaders import load_dataset
from gnn.data.registry import FEATURE_PREPROCESSING, DataError, dataset_names
from gnn.experiment import format_table, run_experiment, run_jobs
from gnn.models import CONVS, build_model
from gnn.presets import LEARNED_XW_START_BITS, describe, model_and_train_config, with_overrides
from gnn.rundir import RunDirError, check_run_dir
from gnn.trainer import apply_quantization


def _dataset_names() -> str:
    """The registries' names for --help; a broken registry is reported when a dataset is loaded, not here."""
    try:
        return ", ".join(dataset_names())
    except DataError:
        return "the names in gnn/data/registry.toml (unreadable now: a run names the problem)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m gnn.train", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora",
                   help=f"a registry name ({_dataset_names()}) or a path: a gnn-benchmark .npz, a TUDataset or "
                        "Planetoid folder, a Facebook100 .mat, a .pt of PyG Data (docs/datasets.md)")
    p.add_argument("--split", choices=("per-class", "fraction", "masks"),
                   help="a file's split when it should not be inferred: 20/30 per class (Shchur), 50/25/25 %%, or "
                        "the file's own masks")
    p.add_argument("--task", choices=("node", "graph"), help="a file's task when it should not be inferred")
    p.add_argument("--model", default="gcn", help=f"one of: {', '.join(CONVS)}")
    p.add_argument("--seeds", type=int, default=None,
                   help="number of seeds (default: node tasks 10; graph tasks 1, each over every fold)")
    p.add_argument("--folds", type=int, default=None,
                   help="graph tasks: run the first K of the 10 cross-validation folds (default: all)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--epochs", type=int, help="override the preset's epochs")
    p.add_argument("--lr", type=float, help="override the preset's learning rate")
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--hidden", type=int, help="hidden width (per head for GAT)")
    p.add_argument("--layers", type=int)
    p.add_argument("--dropout", type=float)
    p.add_argument("--quant", default="none", help=f"one of: {', '.join(hooks.methods())}")
    p.add_argument("--target-bits", type=float, help="average feature bits for --quant a2q/degree-aware")
    p.add_argument("--fp32-preset", action="store_true",
                   help="with --quant: train with the FP32 model's preset (its hidden width, 4-bit weights and XW, "
                        "bits as --bits-control says) instead of the learned-bits recipe; with --bits-control "
                        "penalty it is how RESULTS.md's quantization grid trained")
    p.add_argument("--bits-control", choices=("auto", "project", "penalty"),
                   help="how learned bits meet --target-bits: project (node tasks: exact budget after every step), "
                        "penalty (A2Q's memory penalty), auto (project on node tasks, penalty on graph tasks)")
    p.add_argument("--penalty-weight", type=float,
                   help="with --bits-control penalty: weight a of A2Q's memory penalty a*relu(M - M_target)^2, M in "
                        "KB (default 2.5, A2Q's)")
    p.add_argument("--fp32-warmup", type=int, default=0, metavar="EPOCHS",
                   help="with --quant: train FP32 this many epochs first, then quantize the trained model and train "
                        "--epochs more (quantization-aware fine-tuning)")
    p.add_argument("--quantize-mlp-hidden", action="store_true",
                   help="with --quant and --model gin: also quantize the MLP's hidden activation per node, as A2Q's "
                        "GIN code does (off by default; the results tables were trained without it)")
    p.add_argument("--weight-bits", type=int, metavar="BITS",
                   help="with --quant a2q/degree-aware: signed bits of the weights, per output channel (default 4, "
                        "A2Q's; not counted in the feature bits)")
    p.add_argument("--xw-bits", type=int, metavar="BITS",
                   help="with --quant a2q/degree-aware and --model gcn/gin: signed bits of the per-channel points "
                        "(GCN's XW, the combination output before aggregation; GIN's input) (default 4, A2Q's; not "
                        "counted in the feature bits)")
    p.add_argument("--learn-xw-bits", action="store_true",
                   help="with --quant a2q/degree-aware and --model gcn: learn XW's bits per node and count them in "
                        "--target-bits / the hardware cost, instead of A2Q's fixed per-channel XW width; they start "
                        f"at --xw-bits, by default {LEARNED_XW_START_BITS} (the learned features' start: from the "
                        "preset's 8 the first projections cut every row at once and Cora trained at chance for 70 "
                        "epochs)")
    p.add_argument("--hw-cost", choices=("dram", "energy", "latency"),
                   help="with --quant a2q/degree-aware and --model gcn on a node task: hold the accelerator's DRAM "
                        "bytes, energy or latency (the closed form of hw/cost.py) to --hw-budget instead of the "
                        "memory in KB (by projection, or with --bits-control penalty by penalty-weight * "
                        "relu(C / B - 1)^2); the run's summary records the predicted cost")
    p.add_argument("--arch", default="mega", help="with --hw-cost: the accelerator preset (MEGA-style configs)")
    p.add_argument("--hw-config", help="with --hw-cost: a TOML file overriding the preset's fields")
    p.add_argument("--hw-budget",
                   help="with --hw-cost: the budget, a cost in its unit (bytes, pJ, cycles; e.g. 2.4e6) or a "
                        "fraction of the FP32 design (e.g. 0.1x); default: the design at --target-bits")
    p.add_argument("--split-seed", type=int, default=0, help="seed of random splits and CV folds")
    p.add_argument("--features", choices=FEATURE_PREPROCESSING,
                   help="input feature preprocessing in place of the dataset registry's (Cora: row-normalized)")
    p.add_argument("--data-root", help="directory holding raw datasets (else GNN_DATA_ROOT, the mirror, download)")
    p.add_argument("--run-dir", type=Path, help="output directory (default: runs/<dataset>_<model>_<time>)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run found in --run-dir (its settings must be the same; --device may differ)")
    p.add_argument("--overwrite", action="store_true",
                   help="delete the run found in --run-dir and train a new one there")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (drawn on a terminal only) and no per-seed lines")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.model not in CONVS:
        raise UsageError(f"unknown model {args.model!r}; valid: {', '.join(CONVS)}")
    try:
        hooks.extension_for(args.quant)
    except ValueError as e:  # names the registered methods
        raise UsageError(str(e)) from None
    hw_flags = [f for f, v in (("--arch", args.arch != "mega"), ("--hw-config", args.hw_config),
                                ("--hw-budget", args.hw_budget)) if v]
    if hw_flags and not args.hw_cost:
        raise UsageError(f"{', '.join(hw_flags)} describe the hardware cost of --hw-cost; add --hw-cost "
                         "dram|energy|latency or drop them")
    if args.hw_cost and args.quant == "none":
        raise UsageError("--hw-cost prices learned bits: add --quant a2q (or degree-aware)")
    if args.resume and args.run_dir is None:
        raise UsageError("--resume needs --run-dir pointing at the run to continue")
    if args.seeds is not None and args.seeds < 1:
        raise UsageError(f"--seeds {args.seeds}: train at least one seed")
    try:
        if args.run_dir is not None:  # before the data loads; run_experiment checks again under the lock
            check_run_dir(args.run_dir, resume=args.resume, overwrite=args.overwrite)
        graph = load_dataset(args.dataset, data_root=args.data_root, split_seed=args.split_seed,
                             features=args.features, split=args.split, task=args.task)
        recipe = not args.fp32_preset
        model_cfg, train_cfg = model_and_train_config(graph, args.model, args.quant, recipe)
        print(f"preset (gnn/presets.py): {describe(graph, args.model, args.quant, recipe)}", flush=True)
        # before the overrides, whose TrainConfig would refuse the same with the quant side's less specific message
        bits_control = args.bits_control or train_cfg.bits_control
        if args.penalty_weight is not None and graph.task == "node" and bits_control != "penalty":
            raise ValueError("--penalty-weight sets A2Q's memory penalty, but this run projects the bits onto "
                             "--target-bits (the preset); add --bits-control penalty to train with the penalty")
        model_cfg = with_overrides(model_cfg, hidden_dim=args.hidden, num_layers=args.layers, dropout=args.dropout)
        train_cfg = with_overrides(train_cfg, epochs=args.epochs, lr=args.lr, weight_decay=args.weight_decay,
                                   target_bits=args.target_bits, device=args.device,
                                   penalty_weight=args.penalty_weight, bits_control=args.bits_control,
                                   fp32_warmup_epochs=args.fp32_warmup or None,
                                   quantize_mlp_hidden=args.quantize_mlp_hidden or None,
                                   weight_bits=args.weight_bits,
                                   xw_bits=LEARNED_XW_START_BITS if args.learn_xw_bits and args.xw_bits is None
                                   else args.xw_bits,
                                   learn_xw_bits=args.learn_xw_bits or None, hw_cost=args.hw_cost,
                                   hw_arch=args.arch if args.hw_cost else None, hw_config=args.hw_config,
                                   hw_budget=args.hw_budget)
        if train_cfg.quant != "none":  # a quantization setting this model cannot take fails here, before any run
            apply_quantization(build_model(model_cfg), graph, train_cfg)
        num_seeds = args.seeds if args.seeds is not None else (1 if graph.task == "graph" else 10)
        seeds = list(range(args.first_seed, args.first_seed + num_seeds))
        run_jobs(graph, seeds, args.folds)  # --folds out of range, or on a node task: refused before any run
    except (DataError, ValueError) as e:
        raise UsageError(str(e)) from None
    run_dir = args.run_dir or Path("runs") / f"{graph.name}_{args.model}_{args.quant}_{time.strftime('%Y%m%d-%H%M%S')}"
    try:
        out = run_experiment(graph, model_cfg, train_cfg, seeds, run_dir=run_dir, resume=args.resume,
                             overwrite=args.overwrite, progress=not args.no_progress, num_folds=args.folds)
    except RunDirError as e:  # only the run directory's refusals: any other error keeps its traceback
        raise UsageError(str(e)) from None
    print(format_table([out]))
    print(f"run directory: {run_dir}")
    print(json.dumps(out["summary"]))
    return out


if __name__ == "__main__":
    main()
