"""The steps of the main job, in order. Each takes the run's :class:`PipelineContext`, reads its config and the
outputs of earlier steps, and sets its own output fields.

The work of the later steps is done by plain functions of their packages (typed arguments, return values):
:func:`pipeline.quantize.train_quantized` and :func:`~pipeline.quantize.export_for_accelerator`,
:func:`hw.pipeline_steps.simulate_export`, :func:`hw.rtl.pipeline_step.rtl_check`; this module only wires them up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gnn.data.loaders import load_dataset
from gnn.experiment import format_table, run_experiment
from gnn.presets import model_and_train_config, with_overrides
from hw.pipeline_steps import simulate_export
from hw.rtl.pipeline_step import rtl_check
from pipeline.context import PipelineConfig, PipelineContext
from pipeline.quantize import export_for_accelerator, train_quantized


@dataclass(frozen=True)
class Step:
    name: str
    description: str
    run: Callable[[PipelineContext], None]


def train(ctx: PipelineContext) -> None:
    cfg = ctx.config
    graph = load_dataset(cfg.dataset, data_root=cfg.data_root)
    model_cfg, train_cfg = model_and_train_config(graph, cfg.model)
    train_cfg = with_overrides(train_cfg, epochs=cfg.epochs)
    ctx.fp32 = run_experiment(graph, model_cfg, train_cfg, list(range(cfg.seeds)), run_dir=cfg.run_dir / "fp32",
                              progress=cfg.progress)
    print(format_table([ctx.fp32]))


def quantize(ctx: PipelineContext) -> None:
    cfg = ctx.config
    run_dir = cfg.run_dir / "a2q"
    # Issue 34: the FP32 model of step train does not feed this step (A2Q trains from scratch); its checkpoint would be
    # passed here as the initialization (not done: it would change the demo's numbers). ctx.fp32 is only printed.
    ctx.quant = train_quantized(cfg.dataset, cfg.model, cfg.seeds, run_dir, epochs=cfg.epochs,
                                data_root=cfg.data_root, target_bits=cfg.target_bits, progress=cfg.progress,
                                fp32=ctx.fp32)
    ctx.quant_run_dir = run_dir


def export(ctx: PipelineContext) -> None:
    cfg = ctx.config
    quant_run_dir = ctx.quant_run_dir or cfg.run_dir / "a2q"  # without step quantize: an earlier run's, if any
    ctx.export_path = export_for_accelerator(quant_run_dir, cfg.run_dir / f"{cfg.dataset}_{cfg.model}.qgraph",
                                             model=cfg.model, data_root=cfg.data_root)


class StepInputMissing(RuntimeError):
    """A step started without what an earlier step makes (the CLI turns it into one line, exit 2)."""


def _need_export(ctx: PipelineContext, step: str) -> None:
    """Use this run's export, or one an earlier run of the pipeline left in ``--run-dir``."""
    cfg = ctx.config
    earlier = cfg.run_dir / f"{cfg.dataset}_{cfg.model}.qgraph"
    if ctx.export_path is None and (earlier / "manifest.json").is_file():
        ctx.export_path = earlier
    if ctx.export_path is None:
        raise StepInputMissing(f"step {step} needs an export: {earlier} does not exist; run --steps "
                               f"train,quantize,export,{step} (or point --run-dir at a run that has one)")


def simulate(ctx: PipelineContext) -> None:
    _need_export(ctx, "simulate")
    ctx.simulation = simulate_export(ctx.export_path, model=ctx.config.model, run_dir=ctx.config.run_dir)


def rtl(ctx: PipelineContext) -> None:
    _need_export(ctx, "rtl")
    ctx.rtl = rtl_check(ctx.export_path, model=ctx.config.model, run_dir=ctx.config.run_dir,
                        build_root=ctx.config.rtl_build_root)


STEPS: tuple[Step, ...] = (
    Step("train", "train the FP32 model over seeds, validation-selected", train),
    Step("quantize", "train the A2Q-quantized model (same seeds)", quantize),
    Step("export", "export the quantized model for the accelerator", export),
    Step("simulate", "simulate the export on the MEGA-style accelerator and the HyGCN-like baseline", simulate),
    Step("rtl", "run the last layer of the export on the RTL accelerator top (bit-exact and cycle check)",
         rtl),
)


def run(config: PipelineConfig) -> PipelineContext:
    """Run the steps of ``config.steps`` in pipeline order, printing a header per step; returns the context."""
    unknown = [s for s in config.steps if s not in {step.name for step in STEPS}]
    if unknown:
        raise ValueError(f"unknown step(s) {unknown}; valid: {', '.join(s.name for s in STEPS)}")
    ctx = PipelineContext(config)
    for step in STEPS:
        if step.name in config.steps:
            print(f"== step {step.name}: {step.description}")
            step.run(ctx)
    return ctx
