"""The main job as a pipeline of steps: ``python -m gnn.pipeline`` (what ``make demo`` runs).

Each step takes the shared context dict and adds its outputs. Steps of later stages (quantize, export,
simulate, RTL) are appended to `STEPS` as those packages land; a step whose package is not present is
reported as skipped with the reason, never silently dropped.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gnn.cli import UsageError
from gnn.data.loaders import load_dataset
from gnn.experiment import format_table, run_experiment
from gnn.presets import model_and_train_config, with_overrides
from gnn.rundir import RunDirError


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[dict], None]
    description: str


def step_train(ctx: dict) -> None:
    graph = load_dataset(ctx["dataset"], data_root=ctx.get("data_root"))
    model_cfg, train_cfg = model_and_train_config(graph, ctx["model"])
    train_cfg = with_overrides(train_cfg, epochs=ctx.get("epochs"))
    seeds = list(range(ctx["seeds"]))
    out = run_experiment(graph, model_cfg, train_cfg, seeds, run_dir=ctx["run_dir"] / "fp32",
                         progress=ctx["progress"])
    ctx["fp32"] = out
    print(format_table([out]))


def _lazy(module: str, function: str) -> Callable[[dict], None]:
    """A step implemented in another package, imported only when the step runs."""

    def run(ctx: dict) -> None:
        import importlib

        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise  # a broken dependency is an error, not a skip
            print(f"   skipped: {module} is not available in this checkout")
            return
        getattr(mod, function)(ctx)

    return run


STEPS: list[Step] = [
    Step("train", step_train, "train the FP32 model over seeds, validation-selected"),
    Step("quantize", _lazy("quant.pipeline_steps", "step_quantize"), "train the A2Q-quantized model (same seeds)"),
    Step("export", _lazy("quant.pipeline_steps", "step_export"), "export the quantized model for the accelerator"),
    Step("simulate", _lazy("hw.pipeline_steps", "step_simulate"),
         "simulate the export on the MEGA-style accelerator and the HyGCN-like baseline"),
    Step("rtl", _lazy("hw.rtl.pipeline_step", "step_rtl"),
         "run one layer tile of the export in RTL simulation (bit-exact and cycle check against the model)"),
]


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m gnn.pipeline", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--model", default="gcn")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--epochs", type=int, help="override the preset's epochs")
    p.add_argument("--data-root")
    p.add_argument("--run-dir", type=Path, default=None)
    p.add_argument("--steps", default=",".join(s.name for s in STEPS),
                   help=f"comma-separated subset of: {', '.join(s.name for s in STEPS)}")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    wanted = args.steps.split(",")
    unknown = [w for w in wanted if w not in {s.name for s in STEPS}]
    if unknown:
        p.error(f"unknown step(s) {unknown}; valid: {', '.join(s.name for s in STEPS)}")
    run_dir = args.run_dir or Path("runs") / f"pipeline_{time.strftime('%Y%m%d-%H%M%S')}"
    ctx = {"dataset": args.dataset, "model": args.model, "seeds": args.seeds, "epochs": args.epochs,
           "data_root": args.data_root, "run_dir": run_dir, "progress": not args.no_progress}
    for step in STEPS:
        if step.name in wanted:
            print(f"== step {step.name}: {step.description}")
            try:
                step.run(ctx)
            except RunDirError as e:  # e.g. a --run-dir that already holds a run: one line, not a traceback
                raise UsageError(str(e)) from None
    print(f"outputs in {run_dir}")
    return ctx


if __name__ == "__main__":
    main()
