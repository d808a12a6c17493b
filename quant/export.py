"""Accelerator export of a trained quantized model: ``python -m quant.export --run <run_dir> --out cora_gcn.qgraph``.

Every architecture with an integer path (``quant.archs.integer_archs()``: GCN, GraphSAGE, GIN, GAT) exports its
integer golden model; quantized graph transformers export their tensors (:mod:`quant.archs.transformer.export`).

Format: a directory ``<name>.qgraph/`` holding ``manifest.json`` and one ``.npy`` file per array. The manifest has
``format`` ("qgraph"), ``schema_version``, ``model``, ``dataset``, ``provenance`` (git commit, command, UTC time,
checkpoint SHA-256), ``integer_path`` (fixed-point formats), ``layers`` (per layer: dims, schemes, bitwidths),
``metrics`` (test accuracy of the integer path vs the fake-quant model, average bits, measured bytes) and ``arrays``:
name -> ``{file, sha256, shape, dtype}``. Which arrays: each architecture's ``quant.archs.<arch>.export`` says.

This module converts and writes (it needs torch); :mod:`quant.qgraph` reads exports back with numpy only and
validates them before returning anything (:func:`quant.qgraph.load`); :meth:`QGraph.verify` recomputes the integer
path.
"""

from __future__ import annotations

import argparse
import pickle
import time
from pathlib import Path

import numpy as np
import torch

from gnn.cli import UsageError
from quant.archs import ARCHS, integer_archs
from quant.convert import load_trained
from quant.qgraph import (
    ExportError,
    QGraph,
    load,
)
from quant.qgraph.write import (
    accuracy,
    command_line,
    git_commit,
    sha256_file,
    summarise_storage,
    write_qgraph,
)


def _model_inputs(model: torch.nn.Module, graph, fold: int) -> dict:
    """What the export runs the model on, with the fake-quant model's outputs (its eval forward also fixes the
    per-node choices of NNS quantizers, ``quant.convert.per_node``). Node tasks: the whole graph, node labels and
    the test nodes. Graph tasks: the test graphs of split ``fold`` as one block-diagonal graph (``graph_ptr``
    (G+1,) delimits each graph's nodes), graph labels, every graph a test graph."""
    from gnn.data.batching import GraphBatcher

    model.eval()
    if graph.task == "graph":
        test = graph.splits[fold].test
        batch = next(iter(GraphBatcher(graph.graphs, test, batch_size=int(test.numel()))))
        x, edge_index = batch.x, batch.edge_index
        with torch.no_grad():
            fake = model(x, edge_index, batch.batch)
        counts = torch.bincount(batch.batch, minlength=batch.num_graphs)
        ptr = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).numpy()
        return {"x": x, "edge_index": edge_index, "fake": fake.double().numpy(), "labels": batch.y.numpy(),
                "test": np.arange(batch.num_graphs), "graph_ptr": ptr, "dataset_graphs": test.numpy()}
    data = graph.data
    with torch.no_grad():
        fake = model(data.x, data.edge_index)  # the model as trained (float32)
    return {"x": data.x.to_dense() if data.x.is_sparse else data.x,  # the converters take dense features
            "edge_index": data.edge_index, "fake": fake.double().numpy(), "labels": data.y.cpu().numpy(),
            "test": graph.splits[0].test.cpu().numpy(), "graph_ptr": None}


def _readout_arrays(model: torch.nn.Module, arch, conv, graph_ptr: np.ndarray, labels: np.ndarray
                    ) -> tuple[dict, dict]:
    """The readout of a graph classifier (``quant.readout``): its head weights, per-readout pooled sums, the head's
    hidden values and the graph logits; and its manifest entry."""
    from quant.convert import to_quantized_readout
    from quant.readout import POOL_BITS, graph_forward_int

    ro = to_quantized_readout(model)
    _, r = graph_forward_int(arch.module("integer").GOLDEN, conv.model, ro, conv.edge_index, graph_ptr)
    arrays = {"graph.graph_ptr": np.asarray(graph_ptr, dtype=np.int64),
              "graph.graph_labels": np.asarray(labels, dtype=np.int64), "logits": r["logits"]}
    for i, lin in enumerate(ro.linears):
        p = f"readout.linear{i}."
        arrays |= {p + "w_codes": lin.w_codes, p + "w_steps": lin.w_steps}
        if lin.bias is not None:
            arrays[p + "bias"] = lin.bias
    arrays |= {f"readout.{k}": v for k, v in r.items() if k != "logits"}
    meta = {"pool": ro.pool, "head": ro.head, "readout_input": ro.readout_input, "pool_bits": POOL_BITS,
            "num_graphs": int(len(graph_ptr) - 1), "num_readouts": len(model.convs) + int(ro.readout_input),
            "linears": [{"in_dim": int(lin.w_codes.shape[1]), "out_dim": int(lin.w_codes.shape[0]),
                         "w_bits": lin.w_bits, "has_bias": lin.bias is not None} for lin in ro.linears]}
    return arrays, meta


def export_model(model: torch.nn.Module, graph, out: Path | str, *, provenance: dict | None = None,
                 frac_bits: int | None = None, psum_bits: int = 32, overwrite: bool = False, fold: int = 0) -> Path:
    """Export a quantized GCN (:mod:`quant.convert`), GraphSAGE (:mod:`quant.archs.sage.convert`), GIN
    (:mod:`quant.archs.gin.convert`) or GAT (:mod:`quant.archs.gat.convert`) on ``graph`` (``GraphData``) to
    ``out``. ``frac_bits`` None: the converter's default (14; GAT 20, ``quant/FIXED_POINT.md``).

    A graph classifier (GCN or GIN with ``pool`` "sum" / "mean") exports the test graphs of split ``fold`` as one
    block-diagonal graph plus its integer readout (:mod:`quant.readout`): ``graph.graph_ptr``,
    ``graph.graph_labels``, ``readout.*`` and ``logits`` per graph."""
    from quant.qat.api import quant_config_of, quant_summary

    cfg = model.cfg
    if cfg.arch not in integer_archs():
        raise ExportError(f"export: no integer path for architecture {cfg.arch!r}; exportable: "
                          f"{', '.join(integer_archs())} (quant.archs)")
    inp = _model_inputs(model, graph, fold)
    graph_level = inp["graph_ptr"] is not None
    arch = ARCHS[cfg.arch]
    conv = arch.convert(model, inp["x"], inp["edge_index"], psum_bits=psum_bits,
                        **({} if frac_bits is None else {"frac_bits": frac_bits}))
    writer = arch.module("export")
    labels, test, fake = inp["labels"], inp["test"], inp["fake"]
    arrays, per_layer = writer.model_arrays(conv, None if graph_level else labels, test)
    readout = None
    if graph_level:
        more, readout = _readout_arrays(model, arch, conv, inp["graph_ptr"], labels)
        arrays |= more
    storage, layers, golden = summarise_storage(per_layer), writer.layers_meta(conv), arch.golden_model
    logits = arrays["logits"]
    acc_fake, acc_int = accuracy(fake, labels, test), accuracy(logits, labels, test)
    summary = quant_summary(model)
    commit, dirty = git_commit()
    qcfg = quant_config_of(model)  # present: the converters refuse unquantized models
    num_nodes, num_edges = int(inp["x"].size(0)), int(inp["edge_index"].size(1))
    dataset = {"name": graph.name, "task": graph.task, "num_nodes": num_nodes, "num_edges": num_edges,
               "num_features": int(inp["x"].size(1)), "num_classes": int(graph.num_classes),
               "num_test": int(test.size)}
    if graph_level:
        dataset |= {"fold": fold, "graphs": "the test graphs of the fold, as one block-diagonal graph",
                    "dataset_graph_ids": inp["dataset_graphs"].tolist()}
    meta = {
        "model": {"arch": cfg.arch, "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
                  "quant_method": qcfg.method, "target_bits": qcfg.target_bits},
        "dataset": dataset,
        "provenance": {"git_commit": commit, "git_dirty": dirty, "command": command_line(),
                       "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "torch": torch.__version__, **(provenance or {})},
        "integer_path": {"golden_model": golden, "acc_bits": 32, "psum_bits": psum_bits,
                         "frac_bits": conv.model.layers[0].frac_bits,
                         "multiplier_bits": 31, "rounding": "half_away_from_zero", "overflow": "saturate",
                         "input_codes_exact": conv.input_exact, "spec": "quant/FIXED_POINT.md"},
        "layers": layers,
        **({"readout": readout} if graph_level else {}),
        "metrics": {"test_acc_fake_quant": acc_fake, "test_acc_integer": acc_int,
                    "test_acc_delta_pt": 100.0 * (acc_int - acc_fake),
                    "prediction_agreement": float((fake.argmax(1) == logits.argmax(1)).mean()),
                    "avg_bits": summary["avg_bits"], "avg_bits_with_sign": summary["avg_bits_with_sign"],
                    "bits_convention": summary["headline_convention"], "storage": storage,
                    **({"hw_cost": summary["hw_cost"]} if "hw_cost" in summary else {})},
    }
    return write_qgraph(out, arrays, meta, overwrite=overwrite)


def export_run(run_dir: Path | str, out: Path | str, *, seed_dir: str | None = None, data_root: str | None = None,
               frac_bits: int | None = None, psum_bits: int = 32, overwrite: bool = False) -> Path:
    """Export the trained model of a ``python -m gnn.train`` run directory (its ``best.pt``)."""
    run = _load_run(run_dir, seed_dir=seed_dir, data_root=data_root)
    prov = {"run_dir": str(run_dir), "checkpoint": str(run.checkpoint),
            "checkpoint_sha256": sha256_file(run.checkpoint)}
    fold = int(run.checkpoint.parent.name.rpartition("_fold")[2] or 0)  # seed<S>_fold<K>: graph tasks export fold K
    return export_model(run.model, run.graph, out, provenance=prov, frac_bits=frac_bits, psum_bits=psum_bits,
                        overwrite=overwrite, fold=fold)


def _load_run(run_dir: Path | str, **kw):
    """:func:`quant.convert.load_trained`, every unreadable run (no config, malformed config, missing or corrupt
    checkpoint) an ExportError naming the run."""
    try:
        return load_trained(run_dir, **kw)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, pickle.UnpicklingError) as e:
        detail = f"missing entry {e}" if isinstance(e, KeyError) else str(e).splitlines()[0] if str(e) else repr(e)
        raise ExportError(f"export: cannot read the run directory {run_dir} ({detail}); --run takes a run directory "
                          "of `python -m gnn.train`") from None


def _fmt(v: float | None) -> str:
    return "n/a (no learned feature bits)" if v is None else f"{v:.3f}"


def describe(q: QGraph) -> str:
    """One-paragraph summary of an export: accuracy, bits and bytes."""
    m = q.manifest["metrics"]
    s = m["storage"]
    return (f"{q.path}: {q.manifest['dataset']['name']} {q.manifest['model']['arch']} "
            f"({q.manifest['model']['quant_method']}), {len(q.arrays)} arrays\n"
            f"  test accuracy: fake-quant {100 * m['test_acc_fake_quant']:.2f}%, integer path "
            f"{100 * m['test_acc_integer']:.2f}% (delta {m['test_acc_delta_pt']:+.2f} pt, "
            f"predictions agree on {100 * m['prediction_agreement']:.2f}% of "
            f"{'graphs' if q.is_graph_level else 'nodes'})\n"
            f"  average bits (learned features, no sign bit): {_fmt(m['avg_bits'])}; with sign bit "
            f"{_fmt(m['avg_bits_with_sign'])}\n"
            f"  bytes, learned features only: {s['learned_feature_bytes']} vs FP32 {s['learned_fp32_feature_bytes']} "
            f"({s['learned_fp32_feature_bytes'] / max(s['learned_feature_bytes'], 1):.1f}x measured; paper-style "
            f"32/avg_bits = {32 / m['avg_bits'] if m['avg_bits'] else float('nan'):.1f}x)\n"
            f"  bytes, all-in (all feature tensors + weights + metadata + CSR): {s['all_in_bytes']} vs FP32 "
            f"{s['fp32_all_in_bytes']} ({s['all_in_ratio']:.1f}x)")


def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser(prog="python -m quant.export", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, required=True,
                   help="run directory of `python -m gnn.train --model gcn|sage|gin|gat --quant a2q|degree-aware ...` "
                        "(gin: with --quantize-mlp-hidden every tensor is low-bit; without it the hidden activation "
                        "is exported in 16-bit fixed point)")
    p.add_argument("--out", type=Path, required=True, help="output directory, e.g. cora_gcn.qgraph")
    p.add_argument("--seed-dir", help="which seed<S>_fold<K> sub-directory (default: the first)")
    p.add_argument("--data-root", help="directory holding raw datasets")
    p.add_argument("--frac-bits", type=int, default=None,
                   help="fractional bits of the edge coefficients and accumulators (default: 14; GAT 20)")
    p.add_argument("--psum-bits", type=int, default=32, help="width of the aggregation partial sums")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    args = p.parse_args(argv)
    try:
        out = export_run(args.run, args.out, seed_dir=args.seed_dir, data_root=args.data_root,
                         frac_bits=args.frac_bits, psum_bits=args.psum_bits, overwrite=args.force)
        q = load(out)
        q.verify()
    except (ValueError, OSError) as e:  # ExportError and bad run or output directories: one line, exit 2
        raise UsageError(str(e)) from None
    print(describe(q))
    return out


if __name__ == "__main__":
    main()
