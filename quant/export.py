"""Accelerator export of a trained quantized GCN: ``python -m quant.export --run <run_dir> --out cora_gcn.qgraph``.

(Quantized GraphSAGE, GIN and GAT models export their integer golden models in the same format,
:mod:`quant.export_sage`, :mod:`quant.export_gin`, :mod:`quant.export_gat`; quantized graph transformers export their
tensors, :mod:`quant.export_transformer`.)

Format: a directory ``<name>.qgraph/`` holding ``manifest.json`` and one ``.npy`` file per array. The manifest has
``format`` ("qgraph"), ``schema_version``, ``model``, ``dataset``, ``provenance`` (git commit, command, UTC time,
checkpoint SHA-256), ``integer_path`` (fixed-point formats), ``layers`` (per layer: dims, schemes, bitwidths),
``metrics`` (test accuracy of the integer path vs the fake-quant model, average bits, measured bytes) and ``arrays``:
name -> ``{file, sha256, shape, dtype}``. Arrays (N nodes, E' = GCN edges with one self loop per node):

* ``graph.edge_index`` (2, E), ``graph.indptr`` (N+1,), ``graph.indices`` (E',) destination-major CSR of the GCN
  graph, ``graph.gcn_weight`` (E',), ``graph.in_degree`` (N,), ``graph.labels`` (N,), ``graph.test_index``;
* per layer ``layer{l}.``: ``x_codes``, ``x_steps``, ``x_bits`` (bitwidth and step per node; degree-aware layers
  also ``degree_min``/``degree_max``/``degree_bits``/``degree_step``, the table), ``x_packed.*`` (plain packed rows,
  :mod:`quant.packing`), ``x_ap.*`` (Adaptive-Package stream, :mod:`quant.adaptive_package`), ``w_codes``,
  ``w_packed``, ``w_steps``, ``xw_steps``, ``xw_bits``, optional ``agg_steps``/``agg_bits``/``bias``, the integer
  constants ``xw_mult``/``xw_shift``, ``coef``, ``bias_int``, ``out_mult``/``out_shift``
  (:func:`quant.fixed_point.quantize_multiplier`), and the integer path's outputs for the fixed input: ``xw_codes``,
  ``psum``, ``out`` (next-layer codes; the last layer's 32-bit accumulator), ``out_unit``; plus ``logits``.

This module writes exports (it needs torch); :mod:`quant.qgraph` reads them with numpy only (its names are
re-exported here). :func:`load` validates an export before returning anything, and raises :class:`ExportError`
naming the problem: the manifest (an integer schema version, a known ``model.arch``, sane per-layer entries), every
file (a plain file name of a regular file inside the export; its .npy header's shape and dtype against the manifest
and the file size before any data is read; its SHA-256) and the contents (the CSR and in-degrees against
``graph.edge_index``, node ids within ``[0, N)``, bitwidths within the schema's range, input and weight codes within
their bitwidths). The integer path itself is recomputed by :meth:`QGraph.verify`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from gnn.cli import UsageError
from quant import adaptive_package, packing
from quant.convert import ConvertedGCN, load_trained, to_quantized_gcn
from quant.integer_gnn import QuantizedGCNLayer, gcn_graph, gcn_layer_trace, layer_constants
from quant.qgraph import (  # noqa: F401  the reader (numpy only), re-exported for existing imports
    ARCH_FORMATS,
    ARCH_NAMES,
    FORMAT,
    KNOWN_ARCHS,
    MANIFEST,
    MAX_CODE_BITS,
    SCHEMA_VERSION,
    SUPPORTED_SCHEMA_VERSIONS,
    ExportError,
    QGraph,
    _required,
    check_arch,
    load,
)
from quant.storage import tensor_storage


def _resolve(ref: str):
    """The object a ``"module:name"`` reference of :data:`quant.qgraph.ARCH_FORMATS` names."""
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


# arch -> (module with model_arrays / layers_meta, converter, golden model) of the integer exports but the GCN's
OTHER_INTEGER_EXPORTS = {arch: (importlib.import_module(f.writer), _resolve(f.converter), f.golden_model)
                         for arch, f in ARCH_FORMATS.items() if f.integer_path and f.writer != "quant.export"}


# ---------------------------------------------------------------------------------------- arrays of a model


def feature_arrays(prefix: str, codes8: np.ndarray, steps: np.ndarray, bits: np.ndarray, name: str = "x") -> dict:
    """``<prefix><name>_codes / _steps / _bits`` and both packed layouts (``<name>_packed.*``, ``<name>_ap.*``) of one
    feature tensor: (N, F) int8 codes, (N,) steps and signed bitwidths. Refuses codes that do not survive a round
    trip."""
    packed = packing.pack_rows(codes8, bits.astype(np.uint8))
    ap = adaptive_package.encode(codes8, bits)
    if not (np.array_equal(packing.unpack_rows(packed), codes8) and np.array_equal(adaptive_package.decode(ap),
                                                                                  codes8)):
        raise ExportError(f"export: {prefix}{name}_codes do not survive pack/unpack; refusing to write")
    p = prefix + name
    return {p + "_codes": codes8, p + "_steps": steps, p + "_bits": bits.astype(np.uint8),
            p + "_packed.payload": packed.payload, p + "_packed.bits": packed.bits,
            p + "_packed.bit_offsets": packed.bit_offsets,
            p + "_packed.group_byte_offsets": packed.group_byte_offsets,
            p + "_ap.words": ap.words, p + "_ap.bitmap": ap.bitmap, p + "_ap.first_node": ap.first_node,
            p + "_ap.first_value": ap.first_value, p + "_ap.num_values": ap.num_values}


def degree_table_arrays(prefix: str, table: dict) -> dict:
    """``<prefix>degree_min / max / bits / step`` of a degree-aware table (:func:`quant.convert.degree_table`)."""
    return {prefix + "degree_min": table["min_degree"], prefix + "degree_max": table["max_degree"],
            prefix + "degree_bits": table["bits"].astype(np.uint8), prefix + "degree_step": table["step"]}


def _layer_arrays(li: int, lay: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedGCN) -> dict:
    """Every array of layer ``li`` (see the module docstring) and its integer trace."""
    p = f"layer{li}."
    k = layer_constants(lay, graph)
    t = gcn_layer_trace(lay, x_codes, graph, constants=k)
    a = feature_arrays(p, np.asarray(x_codes, dtype=np.int8), lay.x_steps, lay.x_bits)
    a |= {p + "w_codes": lay.w_codes, p + "w_packed": packing.pack_codes(lay.w_codes.reshape(-1), lay.w_bits),
         p + "w_steps": lay.w_steps, p + "xw_steps": lay.xw_steps, p + "xw_bits": lay.xw_bits.astype(np.uint8),
         p + "xw_mult": k.xw_mult.astype(np.int32), p + "xw_shift": k.xw_shift.astype(np.uint8),
         p + "coef": k.coef.astype(np.int32),
         p + "xw_codes": t["xw"].astype(np.int8), p + "psum": t["psum"].astype(np.int32),
         p + "out": t["out"].astype(np.int8 if lay.out_steps is not None else np.int32), p + "out_unit": t["unit"]}
    if li in conv.degree_tables:
        a.update(degree_table_arrays(p, conv.degree_tables[li]))
    if lay.agg_steps is not None:
        a.update({p + "agg_steps": lay.agg_steps, p + "agg_bits": lay.agg_bits.astype(np.uint8),
                  p + "agg_mult": k.agg_mult.astype(np.int32), p + "agg_shift": k.agg_shift.astype(np.uint8)})
    return a | bias_and_output_arrays(p, lay.bias, k.bias_int, lay.out_steps is not None, k.out_mult, k.out_shift), t


def bias_and_output_arrays(prefix: str, bias, bias_int, has_next: bool, out_mult, out_shift) -> dict:
    """``<prefix>bias / bias_int`` (when the layer has a bias) and ``out_mult / out_shift`` (when it feeds a next
    layer's codes)."""
    a = {}
    if bias is not None:
        a.update({prefix + "bias": bias, prefix + "bias_int": np.asarray(bias_int, dtype=np.int64)})
    if has_next:
        a.update({prefix + "out_mult": np.asarray(out_mult, dtype=np.int32),
                  prefix + "out_shift": np.asarray(out_shift, dtype=np.uint8)})
    return a


def _accuracy(logits: np.ndarray, labels: np.ndarray, idx: np.ndarray) -> float:
    return float((logits[idx].argmax(axis=1) == labels[idx]).mean()) if idx.size else float("nan")


def model_arrays(conv: ConvertedGCN, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, dict]:
    """All arrays of a converted model and the measured storage summary (per layer and totals)."""
    n = conv.model.x_codes.shape[0]
    graph = gcn_graph(conv.edge_index, n)
    arrays = {"graph.edge_index": conv.edge_index, "graph.indptr": graph[0], "graph.indices": graph[1],
              "graph.gcn_weight": graph[2], "graph.in_degree": conv.in_degree,
              "graph.labels": np.asarray(labels, dtype=np.int64), "graph.test_index": np.asarray(test_index,
                                                                                                dtype=np.int64)}
    h, storage = conv.model.x_codes, []
    for li, lay in enumerate(conv.model.layers):
        a, t = _layer_arrays(li, lay, h, graph, conv)
        arrays.update(a)
        storage.append(tensor_storage(h, lay.x_bits, conv.edge_index, lay.w_codes, lay.w_bits, layer=li,
                                      x_scheme=conv.x_schemes[li]))
        h = t["out"]
        if lay.out_steps is None:
            arrays["logits"] = t["out"] * t["unit"]
    return arrays, _summarise_storage(storage)


def _summarise_storage(per_layer: list[dict]) -> dict:
    learned = [s for s in per_layer if s["x_scheme"] in ("node", "degree")]
    adjacency = per_layer[0]["adjacency_bytes"]

    def tot(rows, key):
        return int(sum(r[key] for r in rows))

    all_in = tot(per_layer, "feature_bytes") + tot(per_layer, "weight_bytes") + tot(per_layer, "metadata_bytes") \
        + adjacency
    fp32_all = tot(per_layer, "fp32_feature_bytes") + tot(per_layer, "fp32_weight_bytes") + adjacency
    elems = sum(r["fp32_feature_bytes"] // 4 for r in learned)
    avg = sum(r["avg_bits"] * (r["fp32_feature_bytes"] // 4) for r in learned) / elems if elems else None
    return {
        "layers": per_layer,
        "learned_feature_bytes": tot(learned, "feature_bytes"),
        "learned_fp32_feature_bytes": tot(learned, "fp32_feature_bytes"),
        "learned_avg_bits_with_sign": avg,
        "feature_bytes": tot(per_layer, "feature_bytes"),
        "fp32_feature_bytes": tot(per_layer, "fp32_feature_bytes"),
        "adjacency_bytes": adjacency,
        "all_in_bytes": all_in,
        "fp32_all_in_bytes": fp32_all,
        "all_in_ratio": fp32_all / all_in,
    }


# ---------------------------------------------------------------------------------------- writing / loading


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _file_name(name: str) -> str:
    return name + ".npy"


def write_qgraph(out: Path | str, arrays: dict[str, np.ndarray], meta: dict, overwrite: bool = False) -> Path:
    """Write ``arrays`` and ``meta`` as a versioned export directory (atomically: temp dir, then rename)."""
    out = Path(out)
    if out.exists() and not overwrite:
        raise ExportError(f"export: {out} exists; remove it or pass overwrite=True (--force)")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp-", dir=out.parent))
    entries = {}
    for name, arr in sorted(arrays.items()):
        arr = np.ascontiguousarray(arr)
        if arr.dtype == object:
            raise ExportError(f"export: array {name!r} has dtype object; only numeric arrays are exported")
        f = tmp / _file_name(name)
        np.save(f, arr, allow_pickle=False)
        entries[name] = {"file": f.name, "sha256": _sha256(f), "shape": list(arr.shape), "dtype": arr.dtype.str}
    manifest = {"format": FORMAT, "schema_version": SCHEMA_VERSION, **meta, "arrays": entries}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=_json_default))
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def _json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON-serialisable: {type(v).__name__}")


# ---------------------------------------------------------------------------------------- model / run export


def _git_commit() -> tuple[str | None, bool | None]:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None, None
    if head.returncode != 0:
        return None, None
    return head.stdout.strip(), bool(dirty.stdout.strip())


def _command() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith(("quant/export.py", "quant\\export.py")):
        argv[0] = "python -m quant.export"
    return " ".join(argv)


def _histogram(bits: np.ndarray) -> dict[str, int]:
    values, counts = np.unique(bits, return_counts=True)
    return {str(int(b)): int(c) for b, c in zip(values, counts, strict=True)}


def export_model(model: torch.nn.Module, graph, out: Path | str, *, provenance: dict | None = None,
                 frac_bits: int | None = None, psum_bits: int = 32, overwrite: bool = False) -> Path:
    """Export a quantized GCN (:mod:`quant.convert`), GraphSAGE (:mod:`quant.convert_sage`), GIN
    (:mod:`quant.convert_gin`) or GAT (:mod:`quant.convert_gat`) on ``graph`` (a node-task ``GraphData``) to
    ``out``. ``frac_bits`` None: the converter's default (14; GAT 20, ``quant/FIXED_POINT.md``)."""
    from quant.api import quant_summary

    data = graph.data
    model.eval()
    test = graph.splits[0].test.cpu().numpy()
    labels = data.y.cpu().numpy()
    with torch.no_grad():
        fake = model(data.x, data.edge_index).detach().double().cpu().numpy()  # the model as trained (float32)
    x = data.x.to_dense() if data.x.is_sparse else data.x  # the converters take dense features
    cfg = model.cfg
    if cfg.arch in OTHER_INTEGER_EXPORTS:
        module, convert, golden = OTHER_INTEGER_EXPORTS[cfg.arch]
        conv = convert(model, x, data.edge_index, psum_bits=psum_bits,
                       **({} if frac_bits is None else {"frac_bits": frac_bits}))
        arrays, per_layer = module.model_arrays(conv, labels, test)
        storage, layers = _summarise_storage(per_layer), module.layers_meta(conv)
    else:
        conv = to_quantized_gcn(model, x, data.edge_index, psum_bits=psum_bits,
                                **({} if frac_bits is None else {"frac_bits": frac_bits}))
        arrays, storage = model_arrays(conv, labels, test)
        layers, golden = _gcn_layers_meta(conv), ARCH_FORMATS["gcn"].golden_model
    logits = arrays["logits"]
    acc_fake, acc_int = _accuracy(fake, labels, test), _accuracy(logits, labels, test)
    summary = quant_summary(model)
    commit, dirty = _git_commit()
    qcfg = model._quant_cfg  # present: the converters refuse unquantized models
    meta = {
        "model": {"arch": cfg.arch, "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
                  "quant_method": qcfg.method, "target_bits": qcfg.target_bits},
        "dataset": {"name": graph.name, "num_nodes": int(data.num_nodes), "num_edges": int(data.edge_index.size(1)),
                    "num_features": int(data.x.size(1)), "num_classes": int(graph.num_classes),
                    "num_test": int(test.size)},
        "provenance": {"git_commit": commit, "git_dirty": dirty, "command": _command(),
                       "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "torch": torch.__version__, **(provenance or {})},
        "integer_path": {"golden_model": golden, "acc_bits": 32, "psum_bits": psum_bits,
                         "frac_bits": conv.model.layers[0].frac_bits,
                         "multiplier_bits": 31, "rounding": "half_away_from_zero", "overflow": "saturate",
                         "input_codes_exact": conv.input_exact, "spec": "quant/FIXED_POINT.md"},
        "layers": layers,
        "metrics": {"test_acc_fake_quant": acc_fake, "test_acc_integer": acc_int,
                    "test_acc_delta_pt": 100.0 * (acc_int - acc_fake),
                    "prediction_agreement": float((fake.argmax(1) == logits.argmax(1)).mean()),
                    "avg_bits": summary["avg_bits"], "avg_bits_with_sign": summary["avg_bits_with_sign"],
                    "bits_convention": summary["headline_convention"], "storage": storage},
    }
    return write_qgraph(out, arrays, meta, overwrite=overwrite)


def _gcn_layers_meta(conv: ConvertedGCN) -> list[dict]:
    """The manifest's per-layer description of a GCN."""
    return [{"index": li, "in_dim": int(lay.w_codes.shape[1]), "out_dim": int(lay.w_codes.shape[0]),
             "relu": lay.relu, "x_scheme": conv.x_schemes[li], "xw_scheme": lay.xw_scheme, "w_bits": lay.w_bits,
             "has_aggregate_quantizer": lay.agg_steps is not None, "has_bias": lay.bias is not None,
             "x_bits_histogram": _histogram(lay.x_bits),
             "degree_bucket_scheme": conv.degree_tables.get(li, {}).get("bucket_scheme"),
             "next_layer_codes": li + 1 < len(conv.model.layers)}
            for li, lay in enumerate(conv.model.layers)]


def export_run(run_dir: Path | str, out: Path | str, *, seed_dir: str | None = None, data_root: str | None = None,
               frac_bits: int | None = None, psum_bits: int = 32, overwrite: bool = False) -> Path:
    """Export the trained model of a ``python -m gnn.train`` run directory (its ``best.pt``)."""
    run = _load_run(run_dir, seed_dir=seed_dir, data_root=data_root)
    prov = {"run_dir": str(run_dir), "checkpoint": str(run.checkpoint), "checkpoint_sha256": _sha256(run.checkpoint)}
    return export_model(run.model, run.graph, out, provenance=prov, frac_bits=frac_bits, psum_bits=psum_bits,
                        overwrite=overwrite)


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
            f"predictions agree on {100 * m['prediction_agreement']:.2f}% of nodes)\n"
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
