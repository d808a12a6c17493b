"""The accelerator step of the main job (`gnn/pipeline.py`): simulate the exported model on MEGA and on the
HyGCN-like baseline, check bit-exactness, and print cycles, DRAM bytes, energy and the speedup."""

from __future__ import annotations

import json
from pathlib import Path

from hw.config import preset
from hw.report import run_simulation
from hw.simulate import summary
from hw.workload import workload_from_export

SIMULATED_MODELS = ("gcn", "gin", "sage")


def step_simulate(ctx: dict) -> None:
    if "export_path" not in ctx:
        raise RuntimeError("step simulate needs the export step's output (ctx['export_path']); run --steps "
                           "train,quantize,export,simulate")
    if ctx.get("model", "gcn") not in SIMULATED_MODELS:
        print(f"   skipped: the accelerator model simulates {', '.join(SIMULATED_MODELS)} layers "
              f"(model={ctx['model']!r}); the export holds its integer golden model")
        return
    workload = workload_from_export(str(ctx["export_path"]))
    results = {arch: run_simulation(workload, preset(arch), check=True) for arch in ("mega", "hygcn")}
    print(summary(results["mega"]))
    mega, base = results["mega"], results["hygcn"]
    speedup = base["total_cycles"] / mega["total_cycles"]
    dram = base["dram"]["total_bytes"] / mega["dram"]["total_bytes"]
    print(f"MEGA vs HyGCN-like baseline on this export: {speedup:.2f}x fewer cycles, {dram:.2f}x less DRAM traffic, "
          f"{base['energy_pj']['total'] / mega['energy_pj']['total']:.2f}x less energy")
    out = Path(ctx["run_dir"]) / "simulation.json"
    out.write_text(json.dumps(results, indent=1, default=float))
    ctx["simulation"] = {"speedup_vs_hygcn": speedup, "dram_reduction_vs_hygcn": dram}
