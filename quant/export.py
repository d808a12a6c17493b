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


def export_model(model: torch.nn.Module, graph, out: Path | str, *, provenance: dict | None = None,
                 frac_bits: int | None = None, psum_bits: int = 32, overwrite: bool = False) -> Path:
    """Export a quantized GCN (:mod:`quant.convert`), GraphSAGE (:mod:`quant.archs.sage.convert`), GIN
    (:mod:`quant.archs.gin.convert`) or GAT (:mod:`quant.archs.gat.convert`) on ``graph`` (a node-task ``GraphData``) to
    ``out``. ``frac_bits`` None: the converter's default (14; GAT 20, ``quant/FIXED_POINT.md``)."""
    from quant.qat.api import quant_config_of, quant_summary

    data = graph.data
    model.eval()
    test = graph.splits[0].test.cpu().numpy()
    labels = data.y.cpu().numpy()
    with torch.no_grad():
        fake = model(data.x, data.edge_index).detach().double().cpu().numpy()  # the model as trained (float32)
    x = data.x.to_dense() if data.x.is_sparse else data.x  # the converters take dense features
    cfg = model.cfg
    if cfg.arch not in integer_archs():
        raise ExportError(f"export: no integer path for architecture {cfg.arch!r}; exportable: "
                          f"{', '.join(integer_archs())} (quant.archs)")
    arch = ARCHS[cfg.arch]
    conv = arch.convert(model, x, data.edge_index, psum_bits=psum_bits,
                        **({} if frac_bits is None else {"frac_bits": frac_bits}))
    writer = arch.module("export")
    arrays, per_layer = writer.model_arrays(conv, labels, test)
    storage, layers, golden = summarise_storage(per_layer), writer.layers_meta(conv), arch.golden_model
    logits = arrays["logits"]
    acc_fake, acc_int = accuracy(fake, labels, test), accuracy(logits, labels, test)
    summary = quant_summary(model)
    commit, dirty = git_commit()
    qcfg = quant_config_of(model)  # present: the converters refuse unquantized models
    meta = {
        "model": {"arch": cfg.arch, "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
                  "quant_method": qcfg.method, "target_bits": qcfg.target_bits},
        "dataset": {"name": graph.name, "num_nodes": int(data.num_nodes), "num_edges": int(data.edge_index.size(1)),
                    "num_features": int(data.x.size(1)), "num_classes": int(graph.num_classes),
                    "num_test": int(test.size)},
        "provenance": {"git_commit": commit, "git_dirty": dirty, "command": command_line(),
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


def export_run(run_dir: Path | str, out: Path | str, *, seed_dir: str | None = None, data_root: str | None = None,
               frac_bits: int | None = None, psum_bits: int = 32, overwrite: bool = False) -> Path:
    """Export the trained model of a ``python -m gnn.train`` run directory (its ``best.pt``)."""
    run = _load_run(run_dir, seed_dir=seed_dir, data_root=data_root)
    prov = {"run_dir": str(run_dir), "checkpoint": str(run.checkpoint),
            "checkpoint_sha256": sha256_file(run.checkpoint)}
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
