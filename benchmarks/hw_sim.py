"""Simulator speed: simulated cycles/s and edges/s of the hw/ cycle model (mega preset, 2-layer GCN, 128 hidden)
on Coauthor CS and an R-MAT graph of ~1M directed edges (gnn.data.synthetic.powerlaw_graph, scale 15,
edge factor 16, symmetrised). Workload construction time is reported separately. Writes
benchmarks/results/hw_sim.json and one PNG per workload. Usage: ``python benchmarks/hw_sim.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without install

from hw.config import preset
from hw.plots import plot_result
from hw.report import run_simulation
from hw.workload import workload_from_graph


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphs", nargs="+", default=["coauthor-cs", "rmat-15"])
    p.add_argument("--out", default="benchmarks/results")
    args = p.parse_args()
    results = {}
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
    Path(args.out, "hw_sim.json").write_text(json.dumps(results, indent=1, default=float))


if __name__ == "__main__":
    main()
