"""One experiment = one (dataset, model) over several seeds (node tasks) or folds (graph tasks).

Writes a run directory::

    <run_dir>/config.json            dataset, model and training configuration
    <run_dir>/seed<S>_fold<K>/       metrics.jsonl, best.pt, last.pt, result.json per seed or fold
    <run_dir>/results.json           per-seed results and the mean +- std summary
    <run_dir>/.lock                  flock'ed while a process writes the run (gnn/rundir.py)

A directory that already holds a run is refused unless ``resume`` (same configuration, checked field by field)
or ``overwrite`` (the old run's files are deleted first).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from gnn.data.loaders import GraphData
from gnn.models import ModelConfig, build_model
from gnn.progress import seed_line
from gnn.rundir import open_run_dir, write_json
from gnn.trainer import SeedResult, TrainConfig, seed_everything, summarize, train_one


def run_jobs(graph: GraphData, seeds: list[int], num_folds: int | None = None) -> list[tuple[int, int]]:
    """(seed, split index) of every run: each seed on split 0 (node tasks), or for each seed ``s`` the folds
    0..k-1 with seed ``s + fold`` (graph tasks; k = ``num_folds``, default every fold)."""
    if graph.task != "graph":
        if num_folds is not None:
            raise ValueError(f"{graph.name} is a node task with one split; folds apply to graph tasks")
        return [(s, 0) for s in seeds]
    k = len(graph.splits) if num_folds is None else num_folds
    if not 1 <= k <= len(graph.splits):
        raise ValueError(f"{graph.name} has {len(graph.splits)} folds; {k} were asked for (1..{len(graph.splits)})")
    return [(s + fold, fold) for s in seeds for fold in range(k)]


def run_config(graph: GraphData, model_cfg: ModelConfig, train_cfg: TrainConfig, seeds: list[int],
               num_folds: int | None = None) -> dict:
    """What config.json records: dataset (with its features and split seed, and for a user file its path and
    SHA-256), model and training settings, seeds."""
    data = {k: graph.info[k] for k in ("features", "split_seed", "source", "split", "task") if k in graph.info}
    config = {"dataset": graph.name, "task": graph.task, "data": data, "model": asdict(model_cfg),
              "train": asdict(train_cfg), "seeds": list(seeds)}
    if num_folds is not None:
        config["folds"] = num_folds
    return config


def run_experiment(graph: GraphData, model_cfg: ModelConfig, train_cfg: TrainConfig, seeds: list[int],
                   run_dir: Path | None = None, resume: bool = False, progress: bool = True,
                   overwrite: bool = False, num_folds: int | None = None) -> dict:
    """Train one model per seed (node tasks) or per fold, with seed ``seeds[0] + fold`` (graph tasks).

    ``run_dir`` is locked for the duration; gnn.rundir.RunDirError says why it cannot be used as asked."""
    if not seeds:
        raise ValueError("run_experiment: no seeds; give at least one")
    jobs = run_jobs(graph, seeds, num_folds)
    if not run_dir:
        return _run_jobs(graph, model_cfg, train_cfg, jobs, None, resume, progress)
    config = run_config(graph, model_cfg, train_cfg, seeds, num_folds)
    with open_run_dir(Path(run_dir), config, resume=resume, overwrite=overwrite):
        return _run_jobs(graph, model_cfg, train_cfg, jobs, Path(run_dir), resume, progress)


def _run_jobs(graph: GraphData, model_cfg: ModelConfig, train_cfg: TrainConfig, jobs: list[tuple[int, int]],
              run_dir: Path | None, resume: bool, progress: bool) -> dict:
    """Train every (seed, fold) job (a finished one is read back when resuming) and write results.json."""
    results: list[SeedResult] = []
    for seed, fold in jobs:
        sub = run_dir / f"seed{seed}_fold{fold}" if run_dir else None
        if resume and sub and (sub / "result.json").exists():
            results.append(SeedResult(**json.loads((sub / "result.json").read_text())))
            continue
        seed_everything(seed)
        model = build_model(model_cfg)
        start = time.perf_counter()
        r = train_one(model, graph, graph.splits[fold], train_cfg, seed=seed, fold=fold, run_dir=sub,
                      resume=resume, progress=progress)
        results.append(r)
        if progress:
            print(seed_line(graph.name, model_cfg.arch, train_cfg.quant, seed, fold, best_epoch=r.best_epoch,
                            val_acc=r.val_acc, test_acc=r.test_acc, seconds=time.perf_counter() - start,
                            bits=r.quant_summary.get("avg_bits")), flush=True)
    out = {"dataset": graph.name, "model": model_cfg.arch, "quant": train_cfg.quant,
           "per_run": [asdict(r) for r in results], "summary": summarize(results)}
    if run_dir:
        write_json(run_dir / "results.json", out)
    return out


def format_table(rows: list[dict]) -> str:
    """A readable table of experiment outputs (one row each)."""
    header = (f"{'dataset':<18}{'model':<7}{'quant':<14}{'runs':>5}  {'test acc (%)':>16}  "
              f"{'val acc (%)':>14}  {'ms/epoch':>9}")
    lines = [header, "-" * len(header)]
    for r in rows:
        s = r["summary"]
        t, v = s["test_acc"], s["val_acc"]
        lines.append(f"{r['dataset']:<18}{r['model']:<7}{r['quant']:<14}{t['n']:>5}  "
                     f"{t['mean']:>8.2f} +- {t['std']:<5.2f}  {v['mean']:>6.2f} +- {v['std']:<4.2f}  "
                     f"{s['ms_per_epoch']:>9.2f}")
    return "\n".join(lines)
