"""The typed state of one pipeline run: its configuration (frozen) and the outputs each step adds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.quantize import DEFAULT_TARGET_BITS


@dataclass(frozen=True)
class PipelineConfig:
    """What the run was asked to do (the command line of ``python -m pipeline``)."""

    run_dir: Path                      # outputs: fp32/, a2q/, <dataset>_<model>.qgraph, simulation.json, rtl/
    dataset: str = "cora"
    model: str = "gcn"
    seeds: int = 5                     # seeds 0 .. seeds-1, for the FP32 and the quantized model alike
    epochs: int | None = None          # overrides the presets' epochs when set
    data_root: str | None = None
    progress: bool = True
    steps: tuple[str, ...] = ("train", "quantize", "export", "simulate", "rtl")
    target_bits: float = DEFAULT_TARGET_BITS  # A2Q's average-bits target (not on the command line)
    rtl_build_root: Path | None = None # the RTL build cache; None: <run_dir>/rtl/build


@dataclass
class PipelineContext:
    """The configuration plus each step's output; a field stays None until its step has run (or when it skipped)."""

    config: PipelineConfig
    fp32: dict | None = None           # step train: gnn.experiment.run_experiment's output
    quant: dict | None = None          # step quantize: the same for the A2Q-quantized model
    quant_run_dir: Path | None = None  # step quantize: its run directory (<run_dir>/a2q)
    export_path: Path | None = None    # step export: the .qgraph (None: the model has no export)
    simulation: dict | None = None     # step simulate: speedup and DRAM reduction vs the HyGCN-like baseline
    rtl: dict | None = None            # step rtl: the RTL layer's summary, or {"skipped": reason}
