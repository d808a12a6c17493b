"""``python -m hw.simulate <export-or-dataset> --arch mega|hygcn|gcnax [--config my_arch.toml]``.

GCN, GIN and GraphSAGE exports simulate layer by layer (a graph classifier's export: its batch of graphs as one
block-diagonal graph, then its readout checked bit-exact) (GIN and GraphSAGE aggregation-first on every preset, because
their golden models aggregate the quantized input: ``hw/aggregate_first.py``); a GAT export is refused.

A graph-transformer export (``quant.archs.transformer.export``) is reported tensor by tensor instead: DRAM bytes per
layout and decoder cycles (``hw.tensor_traffic``).

Builds the workload (a quantized export path, a dataset name: cora, citeseer, pubmed, amazon-computers,
coauthor-cs, a synthetic one: rmat-<scale>, sbm-<nodes>, or a path to a graph file (docs/datasets.md); dataset
bitwidths follow hw/workload.py's degree rule), simulates it, runs the functional check, prints a summary table
and writes ``<out>/<name>_<arch>.json`` + ``.png``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gnn.cli import UsageError
from gnn.data.registry import DataError
from hw.config import PRESETS, ConfigError, load_config, preset
from hw.plots import plot_result
from hw.report import run_simulation
from hw.workload import ORDERS, workload_from_export, workload_from_graph
from quant.qgraph import ExportError, load


def summary(result: dict) -> str:
    lines = [f"{result['arch']} on {result['workload']['name']} ({result['workload']['num_nodes']} nodes, "
             f"{result['workload']['num_edges']} edges "
             f"{'incl.' if result['workload'].get('self_loops', True) else 'without'} self loops; "
             f"bits: {result['workload']['bits_source']})",
             f"total cycles {result['total_cycles']:.0f}  latency {result['latency_us']:.1f} us  "
             f"functional check {result['functional_check']}",
             f"{'engine':<12}{'busy':>12}{'stall_in':>12}{'stall_out':>12}{'idle':>12}{'util':>7}"]
    for name, e in result["engines"].items():
        lines.append(f"{name:<12}{e['busy_cycles']:>12.0f}{e['stall_input_cycles']:>12.0f}"
                     f"{e['stall_output_cycles']:>12.0f}{e['idle_cycles']:>12.0f}{e['utilization']:>7.2f}")
    d = result["dram"]
    lines.append(f"DRAM {d['total_bytes'] / 2**20:.3f} MiB (read {d['read_bytes'] / 2**20:.3f}, write "
                 f"{d['write_bytes'] / 2**20:.3f}); bandwidth utilization {d['bandwidth_utilization']:.2f}; "
                 f"row-hit rate {d['row_hit_rate']:.2f}")
    lines += [f"  {k:<12}{v / 2**20:>10.3f} MiB" for k, v in d["bytes_by_kind"].items()]
    lines.append("buffer hit rates: " + ", ".join(f"{k} {b['hit_rate']:.2f}" for k, b in result["buffers"].items()
                                                   if b["lookups"]))
    lines.append(f"energy {result['energy_pj']['total'] / 1e6:.3f} uJ (DRAM {result['energy_pj']['dram'] / 1e6:.3f})")
    if "readout" in result:
        r = result["readout"]
        lines.append(f"readout of {r['num_graphs']} graphs (pooling and head, quant.readout): {r['pool_adds']} adds, "
                     f"{r['head_macs']} MACs; checked, not timed (cycles above are the layers')")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m hw.simulate", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", help="quantized export path or dataset/synthetic name")
    p.add_argument("--arch", default="mega", choices=sorted(PRESETS))
    p.add_argument("--config", help="TOML file overriding the preset's fields (top level or [accelerator])")
    p.add_argument("--hidden", type=int, default=None,
                   help="hidden width of the 2-layer GCN (dataset workloads; default 128)")
    p.add_argument("--order", default=None, choices=ORDERS,
                   help="node order of dataset workloads: natural IDs, or METIS parts as consecutive subgraphs")
    p.add_argument("--out", default=".", help="directory for the JSON and PNG (default: the current directory; "
                   "benchmarks/results holds only what the benchmark scripts measure, RESULTS.md renders it)")
    p.add_argument("--no-check", action="store_true", help="skip the functional check")
    return p


def main(argv: list[str] | None = None) -> dict:
    """The command line; a bad export or accelerator config ends with one ``error:`` line and exit status 2."""
    p = _parser()
    args = p.parse_args(argv)
    try:
        cfg = load_config(args.config, base=args.arch) if args.config else preset(args.arch)
    except ConfigError as e:
        raise UsageError(str(e)) from None
    if args.hidden is not None and args.hidden < 1:
        p.error(f"--hidden {args.hidden}: the hidden width must be >= 1")
    if not _is_export(Path(args.workload)):  # a dataset name, rmat-<scale> / sbm-<nodes>, or a graph file
        try:
            wl = workload_from_graph(args.workload, hidden=128 if args.hidden is None else args.hidden,
                                     order=args.order or "natural")
        except (DataError, ValueError) as e:  # an unknown name, an unreadable file: one line, exit 2
            raise UsageError(str(e)) from None
        return _simulate(wl, cfg, args)
    if args.hidden is not None or args.order is not None:
        p.error("--hidden and --order shape dataset workloads; an export keeps its trained widths and node order "
                "(drop them, or give a dataset name)")
    try:
        return _simulate_export(args, cfg)
    except ExportError as e:
        raise UsageError(str(e)) from None


def _is_export(path: Path) -> bool:
    """A ``.qgraph`` export (a folder named ``*.qgraph`` or holding a manifest), not a graph file or folder."""
    return path.exists() and (path.suffix == ".qgraph" or (path / "manifest.json").is_file())


def _simulate_export(args: argparse.Namespace, cfg) -> dict:
    """Load, validate and simulate the export at ``args.workload`` (a graph transformer: its tensor traffic); the
    export is read with numpy only (:mod:`quant.qgraph`)."""
    q = load(args.workload)
    if q.arch == "gat":
        raise UsageError(f"{args.workload} is a GAT export; the accelerator model simulates GCN, GIN and GraphSAGE "
                         "layers (attention needs a softmax unit it does not model). Its integer golden model runs "
                         "with q.integer_model() and quant.archs.gat.integer.gat_forward_int; export a GCN, GIN or "
                         "GraphSAGE run to simulate it")
    if q.is_graph_transformer:  # tensors only: memory and decoder traffic, no GCN layer to simulate
        from hw.tensor_traffic import feature_traffic, format_rows

        rows = feature_traffic(q)
        print(f"graph-transformer export {args.workload}: node tensors through DRAM and the Adaptive-Package "
              "decoder (attention layers are not GCN layers; no layer simulation)")
        print(format_rows(rows))
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"hw_tensors_{Path(args.workload).stem}.json").write_text(json.dumps(rows, indent=1))
        return {"tensors": rows}
    result = _simulate(workload_from_export(q), cfg, args)
    check = prediction_check(q.manifest.get("metrics", {}).get("hw_cost"), result, args)
    if check is not None:
        result["hw_cost_check"] = check
    return result


def prediction_check(trained: dict | None, result: dict, args: argparse.Namespace) -> dict | None:
    """The cost a ``--hw-cost`` training run predicted for this export (its manifest's ``metrics.hw_cost``) against
    this simulation, when both used the same preset and configuration file; prints one line either way."""
    if trained is None:
        return None
    if trained.get("arch") != args.arch or trained.get("config") != args.config:
        print(f"trained against --arch {trained.get('arch')} --hw-config {trained.get('config')}: its predicted cost "
              "is not compared with this configuration")
        return None
    sim = {"dram_bytes": result["dram"]["total_bytes"], "energy_pj": result["energy_pj"]["total"],
           "cycles": result["total_cycles"]}
    rel = {k: trained["predicted"][k] / sim[k] - 1.0 for k in sim if sim[k]}
    print("training's prediction (hw/cost.py) vs this simulation: "
          + ", ".join(f"{k} {100 * v:+.2f}%" for k, v in rel.items()))
    return {"predicted": trained["predicted"], "simulated": sim, "rel_error": rel}


def _simulate(wl, cfg, args: argparse.Namespace) -> dict:
    """Simulate ``wl`` on ``cfg``, print the summary, write the JSON and PNG under ``args.out``."""
    try:
        result = run_simulation(wl, cfg, check=not args.no_check)
    except ConfigError as e:  # a field the workload's layers cannot use (e.g. requant_constants, aggregation-first)
        raise UsageError(str(e)) from None
    print(summary(result))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"hw_sim_{wl.name}_{cfg.name}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1, default=float))
    plot_result(result, stem.with_suffix(".png"))
    print(f"wrote {stem}.json and {stem}.png")
    return result


if __name__ == "__main__":
    main()
