"""Simulator speed: simulated cycles/s and edges/s of the hw/ cycle model (mega preset, 2-layer GCN, 128 hidden)
on Coauthor CS and R-MAT graphs (gnn.data.synthetic.powerlaw_graph, edge factor 16, symmetrised: scale 15 gives
0.9M directed edges, scale 16 gives 1.9M). Workload construction (degree-rule quantization and the float64
reference forward) is timed separately from the simulation. Targets (issue): Coauthor CS <= 60 s and a 1M-edge
graph <= 10 min on one core. Writes benchmarks/results/hw_sim.json and one PNG per workload.

    python benchmarks/hw_sim.py [--graphs coauthor-cs rmat-15 rmat-16]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from benchmarks._common import RESULTS, machine, table_head
from hw.config import preset
from hw.plots import plot_result
from hw.report import run_simulation
from hw.workload import workload_from_graph


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphs", nargs="+", default=["coauthor-cs", "rmat-15", "rmat-16"])
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args()
    results, load_start = {}, os.getloadavg()[0]
    for name in args.graphs:
        t0 = time.perf_counter()
        wl = workload_from_graph(name)
        build = time.perf_counter() - t0
        r = run_simulation(wl, preset("mega"))
        results[name] = {"num_nodes": wl.num_nodes, "num_edges": wl.num_edges, "build_s": build,
                         "sim_wall_s": r["sim_wall_s"], "total_cycles": r["total_cycles"],
                         "sim_cycles_per_s": r["sim_cycles_per_s"], "sim_edges_per_s": r["sim_edges_per_s"],
                         "functional_check": r["functional_check"], "dram_bytes": r["dram"]["total_bytes"]}
        plot_result(r, Path(args.out) / f"hw_sim_{name}.png")
        print(name, results[name], flush=True)
    command = "python benchmarks/hw_sim.py " + shlex.join(sys.argv[1:])
    out = {"graphs": results, "machine": machine(), "command": command.strip(),
           "load_average_1min": {"start": load_start, "end": os.getloadavg()[0]},
           "targets_s": {"coauthor-cs": 60, "1M edges": 600}}
    Path(args.out, "hw_sim.json").write_text(json.dumps(out, indent=1, default=float))


def render(res: dict) -> list[str]:
    load = res.get("load_average_1min", {})
    lines = ["## Cycle-model speed (one core)", "",
             f"File: `benchmarks/results/hw_sim.json`. Command: `{res.get('command', 'python benchmarks/hw_sim.py')}`"
             f" (1-min load average {load.get('start', float('nan')):.1f} at the start). MEGA preset, 2-layer GCN "
             "(F_in -> 128 -> 16), degree-rule bits; every run checks each layer's outputs bit for bit. Build = "
             "workload construction (quantization and the float64 reference forward), timed apart from the "
             "simulation. Targets: Coauthor CS <= 60 s, a 1M-edge graph <= 10 min.", "",
             *table_head("graph", "nodes", "directed edges", "build s", "simulation s", "simulated cycles",
                         "cycles / s", "edges / s", "DRAM MB", "functional check")]
    for name, g in res.get("graphs", {}).items():
        lines.append(f"| {name} | {g['num_nodes']:,} | {g['num_edges']:,} | {g['build_s']:.1f} | "
                     f"{g['sim_wall_s']:.1f} | {g['total_cycles']:,.0f} | {g['sim_cycles_per_s']:,.0f} | "
                     f"{g['sim_edges_per_s']:,.0f} | {g['dram_bytes'] / 1e6:.1f} | "
                     f"{', '.join(g['functional_check'])} |")
    lines += ["", "Per-engine bars of the plots: busy, input stall, output stall and idle cycles of each stage; "
              "the decoder row sums the combination-side and the aggregation-side decoders (`hw/config.py`, "
              "`num_decoders`), which work in parallel, so it can exceed the total.", ""]
    for name in res.get("graphs", {}):  # the per-engine / DRAM plot of each graph, when the script wrote it
        if (RESULTS / f"hw_sim_{name}.png").is_file():
            lines += [f"![cycle model on {name}: engines and DRAM traffic](benchmarks/results/hw_sim_{name}.png)", ""]
    return lines


if __name__ == "__main__":
    main()
