"""The main job as one pipeline of steps: ``python -m pipeline`` (what ``make demo`` runs).

Train the FP32 model over seeds -> train the A2Q-quantized model on the same seeds -> export it for the
accelerator (``.qgraph``) -> simulate the export on the MEGA-style accelerator and the HyGCN-like baseline -> run the
export's last layer, whole, on the RTL accelerator top in simulation. Each step reads the run's
:class:`PipelineConfig` and the outputs of earlier steps from a typed :class:`PipelineContext` and adds its own;
``--steps`` runs a subset.

This package sits above every other one: it may import ``gnn``, ``quant``, ``hw`` and the rest, and no package
imports it (``tests/test_layering.py``).
"""

from pipeline.cli import main
from pipeline.context import PipelineConfig, PipelineContext
from pipeline.steps import STEPS, Step, run

__all__ = ["STEPS", "PipelineConfig", "PipelineContext", "Step", "main", "run"]
