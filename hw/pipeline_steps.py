"""The accelerator step of the main job (``python -m pipeline``; wired up by ``pipeline/steps.py``): simulate the
exported model on MEGA and on the HyGCN-like baseline, check bit-exactness, and print cycles, DRAM bytes, energy and
the speedup."""

from __future__ import annotations

import json
from pathlib import Path

from hw.config import preset
from hw.report import run_simulation
from hw.simulate import summary
from hw.workload import workload_from_export

SIMULATED_MODELS = ("gcn", "gin", "sage")


def simulate_export(export_path: Path, *, model: str, run_dir: Path) -> dict | None:
    """Simulate the ``.qgraph`` at ``export_path`` (of a ``model``) on both architectures with the functional check,
    print the MEGA summary and the comparison, write ``<run_dir>/simulation.json``; returns
    ``{"speedup_vs_hygcn", "dram_reduction_vs_hygcn"}``, or None (with a skip line) for a model the accelerator
    model does not simulate."""
    if model not in SIMULATED_MODELS:
        print(f"   skipped: the accelerator model simulates {', '.join(SIMULATED_MODELS)} layers "
              f"(model={model!r}); the export holds its integer golden model")
        return None
    workload = workload_from_export(str(export_path))
    results = {arch: run_simulation(workload, preset(arch), check=True) for arch in ("mega", "hygcn")}
    print(summary(results["mega"]))
    mega, base = results["mega"], results["hygcn"]
    speedup = base["total_cycles"] / mega["total_cycles"]
    dram = base["dram"]["total_bytes"] / mega["dram"]["total_bytes"]
    print(f"MEGA vs HyGCN-like baseline on this export: {speedup:.2f}x fewer cycles, {dram:.2f}x less DRAM traffic, "
          f"{base['energy_pj']['total'] / mega['energy_pj']['total']:.2f}x less energy")
    out = Path(run_dir) / "simulation.json"
    out.write_text(json.dumps(results, indent=1, default=float))
    return {"speedup_vs_hygcn": speedup, "dram_reduction_vs_hygcn": dram}
