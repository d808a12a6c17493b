"""MEGA ablation and baselines in the hw/ cycle model, beside MEGA's published numbers.

Ladder (hw.config.ablation_variants): FP32 -> degree-aware bits (plain bitmap) -> + Adaptive-Package ->
+ Condense-Edge (= the mega preset); plus the HyGCN-like and GCNAX-like presets. Workloads: 2-layer GCN
(F_in -> 128 -> 16) with degree-rule bitwidths (hw/workload.py), or a trained model's ``.qgraph`` export with its
learned bitwidths (pass the export's path in place of a dataset name). Writes
benchmarks/results/hw_ablation.json (datasets not rerun are kept).
Usage: ``python benchmarks/hw_ablation.py [--datasets cora ...]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks._common import table_head
from hw.config import ablation_variants, preset
from hw.report import run_simulation
from hw.workload import ORDERS, Workload, workload_from_export, workload_from_graph, workload_name

PAPER = {"degree_aware_bitmap": {"speedup": 4.8, "dram_reduction": 5.8},
         "adaptive_package": {"speedup": 4.7, "dram_reduction": 2.5},
         "condense_edge": {"speedup": 1.1, "dram_reduction": 4.4},
         "headline_vs_hygcn": {"speedup": 38.3, "dram_reduction": 108.1},
         "source": "MEGA HPCA'24 as transcribed by Mr-Xiao2021 (SECONDARY); ablation baseline 'HyGCN-C'"}
GENERAL_NOTES = [
    "Bitwidths come from a degree rule (2..8 bits), not from training; MEGA's learned bits average lower.",
    "FP32 step = MEGA engines with 1024 32-bit MACs in place of the bit-serial engines (our stand-in for HyGCN-C).",
    "Weights (4-bit, F_in x 128) exceed the 48 KiB weight buffer on wide-feature datasets and are re-read per tile; "
    "this traffic does not shrink with feature compression and caps the DRAM reduction of every step.",
    "Condense-Edge writes each (cross source, destination subgraph) XW row once and reads it contiguously; without "
    "it, scattered rows go through the 96 KiB combination buffer as an LRU cache, which on small graphs holds most "
    "of XW, so Condense-Edge saves little traffic there (and extra eID reads / passes can cost).",
    "In this model the degree-aware step already gets the compute saving (bit-serial cycles = sum of non-zero "
    "bits, zero skipping from the bitmap); Adaptive-Package then only shrinks bytes (8-bit containers -> b-bit "
    "packed values + headers + boundary records), so its speedup stays near 1x where MEGA reports "
    f"{PAPER['adaptive_package']['speedup']}x. We cannot tell from the secondary sources how MEGA's 'bitmap' "
    "baseline computes; this split is our assumption.",
    "HyGCN-like runs aggregation first on 32-bit F_in-wide rows: its traffic scales with F_in x edges, the main "
    "source of the large headline gap.",
    "Rows named <dataset>+metis renumber the nodes by METIS parts of ~256 nodes (--order metis), so the "
    "accelerator's consecutive-ID subgraphs follow a partition as in MEGA; other dataset rows use natural IDs.",
    "Rows named *.qgraph are trained exports: learned degree-aware bits and the trained model's widths (the GCN "
    "preset's hidden width), so their absolute numbers are not comparable with the 128-wide degree-rule rows.",
    "Graphs with more subgraphs (tiles) than the 16 eID FIFOs need extra Condense-Edge passes that re-read XW; "
    "they run one after another on the one re-read engine.",
]


def notes(res: dict) -> list[str]:
    """The notes under the ablation table: the general ones, then those about particular rows, with every figure
    read from ``res`` (a note whose rows are missing is left out)."""
    rows = res.get("datasets", {})

    def step(row: str, name: str, field: str = "speedup") -> float:
        return rows[row]["steps"][name][field]

    def cycles(row: str) -> float:
        return rows[row]["runs"]["condense_edge"]["cycles"]

    def have(*names: str) -> bool:
        return all(n in rows for n in names)

    out = list(GENERAL_NOTES)
    amazon, amazon_x = "amazon-computers", "amazon-computers_gcn_degree-aware.qgraph"
    if have(amazon, amazon_x):
        out.append(f"Amazon Computers goes from {step(amazon, 'degree_aware_bitmap'):.2f}x (degree rule) to "
                   f"{step(amazon_x, 'degree_aware_bitmap'):.2f}x (trained export) at the degree-aware step: its "
                   f"inputs are dense, and the degree rule gives them 2 + log2(1 + in-degree) bits (mean in-degree "
                   f"{rows[amazon]['num_edges'] / rows[amazon]['num_nodes']:.0f} here, self loops included), so "
                   "each non-zero input costs several bit-serial cycles, where the trained model stores its 0/1 "
                   "inputs in 2 signed bits (one cycle each). A bit-serial engine beats the FP32 stand-in's "
                   "one-cycle 32-bit MAC only through zero skipping, which sparse bag-of-words inputs (Cora, "
                   "CiteSeer, Coauthor CS) give and dense ones do not.")
    cs, cs_x = "coauthor-cs", "coauthor-cs_gcn_degree-aware.qgraph"
    if have(cs, cs_x):
        out.append(f"Coauthor CS has the largest degree-aware step ({step(cs, 'degree_aware_bitmap'):.1f}x rule, "
                   f"{step(cs_x, 'degree_aware_bitmap'):.1f}x trained) for the opposite reason: very wide, very "
                   "sparse bag-of-words inputs, so layer-1 combination dominates the FP32 run (dense format, every "
                   "MAC paid) and the bitmap skips nearly all of it. Its trained export against HyGCN-like "
                   f"({step(cs_x, 'mega_vs_hygcn'):.1f}x / {step(cs_x, 'mega_vs_hygcn', 'dram_reduction'):.1f}x) "
                   f"is the row closest to MEGA's headline ({PAPER['headline_vs_hygcn']['speedup']}x / "
                   f"{PAPER['headline_vs_hygcn']['dram_reduction']}x): HyGCN-like aggregates the wide 32-bit rows "
                   "over every edge.")
    gin, gin16, sage = ("cora_gin_degree-aware.qgraph", "cora_gin16_degree-aware.qgraph",
                        "cora_sage_degree-aware.qgraph")
    cgin, csage = "citeseer_gin_degree-aware.qgraph", "citeseer_sage_degree-aware.qgraph"
    if have(gin, gin16, sage, cgin, csage):
        weights = rows[cgin]["runs"]["condense_edge"]["dram_by_kind"].get("weights", 0.0)
        total = rows[cgin]["runs"]["condense_edge"]["dram_bytes"]
        out.append("Rows *_gin_*, *_gin16_* and *_sage_* are trained GIN (hidden activation quantized; gin16: "
                   "without the hidden quantizer, so its integer path carries that activation in 16-bit fixed "
                   "point) and GraphSAGE exports (degree-aware, 4-bit target, the presets' widths). Their golden "
                   "models aggregate the quantized input codes, so they run aggregation-first on every preset "
                   "(hw/aggregate_first.py), and MEGA's buffers are sized for combination-first: an F_in-wide row "
                   "of 16-bit partial sums leaves room for few nodes per tile in half the 128 KiB aggregation "
                   "buffer, and GIN's first-layer weights exceed the 48 KiB weight buffer. They are re-read once per "
                   "batch of tiles whose matmul inputs fit the 96 KiB combination buffer together, and still make "
                   f"up most of the DRAM bytes where the inputs are wide (CiteSeer GIN {weights / 2**20:.1f} of "
                   f"{total / 2**20:.1f} MiB). HyGCN-like has 2 MiB of weight buffer and 16 MiB of aggregation "
                   "buffer; against it MEGA wins through bit-serial zero skipping where the learned codes are "
                   f"narrow and sparse (GraphSAGE {step(sage, 'mega_vs_hygcn'):.2f}x / "
                   f"{step(csage, 'mega_vs_hygcn'):.2f}x, CiteSeer GIN {step(cgin, 'mega_vs_hygcn'):.2f}x) and "
                   f"loses on Cora GIN ({step(gin, 'mega_vs_hygcn'):.2f}x), whose combination engine is the "
                   "bottleneck. The 16-bit hidden activation of a GIN trained without the hidden quantizer "
                   f"multiplies its cycles by {cycles(gin16) / cycles(gin):.2f} on Cora (each non-zero hidden value "
                   "streams 16 bits). MEGA reports GIN and GraphSAGE speedups; how its hardware maps them is not in "
                   "our sources.")
    return out


def _workload(name: str, order: str = "natural") -> tuple[Workload, dict]:
    """A dataset name (degree-rule bits, GCN F_in -> 128 -> 16) or a ``.qgraph`` export (learned bits, the trained
    model's widths), with what to record about where the bits came from."""
    if name.endswith(".qgraph"):
        from quant.qgraph import load
        export = load(name)  # read and checksum-verified once
        provenance = export.manifest.get("provenance", {})
        return workload_from_export(export), {"export": Path(name).name,
                                              "export_command": provenance.get("command"),
                                              "export_metrics": export.manifest.get("metrics")}
    return workload_from_graph(name, order=order), {"order": order}


def run(datasets: list[str], path: Path, command: str = "", order: str = "natural") -> dict:
    """Simulate every dataset; datasets already in ``path`` that are not rerun are kept (each names its command)."""
    variants = ablation_variants()
    # An export is keyed by its file name (not its location); a METIS-ordered workload as "<name>+metis".
    keys = [Path(name).name if name.endswith(".qgraph") else workload_name(name, order) for name in datasets]
    out = {"paper": PAPER, "datasets": {}}
    for name, entry_key in zip(datasets, keys, strict=True):
        t0 = time.perf_counter()
        wl, source = _workload(name, order)
        rows = {}
        for key, cfg in list(variants.items()) + [("hygcn", preset("hygcn")), ("gcnax", preset("gcnax"))]:
            r = run_simulation(wl, cfg, check=key == "condense_edge")
            rows[key] = {"cycles": r["total_cycles"], "dram_bytes": r["dram"]["total_bytes"],
                         "energy_pj": r["energy_pj"]["total"], "functional_check": r["functional_check"],
                         "dram_by_kind": r["dram"]["bytes_by_kind"], "sim_wall_s": r["sim_wall_s"]}
        steps, prev = {}, "fp32"
        for key in ("degree_aware_bitmap", "adaptive_package", "condense_edge"):
            steps[key] = {"speedup": rows[prev]["cycles"] / rows[key]["cycles"],
                          "dram_reduction": rows[prev]["dram_bytes"] / rows[key]["dram_bytes"]}
            prev = key
        mega = rows["condense_edge"]
        for base in ("fp32", "hygcn", "gcnax"):
            steps[f"mega_vs_{base}"] = {"speedup": rows[base]["cycles"] / mega["cycles"],
                                        "dram_reduction": rows[base]["dram_bytes"] / mega["dram_bytes"],
                                        "energy_saving": rows[base]["energy_pj"] / mega["energy_pj"]}
        out["datasets"][entry_key] = {"num_nodes": wl.num_nodes, "num_edges": wl.num_edges, "runs": rows,
                                 "steps": steps, "wall_s": time.perf_counter() - t0, "command": command,
                                 "bits_source": wl.bits_source, **source}
        print(entry_key, {k: {m: round(v, 2) for m, v in s.items()} for k, s in steps.items()}, flush=True)
        _merge_write(path, out)  # after every dataset (long runs)
    return out


def _merge_write(path: Path, out: dict) -> None:
    """Write ``out`` with the datasets ``path`` holds NOW (re-read at write time, so that runs of other datasets
    that finished meanwhile are kept); this run's entry replaces an older one of the same key."""
    previous = json.loads(path.read_text()).get("datasets", {}) if path.exists() else {}
    out["datasets"] = {**{k: v for k, v in previous.items() if k not in out["datasets"]}, **out["datasets"]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=1, default=float))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", help="dataset names (degree-rule bits) or .qgraph exports (learned bits)",
                   default=["cora", "citeseer", "pubmed", "amazon-computers", "coauthor-cs"])
    p.add_argument("--order", default="natural", choices=ORDERS,
                   help="node order of dataset workloads (METIS: the accelerator's subgraphs follow METIS parts)")
    p.add_argument("--out", default="benchmarks/results/hw_ablation.json")
    args = p.parse_args()
    run(args.datasets, Path(args.out), "python benchmarks/hw_ablation.py " + " ".join(sys.argv[1:]), args.order)
    print(f"wrote {args.out}")


def render(res: dict) -> list[str]:
    paper = res.get("paper", {})
    steps = ("degree_aware_bitmap", "adaptive_package", "condense_edge")
    lines = ["## MEGA ablation in the cycle model (speedup x / DRAM reduction x per step)", "",
             "File: `benchmarks/results/hw_ablation.json` (`python benchmarks/hw_ablation.py`; each row names its "
             "command). Steps: FP32 -> degree-aware bits, plain bitmap -> + Adaptive-Package -> + Condense-Edge; "
             "then MEGA (all steps) against the HyGCN-like and GCNAX-like presets.", "",
             *table_head("workload", "bits", "node order", "degree-aware", "+ Adaptive-Package", "+ Condense-Edge",
                         "MEGA vs FP32", "MEGA vs HyGCN-like", "MEGA vs GCNAX-like")]

    def cell(d: dict | None) -> str:
        return f"{d['speedup']:.2f} / {d['dram_reduction']:.2f}" if d else "-"

    lines.append(f"| MEGA paper ({paper.get('source', '')}) | learned | METIS | "
                 + " | ".join(cell(paper.get(k)) for k in steps) + " | - | "
                 + cell(paper.get("headline_vs_hygcn")) + " | - |")
    rules = set()
    for name, d in res.get("datasets", {}).items():
        st = d["steps"]
        source = d.get("bits_source", "degree rule")
        if source.startswith("degree"):
            rules.add(source)
            source = "degree rule"
        lines.append(f"| {name} | {source} | {d.get('order', 'natural')} | "
                     + " | ".join(cell(st.get(k)) for k in steps + ("mega_vs_fp32", "mega_vs_hygcn", "mega_vs_gcnax"))
                     + " |")
    lines += [""] + [f"Degree rule: {r.split(': ', 1)[-1]}." for r in sorted(rules) if ": " in r]
    lines += ["", "Notes (figures read from the rows above):", ""] + [f"- {n}" for n in notes(res)] + [""]
    return lines


if __name__ == "__main__":
    main()
