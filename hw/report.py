"""Run one simulation and collect its results into a JSON-able dict (cycles, engines, DRAM, buffers, energy)."""

from __future__ import annotations

import time

from hw.config import AcceleratorConfig
from hw.energy import energy_breakdown
from hw.functional import check_workload
from hw.scheduler import STAGES, Simulator

ENGINES = ("decoder", "combination", "aggregation", "condense")
PARTS = ("packages", "bitmap", "boundary", "values", "pointers", "dense")


def tensor_kind(label: str) -> str:
    """Group a DRAM tensor label (``L0.xw.packages``, ``edges``, ...) into the report's categories."""
    if ".out." in label:
        return "outputs"
    if label.rsplit(".", 1)[-1] in PARTS and label.count(".") >= 2 and label.split(".")[1] in ("x", "xw"):
        return label.rsplit(".", 1)[-1]
    for key in ("weights", "edges", "eids", "condensed", "rows", "xw_tiles", "xw_reread"):
        if key in label:
            return key
    return label


def run_simulation(workload, cfg: AcceleratorConfig, check: bool = True, max_check_macs: float = 1e9) -> dict:
    """Simulate ``workload`` on ``cfg``; returns the result dict (see ``python -m hw.simulate --help``)."""
    t0 = time.perf_counter()
    sim = Simulator(cfg)
    total = sim.run(workload)
    wall = time.perf_counter() - t0
    modes = check_workload(workload, sim.input_layouts, max_check_macs) if check else ["skipped"]
    d = sim.dram.stats
    by_kind: dict[str, int] = {}
    for label, nbytes in sorted(d.bytes_by_tensor.items()):
        by_kind[tensor_kind(label)] = by_kind.get(tensor_kind(label), 0) + int(nbytes)
    fp32 = cfg.feature_bits_override == 32
    comb_ops = {"bse_cycle": sim.ops["bit_cycles"]}
    comb_ops.update({"mult_fp32": sim.ops["macs"], "add_fp32": sim.ops["macs"]} if fp32 else
                    {"mult_int8": sim.ops["macs"], "add_int32": sim.ops["macs"]})
    agg_ops = ({"mult_fp32": sim.ops["accumulations"], "add_fp32": sim.ops["accumulations"]} if fp32 else
               {"mult_int8": sim.ops["accumulations"], "add_int16": sim.ops["accumulations"]})
    buffers = {k: (b.capacity, b.stats.reads_bytes + b.stats.writes_bytes) for k, b in sim.buffers.items()}
    energy = energy_breakdown(dram_bytes=d.total_bytes, buffers=buffers, comb_ops=comb_ops, agg_ops=agg_ops,
                              codec_bytes=sim.ops["codec_bytes"])
    return {
        "workload": {"name": workload.name, "num_nodes": workload.num_nodes, "num_edges": workload.num_edges,
                     "self_loops": workload.self_loops,
                     "bits_source": workload.bits_source,
                     "layers": [lt.dims for lt in workload.layers]},
        "arch": cfg.name,
        "total_cycles": total,
        "latency_us": total / (cfg.clock_ghz * 1e3),
        "layer_end_cycles": sim.layer_cycles,
        "engines": {k: sim.stats[k].to_dict(total) for k in ENGINES},
        "stages": {k: sim.stats[k].to_dict(total) for k in STAGES},
        "dram": {"total_bytes": d.total_bytes, "read_bytes": d.bytes_read, "write_bytes": d.bytes_written,
                 "accesses": d.accesses, "requests": d.requests, "row_hit_rate": d.row_hit_rate,
                 "busy_cycles": d.busy_cycles, "bandwidth_utilization": d.busy_cycles / total if total else 0.0,
                 "bytes_by_kind": by_kind, "bytes_by_tensor": {k: int(v) for k, v in d.bytes_by_tensor.items()},
                 "useful_bytes": int(sum(d.useful_bytes_by_tensor.values()))},
        "buffers": {k: {"capacity_bytes": b.capacity, "hit_rate": b.stats.hit_rate, "lookups": b.stats.lookups,
                        "reads_bytes": b.stats.reads_bytes, "writes_bytes": b.stats.writes_bytes}
                    for k, b in sim.buffers.items()},
        "energy_pj": energy,
        "ops": dict(sim.ops),
        "functional_check": modes,
        **({"readout": {"timed": False, "num_graphs": int(workload.readout.graph_ptr.size - 1),
                        **workload.readout.ops()}} if workload.readout is not None else {}),
        "sim_wall_s": wall,
        "sim_cycles_per_s": total / wall if wall else 0.0,
        "sim_edges_per_s": workload.num_edges * len(workload.layers) / wall if wall else 0.0,
        "config_sources": cfg.sources,
    }
