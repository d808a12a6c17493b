"""The command line of the main job: ``python -m pipeline [--dataset ...] [--steps train,quantize,...]``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pipeline
from gnn.cli import UsageError
from gnn.rundir import RunDirError
from pipeline.context import PipelineConfig, PipelineContext
from pipeline.steps import STEPS, StepInputMissing, run


def main(argv: list[str] | None = None) -> PipelineContext:
    p = argparse.ArgumentParser(prog="python -m pipeline", description=pipeline.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora",
                   help="a registry name (e.g. cora) or a path to a graph file / folder (docs/datasets.md)")
    p.add_argument("--model", default="gcn")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epochs", type=int, help="override the preset's epochs")
    p.add_argument("--data-root")
    p.add_argument("--run-dir", type=Path, default=None)
    p.add_argument("--steps", default=",".join(s.name for s in STEPS),
                   help=f"comma-separated subset of: {', '.join(s.name for s in STEPS)}")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    wanted = tuple(args.steps.split(","))
    unknown = [w for w in wanted if w not in {s.name for s in STEPS}]
    if unknown:
        p.error(f"unknown step(s) {unknown}; valid: {', '.join(s.name for s in STEPS)}")
    run_dir = args.run_dir or Path("runs") / f"pipeline_{time.strftime('%Y%m%d-%H%M%S')}"
    config = PipelineConfig(run_dir=run_dir, dataset=args.dataset, model=args.model, seeds=args.seeds,
                            epochs=args.epochs, data_root=args.data_root, progress=not args.no_progress,
                            steps=wanted)
    try:
        ctx = run(config)
    except (RunDirError, StepInputMissing, FileNotFoundError) as e:  # e.g. a run dir that already holds a run,
        raise UsageError(str(e)) from None  # or a step whose input no earlier step made: one line, not a traceback
    print(f"outputs in {run_dir}")
    return ctx
