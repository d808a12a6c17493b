"""Accuracy parity of compressed halo exchange: val-selected test accuracy over seeds, per exchange variant.

    python benchmarks/dist_accuracy.py [--datasets cora,citeseer,amazon-computers,coauthor-cs] [--parts 4] \\
        [--seeds 5] [--first-seed 0] [--variants fp32,int1,...] [--epochs N] [--hidden H]

Spawns `--parts` gloo CPU ranks once per dataset and trains a 2-layer GCN per (variant, seed) with the
single-process preset of `gnn.presets` (hidden, dropout, lr, weight decay, epochs; `--epochs/--hidden` override):
fp32 exchange, Sylvie's int1 (stochastic row min/max), int1 + pipeline (one-epoch-stale halos, synchronous every
10th epoch), the contractive int1-2c, int1-2c + delta coding (EF21-style, fp32 refresh every 20 epochs), int8, the
other codecs pipelined, and every codec pipelined with Sylvie's Bounded Staleness Adaptor (`distributed.staleness`:
drift budget 1.0, a synchronous epoch at least every 20; `benchmarks/dist_time.py` times it at the synchronous
fraction these runs chose). Three remedies for the pipelined runs' late-training cost are rows of their own: halo
rows sent undropped and dropped by each receiver (`+rx-dropout`, PipeGCN / Sylvie's order, with its synchronous
reference `fp32+rx-dropout`), PipeGCN's smoothing of stale halos and gradients (`+smooth`, momentum 0.95), and
stale halos with synchronous halo gradients (`+fresh-grad`, every codec; `benchmarks/dist_time.py` times it as
`pipelined-fresh` at these runs' synchronous fraction).
Selection: test accuracy at the epoch of best validation accuracy (evaluated every 2 epochs), over all epochs
(no early stopping). Seed s uses split s and METIS partition seed s. Mean +- std over seeds.

Results merge into benchmarks/results/dist_accuracy.json per dataset, variant and seed: a run with the same settings
(parts, epochs, model) adds its seeds to those already stored (a rerun seed replaces its old result), so
`--first-seed 5 --seeds 5 --variants fp32,int1` takes two variants from 5 to 10 seeds without rerunning the first
five. Changed settings replace the dataset's entry. The gap to fp32 is also reported paired (per seed, on the seeds
both hold) with its standard error.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import time

from benchmarks._common import load_results, machine, save_results, table_head, table_row
from distributed.halo import ExchangeConfig
from distributed.launch import spawn
from distributed.runner import DistTrainConfig, train_many
from gnn.cli import UsageError
from gnn.data.loaders import load_dataset
from gnn.presets import model_and_train_config


def _bsa(codec: str, **extra) -> ExchangeConfig:
    """Pipelined with Sylvie's Bounded Staleness Adaptor: drift budget 1.0, a synchronous epoch at least every 20."""
    return ExchangeConfig(codec=codec, pipeline=True, **{"sync_every": 20, "staleness_budget": 1.0, **extra})


VARIANTS = {
    "fp32": ExchangeConfig(codec="fp32"),
    "int1": ExchangeConfig(codec="int1"),
    "int1+pipeline(K=10)": ExchangeConfig(codec="int1", pipeline=True, sync_every=10),
    "int1-2c": ExchangeConfig(codec="int1-2c"),
    "int1-2c+delta": ExchangeConfig(codec="int1-2c", grad_codec="int1", delta=True, refresh_every=20),
    "int8": ExchangeConfig(codec="int8"),
    "fp32+pipeline(K=10)": ExchangeConfig(codec="fp32", pipeline=True, sync_every=10),
    "int8+pipeline(K=10)": ExchangeConfig(codec="int8", pipeline=True, sync_every=10),
    "int1-2c+pipeline(K=10)": ExchangeConfig(codec="int1-2c", pipeline=True, sync_every=10),
    # Sylvie's Bounded Staleness Adaptor (distributed.staleness): drift budget 1.0, a synchronous epoch at least
    # every 20 epochs; every codec of benchmarks/dist_time.py's pipelined rows
    **{f"{c}+pipeline(BSA)": _bsa(c) for c in ("int1", "fp32", "int8", "int1-2c")},
    # the adaptor with a tighter bound: a synchronous epoch at least every 5 (does late-training staleness cost?)
    "int1+pipeline(BSA K=5)": _bsa("int1", sync_every=5),
    # halo rows sent before dropout, each receiver drawing its own mask (PipeGCN / Sylvie's order): does the owner's
    # mask, which a stale halo gradient meets one step late, cost the pipelined runs their late accuracy?
    "fp32+rx-dropout": ExchangeConfig(codec="fp32", halo_dropout="receiver"),
    "fp32+pipeline(BSA)+rx-dropout": _bsa("fp32", halo_dropout="receiver"),
    "int1+rx-dropout": ExchangeConfig(codec="int1", halo_dropout="receiver"),
    "int1+pipeline(BSA)+rx-dropout": _bsa("int1", halo_dropout="receiver"),
    # PipeGCN's smoothing (momentum 0.95) of the stale halos and halo gradients between the adaptor's synchronous epochs
    **{f"{c}+pipeline(BSA)+smooth": _bsa(c, smoothing=0.95) for c in ("fp32", "int1")},
    # stale halos, fresh halo gradients (the backward exchange synchronous): which half of staleness costs?
    **{f"{c}+pipeline(BSA)+fresh-grad": _bsa(c, stale_gradients=False) for c in ("fp32", "int1", "int8", "int1-2c")},
}
EVAL_EVERY = 2
# epochs at the end of training whose evaluations are averaged into final_test_acc: a statistic without the
# selection noise of one best-validation epoch (which, on 300 validation nodes, swings a single run by points)
FINAL_WINDOW = 50


def run_dataset(dataset: str, args: argparse.Namespace, chosen: list[str]) -> dict:
    graph = load_dataset(dataset)
    mcfg, tcfg = model_and_train_config(graph, "gcn")
    hidden = args.hidden or mcfg.hidden_dim
    epochs = args.epochs or tcfg.epochs
    runs = [(name, DistTrainConfig(dataset=dataset, arch="gcn", num_parts=args.parts, seed=seed, hidden_dim=hidden,
                                   dropout=mcfg.dropout, lr=tcfg.lr, weight_decay=tcfg.weight_decay, epochs=epochs,
                                   eval_every=EVAL_EVERY, log_every=0, exchange=VARIANTS[name]))
            for seed in range(args.first_seed, args.first_seed + args.seeds) for name in chosen]
    start = time.perf_counter()
    results = spawn(train_many, args.parts, [c for _, c in runs], True)[0]
    wall_s = time.perf_counter() - start
    table: dict[str, dict] = {}
    for (name, cfg), r in zip(runs, results, strict=True):
        t = table.setdefault(name, {k: [] for k in PER_SEED})
        t["seed"].append(cfg.seed)
        t["test_acc"].append(r["test_acc_at_best_val"])
        t["best_val_acc"].append(r["best_val_acc"])
        t["best_epoch"].append(r["best_epoch"])
        t["bytes_per_epoch"].append(statistics.mean(h["exchange_bytes"] for h in r["history"]))
        t["synchronous_epochs"].append(r["synchronous_epochs"])
        t["final_test_acc"].append(final_window_mean(r["history"], epochs))
    command = "python benchmarks/dist_accuracy.py " + shlex.join(sys.argv[1:])
    for t in table.values():
        t["commands"] = [command]
    return {"parts": args.parts, "epochs": epochs, "eval_every": EVAL_EVERY,
            "model": {"arch": "gcn", "layers": 2, "hidden": hidden, "dropout": mcfg.dropout, "lr": tcfg.lr,
                      "weight_decay": tcfg.weight_decay},
            "features": graph.info["features"], "sparse_input": results[0]["sparse_input"],
            "variants": table, "wall_s": wall_s, "command": command}


PER_SEED = ("seed", "test_acc", "best_val_acc", "best_epoch", "bytes_per_epoch", "synchronous_epochs",
            "final_test_acc")


def final_window_mean(history: list[dict], epochs: int) -> float:
    """Mean test accuracy over the evaluations of the last FINAL_WINDOW epochs (no selection on anything)."""
    window = [h["test_acc"] for h in history if "test_acc" in h and h["epoch"] >= epochs - FINAL_WINDOW]
    return statistics.mean(window)
SETTINGS = ("parts", "epochs", "eval_every", "model")


def _seed_ids(variant: dict) -> list[int]:
    """Seed ids of a stored variant (files written before ids were stored ran seeds 0..n-1)."""
    return variant.get("seed", list(range(len(variant["test_acc"]))))


def merge_entry(old: dict | None, new: dict) -> dict:
    """``new`` dataset entry merged into ``old`` per variant and seed (new results win); ``old`` is dropped when
    its settings differ. Summary statistics are recomputed from the merged per-seed lists."""
    if old is None or any(old.get(k) != new.get(k) for k in SETTINGS):
        merged = {**new, "variants": {}}
        old_variants = {}
    else:
        merged = {**old, **{k: v for k, v in new.items() if k != "variants"}}
        merged["wall_s"] = old.get("wall_s", 0.0) + new["wall_s"]
        old_variants = old["variants"]
    variants = {}
    for name in list(old_variants) + [n for n in new["variants"] if n not in old_variants]:
        rows = {}  # seed id -> per-seed values
        for source in (old_variants.get(name), new["variants"].get(name)):
            if source:
                for i, seed in enumerate(_seed_ids(source)):
                    # synchronous_epochs is missing from files written before it was recorded
                    rows[seed] = {k: source[k][i] for k in PER_SEED if k != "seed" and k in source}
        seeds = sorted(rows)
        v = {"seed": seeds, **{k: [rows[s].get(k) for s in seeds] for k in PER_SEED if k != "seed"}}
        commands = (old_variants.get(name, {}).get("commands", [old.get("command")] if old else [])
                    + new["variants"].get(name, {}).get("commands", []))
        v["commands"] = list(dict.fromkeys(c for c in commands if c))
        v["test_mean"] = statistics.mean(v["test_acc"])
        v["test_std"] = statistics.stdev(v["test_acc"]) if len(seeds) > 1 else 0.0
        variants[name] = v
    merged["variants"] = variants
    merged.pop("seeds", None)  # per variant now: len(variant["seed"])
    return merged


def paired_gap(variant: dict, reference: dict, key: str = "test_acc") -> tuple[float, float, int]:
    """Mean and standard error of (variant - reference) ``key`` over the seeds both hold (a value, not None), and
    their count."""
    ref = {s: a for s, a in zip(_seed_ids(reference), reference.get(key, []), strict=False) if a is not None}
    diffs = [a - ref[s] for s, a in zip(_seed_ids(variant), variant.get(key, []), strict=False)
             if a is not None and s in ref]
    if not diffs:
        return float("nan"), float("nan"), 0
    se = statistics.stdev(diffs) / len(diffs) ** 0.5 if len(diffs) > 1 else float("nan")
    return statistics.mean(diffs), se, len(diffs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", default="cora", help="comma list, e.g. cora,citeseer")
    p.add_argument("--parts", type=int, default=4)
    p.add_argument("--seeds", type=int, default=5, help="how many seeds to run")
    p.add_argument("--first-seed", type=int, default=0, help="run seeds first-seed .. first-seed + seeds - 1")
    p.add_argument("--epochs", type=int, default=0, help="override the preset's epochs (0: preset)")
    p.add_argument("--hidden", type=int, default=0, help="override the preset's hidden width (0: preset)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"comma list of: {', '.join(VARIANTS)}")
    args = p.parse_args()
    chosen = args.variants.split(",")
    unknown = set(chosen) - set(VARIANTS)
    if unknown:
        raise UsageError(f"unknown variants {sorted(unknown)}; valid: {', '.join(VARIANTS)}")
    for dataset in args.datasets.split(","):
        entry = run_dataset(dataset, args, chosen)
        run_wall_s = entry["wall_s"]
        res = load_results("dist_accuracy")
        if "datasets" not in res:  # the first format held one dataset at the top level: start afresh
            res = {"datasets": {}}
        res["datasets"][dataset] = entry = merge_entry(res["datasets"].get(dataset), entry)
        ref = entry["variants"].get("fp32")
        for name, v in entry["variants"].items():
            gap = paired_gap(v, ref) if ref else (float("nan"),) * 3
            print(f"{dataset:18s} {name:22s} test {v['test_mean']:.4f} +- {v['test_std']:.4f} over "
                  f"{len(v['seed'])} seeds; paired gap to fp32 {100 * gap[0]:+.2f} +- {100 * gap[1]:.2f} pt "
                  f"({gap[2]} seeds)", flush=True)
        res.update(machine=machine(), note="ranks oversubscribed on this machine, so no timing claims; "
                   "selection: test accuracy at the epoch of best validation accuracy")
        print(f"written {save_results('dist_accuracy', res)} in {run_wall_s:.0f} s", flush=True)


def _mean_bytes(entry: dict) -> float:
    return sum(entry["bytes_per_epoch"]) / len(entry["bytes_per_epoch"])


def _gap_text(variant: str, entry: dict, ref: dict | None, key: str = "test_acc") -> str:
    """A gap column: variant - fp32 in points, paired per seed, +- its standard error ('-' for fp32 itself and
    where no seed pairs)."""
    gap, se, paired = paired_gap(entry, ref, key) if ref else (None, None, 0)
    if variant == "fp32" or not paired:
        return "-"
    se_text = f"{100 * se:.2f}" if paired > 1 else "n/a"
    return f"{100 * gap:+.2f} +- {se_text}" + (f" ({paired} paired)" if paired != len(entry["test_acc"]) else "")


def _sync_text(entry: dict, epochs: int) -> str:
    """Mean synchronous epochs of a run (all of them without pipelining); '-' where not recorded."""
    counts = [c for c in entry.get("synchronous_epochs", []) if c is not None]
    return f"{statistics.mean(counts):.1f} of {epochs}" if counts else "-"


def render(res: dict) -> list[str]:
    lines = ["## Distributed training: accuracy per halo codec (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/dist_accuracy.json` (each variant names its commands). GCN, 2 layers, the "
             "single-process preset; METIS partitions. Gap = variant - fp32 exchange in points, paired per seed "
             "(seed s: split s, partition seed s) over the seeds both hold, +- its standard error. Last-"
             f"{FINAL_WINDOW} gap: the same on the mean test accuracy of the last {FINAL_WINDOW} epochs' evaluations "
             "(no selection, so without the noise of picking one epoch on 300 validation nodes), over the seeds "
             "that recorded it (runs older than the statistic lack it; '-': no seed pairs).", "",
             *table_head("dataset", "parts", "seeds", "epochs", "variant", "test acc", "gap to fp32 (pt)",
                         f"last-{FINAL_WINDOW} gap (pt)", "exchange bytes / epoch", "fp32 / variant bytes",
                         "synchronous epochs")]
    for name, d in res.get("datasets", {}).items():
        ref = d["variants"].get("fp32")
        for variant, v in d["variants"].items():
            vol = _mean_bytes(v)
            lines.append(table_row(name, d["parts"], len(v["test_acc"]), d["epochs"], variant,
                                   f"{100 * v['test_mean']:.2f} +- {100 * v['test_std']:.2f}",
                                   _gap_text(variant, v, ref), _gap_text(variant, v, ref, "final_test_acc"),
                                   f"{vol:,.0f}",
                                   f"{_mean_bytes(ref) / vol:.1f}" if ref else "-", _sync_text(v, d["epochs"])))
    return lines + ["", f"Note: {res.get('note', '')}", ""]


if __name__ == "__main__":
    main()
