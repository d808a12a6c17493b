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

:func:`load` validates an export before returning anything, and raises :class:`ExportError` naming the problem:
the manifest (an integer schema version, a known ``model.arch``, sane per-layer entries), every file (a plain file
name of a regular file inside the export; its .npy header's shape and dtype against the manifest and the file size
before any data is read; its SHA-256) and the contents (the CSR and in-degrees against ``graph.edge_index``, node ids
within ``[0, N)``, bitwidths within the schema's range, input and weight codes within their bitwidths). The
integer path itself is recomputed by :meth:`QGraph.verify`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import pickle
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from gnn.cli import UsageError
from quant import adaptive_package, export_gat, export_gin, export_sage, packing
from quant.convert import ConvertedGCN, load_trained, to_quantized_gcn
from quant.convert_gat import to_quantized_gat
from quant.convert_gin import to_quantized_gin
from quant.convert_sage import to_quantized_sage
from quant.fixed_point import code_limit
from quant.integer_gat import gat_graph
from quant.integer_gin import gin_graph
from quant.integer_gnn import QuantizedGCN, QuantizedGCNLayer, gcn_graph, gcn_layer_trace, layer_constants
from quant.integer_sage import sage_graph
from quant.storage import tensor_storage

FORMAT = "qgraph"
SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
MANIFEST = "manifest.json"


class ExportError(ValueError):
    """An export that cannot be written or read back intact."""


# arch -> (module with model_arrays / layers_meta / integer_model / verify / required_arrays, converter, golden model)
OTHER_INTEGER_EXPORTS = {export_sage.ARCH: (export_sage, to_quantized_sage, "quant.integer_sage"),
                         export_gin.ARCH: (export_gin, to_quantized_gin, "quant.integer_gin"),
                         export_gat.ARCH: (export_gat, to_quantized_gat, "quant.integer_gat")}
ARCH_NAMES = {"gcn": "GCN", "sage": "GraphSAGE", "gin": "GIN", "gat": "GAT"}


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


@dataclass(frozen=True)
class QGraph:
    """A loaded, verified export: ``manifest`` (dict) and ``arrays`` (name -> read-only ndarray)."""

    path: Path
    manifest: dict
    arrays: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            raise ExportError(f"{self.path}: no array {name!r}; the export has {len(self.arrays)} arrays "
                              f"(e.g. {', '.join(sorted(self.arrays)[:5])})")
        return self.arrays[name]

    @property
    def arch(self) -> str | None:
        """The exported model's architecture (``"gcn"``, ``"sage"``, ``"graph-transformer"``)."""
        model = self.manifest.get("model")
        return model.get("arch") if isinstance(model, dict) else None

    @property
    def is_graph_transformer(self) -> bool:
        """A graph-transformer export (:mod:`quant.export_transformer`): quantized tensors, no integer path."""
        return _is_transformer(self.manifest)

    def feature_streams(self, prefix: str, num_nodes: int, num_features: int, name: str = "x") -> tuple[
            packing.PackedRows, adaptive_package.AdaptivePackageStream]:
        """The packed rows (``<prefix><name>_packed.*``) and Adaptive-Package stream (``<prefix><name>_ap.*``) of
        one feature tensor of (num_nodes, num_features) codes."""
        p = prefix + name
        packed = packing.PackedRows(payload=self[p + "_packed.payload"], bits=self[p + "_packed.bits"],
                                    bit_offsets=self[p + "_packed.bit_offsets"],
                                    group_byte_offsets=self[p + "_packed.group_byte_offsets"],
                                    num_features=num_features)
        ap = adaptive_package.AdaptivePackageStream(
            words=self[p + "_ap.words"], bitmap=self[p + "_ap.bitmap"], first_node=self[p + "_ap.first_node"],
            first_value=self[p + "_ap.first_value"], num_values=self[p + "_ap.num_values"], num_nodes=num_nodes,
            num_features=num_features)
        return packed, ap

    def packed_checks(self, prefix: str, codes: np.ndarray, name: str = "x"
                      ) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """``(array name, codes, decoded)`` for both packed layouts of one exported feature tensor (for
        :meth:`check_recomputed`)."""
        packed, ap = self.feature_streams(prefix, *codes.shape, name=name)
        return [(f"{name}_packed.payload", codes, packing.unpack_rows(packed)),
                (f"{name}_ap.words", codes, adaptive_package.decode(ap))]

    def check_recomputed(self, prefix: str, checks: list[tuple[str, np.ndarray, np.ndarray]]) -> None:
        """Raise ExportError naming the first ``prefix + name`` whose exported (or decoded) integers differ from the
        ones recomputed from the exported parameters."""
        for name, want, got in checks:
            if not np.array_equal(np.asarray(want, dtype=np.int64), np.asarray(got, dtype=np.int64)):
                raise ExportError(f"{self.path}: array '{prefix}{name}' disagrees with the integer path recomputed "
                                  "from the exported parameters")

    def to_quantized_gcn(self) -> QuantizedGCN:
        """The integer model the arrays describe (:class:`quant.integer_gnn.QuantizedGCN`)."""
        if self.is_graph_transformer:
            raise ExportError(f"{self.path}: a graph-transformer export carries quantized tensors, not a GCN "
                              "integer path; read its tensors with quant.export_transformer.point_streams or "
                              "hw.tensor_traffic")
        if self.arch in OTHER_INTEGER_EXPORTS:
            module = OTHER_INTEGER_EXPORTS[self.arch][0].__name__
            raise ExportError(f"{self.path}: a {ARCH_NAMES[self.arch]} export, not a GCN; its integer model is "
                              f"{module}.integer_model(q); hw.workload.workload_from_export reads GIN and GraphSAGE "
                              "exports for the accelerator model")
        check_arch(self.arch, str(self.path))  # what is left of the known archs is a GCN
        ip, layers = self.manifest["integer_path"], []
        num = len(self.manifest["layers"])
        for li, meta in enumerate(self.manifest["layers"]):
            p, nxt = f"layer{li}.", f"layer{li + 1}."
            has_agg, last = meta["has_aggregate_quantizer"], li == num - 1
            layers.append(QuantizedGCNLayer(
                x_steps=self[p + "x_steps"], x_bits=self[p + "x_bits"], w_codes=self[p + "w_codes"],
                w_steps=self[p + "w_steps"], w_bits=meta["w_bits"], xw_steps=self[p + "xw_steps"],
                xw_bits=self[p + "xw_bits"], xw_scheme=meta["xw_scheme"],
                agg_steps=self[p + "agg_steps"] if has_agg else None,
                agg_bits=self[p + "agg_bits"] if has_agg else None,
                bias=self[p + "bias"] if meta["has_bias"] else None,
                out_steps=None if last else self[nxt + "x_steps"], out_bits=None if last else self[nxt + "x_bits"],
                relu=meta["relu"], frac_bits=ip["frac_bits"], psum_bits=ip["psum_bits"]))
        return QuantizedGCN(x_codes=self["layer0.x_codes"], layers=tuple(layers))

    def verify(self) -> None:
        """Recompute the integer path and decode both packed layouts; raise ExportError naming the first array
        that disagrees (a consumer's bit-exactness check). Graph-transformer exports: decode every packed tensor."""
        if self.is_graph_transformer:
            from quant.export_transformer import verify

            verify(self)
            return
        if self.arch in OTHER_INTEGER_EXPORTS:
            OTHER_INTEGER_EXPORTS[self.arch][0].verify(self)
            return
        model = self.to_quantized_gcn()
        graph = gcn_graph(self["graph.edge_index"], model.x_codes.shape[0])
        h = model.x_codes
        for li, lay in enumerate(model.layers):
            p = f"layer{li}."
            t = gcn_layer_trace(lay, h, graph)
            k = layer_constants(lay, graph)
            self.check_recomputed(p, [("x_codes", h, self[p + "x_codes"]), *self.packed_checks(p, h),
                                      ("xw_mult", k.xw_mult, self[p + "xw_mult"]), ("coef", k.coef, self[p + "coef"]),
                                      ("xw_codes", t["xw"], self[p + "xw_codes"]),
                                      ("psum", t["psum"], self[p + "psum"]), ("out", t["out"], self[p + "out"])])
            h = t["out"]


# ---------------------------------------------------------------------------------------- reading (validated)

KNOWN_ARCHS = (*ARCH_NAMES, "graph-transformer")  # the integer exports, and the graph transformer's tensors
MAX_CODE_BITS = 8  # int8 code containers (a GIN's 16-bit fixed-point hidden codes live in int16)
# Every dtype the exporter writes, in either byte order; the manifest and the .npy header must name one of these.
_NUMERIC_DTYPES = frozenset(np.dtype(order + t).str for order in "<>"
                            for t in ("b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8"))
_MAX_NDIM = 32
_INTEGER_PATH = {"frac_bits": (0, 62), "psum_bits": (2, 64)}
# arch -> the per-layer manifest keys its readers use, and what each must be
_LAYER_META = {
    "gcn": {"in_dim": "dim", "out_dim": "dim", "w_bits": "bits", "relu": bool, "has_aggregate_quantizer": bool,
            "has_bias": bool, "xw_scheme": str},
    "sage": {"in_dim": "dim", "out_dim": "dim", "w_bits": "bits", "relu": bool, "has_bias": bool},
    "gin": {"in_dim": "dim", "hidden_dim": "dim", "out_dim": "dim", "w_bits": "bits", "relu": bool, "has_b1": bool,
            "has_b2": bool, "x_step_scheme": "step_scheme", "hid_scheme": str},
    "gat": {"in_dim": "dim", "heads": "dim", "channels": "dim", "w_bits": "bits", "att_bits": "bits",
            "score_bits": "bits", "concat": bool, "negative_slope": "number", "has_bias": bool,
            "next_layer_codes": bool},
}
# arch -> per layer (weight codes, manifest key of their bitwidth, their shape from the layer's manifest entry)
_LAYER_WEIGHTS = {
    "gcn": (("w_codes", "w_bits", lambda m: (m["out_dim"], m["in_dim"])),),
    "sage": (("wn_codes", "w_bits", lambda m: (m["out_dim"], m["in_dim"])),
             ("wr_codes", "w_bits", lambda m: (m["out_dim"], m["in_dim"]))),
    "gin": (("w1_codes", "w_bits", lambda m: (m["hidden_dim"], m["in_dim"])),
            ("w2_codes", "w_bits", lambda m: (m["out_dim"], m["hidden_dim"]))),
    "gat": (("w_codes", "w_bits", lambda m: (m["heads"] * m["channels"], m["in_dim"])),
            ("att_src_codes", "att_bits", lambda m: (m["heads"], m["channels"])),
            ("att_dst_codes", "att_bits", lambda m: (m["heads"], m["channels"]))),
}
# arch -> the CSR its golden model aggregates over (indptr, indices, per-slot data) and the export's per-slot array
_GRAPHS = {"gcn": gcn_graph, "sage": sage_graph, "gin": gin_graph, "gat": gat_graph}
_SLOT_ARRAYS = {"gcn": "graph.gcn_weight", "sage": "graph.mean_weight", "gin": "graph.self_loop"}


def check_arch(arch, where: str) -> str:
    """``arch`` if it is one this package exports; else ExportError naming the known ones (an unknown arch must never
    be read as another, e.g. simulated as a GCN)."""
    if not isinstance(arch, str) or arch not in KNOWN_ARCHS:
        raise ExportError(f"{where}: unknown architecture (model.arch) {arch!r}; known: {', '.join(KNOWN_ARCHS)}")
    return arch


def load(path: Path | str) -> QGraph:
    """Load and validate an export; raises ExportError naming the problem. Checks, before any consumer sees an array:
    the manifest (schema version, architecture, per-layer entries), each file (a regular file inside the export;
    its .npy header against the manifest's shape and dtype and the file size, then its SHA-256) and the contents
    (CSR and degrees against ``graph.edge_index``, bitwidths in range, codes within their bitwidths)."""
    path = Path(path)
    manifest = _read_manifest(path)
    root = path.resolve()
    arrays = {name: _read_array(path, root, name, e) for name, e in manifest["arrays"].items()}
    missing = [n for n in _required(manifest) if n not in arrays]
    if missing:
        raise ExportError(f"load: {path} lacks required array(s) {missing}; the export is incomplete")
    _check_contents(path, manifest, arrays)
    return QGraph(path=path, manifest=manifest, arrays=arrays)


def _read_manifest(path: Path) -> dict:
    """The parsed, structurally checked manifest of the export at ``path``."""
    mpath = path / MANIFEST
    if mpath.is_symlink():
        raise ExportError(f"load: {mpath} is a symbolic link; an export holds its own regular files")
    if not mpath.is_file():
        raise ExportError(f"load: {mpath} not found; {path} is not a .qgraph export directory")
    try:
        manifest = json.loads(mpath.read_text())
    except OSError as e:
        raise ExportError(f"load: cannot read {mpath} ({e.strerror or e})") from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ExportError(f"load: {mpath} is not valid JSON ({e}); the manifest is truncated or corrupted") from None
    if not isinstance(manifest, dict):
        raise ExportError(f"load: {mpath} holds a JSON {type(manifest).__name__}, not an object")
    if manifest.get("format") != FORMAT:
        raise ExportError(f"load: {mpath} has format {manifest.get('format')!r}, expected {FORMAT!r}")
    _check_version(path, manifest.get("schema_version"))
    model = manifest.get("model")
    arch = check_arch(model.get("arch") if isinstance(model, dict) else None, f"load: {path}")
    if not isinstance(manifest.get("arrays"), dict):
        raise ExportError(f"load: {mpath} has no 'arrays' object")
    if arch == "graph-transformer":
        _check_tensor_entries(path, manifest)
    else:
        _check_integer_meta(path, arch, manifest)
    return manifest


def _check_version(path: Path, version) -> None:
    if type(version) is not int:  # True == 1 == 1.0 in Python: bools, floats and strings never pass
        raise ExportError(f"load: {path} has schema_version {version!r} ({type(version).__name__}); it must be an "
                          f"integer; this reader supports {SUPPORTED_SCHEMA_VERSIONS}")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        newer = version > SCHEMA_VERSION
        raise ExportError(f"load: {path} has schema_version {version!r}; this reader supports "
                          f"{SUPPORTED_SCHEMA_VERSIONS}" + ("; it was written by a newer exporter, update the "
                                                            "quant package" if newer else ""))


def _meta_ok(kind, v) -> bool:
    """Whether a manifest value ``v`` is of ``kind`` (a type, or "dim", "bits", "number", "step_scheme")."""
    if kind == "dim":
        return type(v) is int and v >= 1
    if kind == "bits":
        return type(v) is int and 1 <= v <= MAX_CODE_BITS
    if kind == "number":
        return type(v) in (int, float) and np.isfinite(v)
    if kind == "step_scheme":
        return v in ("node", "channel")
    return type(v) is kind


def _check_integer_meta(path: Path, arch: str, manifest: dict) -> None:
    """``integer_path`` and ``layers`` of a GCN, GraphSAGE, GIN or GAT export: what their readers index."""
    ip = manifest.get("integer_path")
    for key, (lo, hi) in _INTEGER_PATH.items():
        v = ip.get(key) if isinstance(ip, dict) else None
        if type(v) is not int or not lo <= v <= hi:
            raise ExportError(f"load: {path}: integer_path.{key} is {v!r}; expected an integer in [{lo}, {hi}]")
    layers = manifest.get("layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(m, dict) for m in layers):
        raise ExportError(f"load: {path}: 'layers' must be a non-empty list of per-layer objects")
    for li, meta in enumerate(layers):
        if meta.get("index", li) != li:
            raise ExportError(f"load: {path}: layers[{li}] has index {meta.get('index')!r}")
        for key, kind in _LAYER_META[arch].items():
            if not _meta_ok(kind, meta.get(key)):
                want = kind.__name__ if isinstance(kind, type) else {
                    "dim": "an integer >= 1", "bits": f"a bitwidth in 1..{MAX_CODE_BITS}", "number": "a finite number",
                    "step_scheme": "'node' or 'channel'"}[kind]
                raise ExportError(f"load: {path}: layers[{li}].{key} is {meta.get(key)!r}; expected {want}")


def _check_tensor_entries(path: Path, manifest: dict) -> None:
    """``points`` and ``weights`` of a graph-transformer export: lists of objects with a string ``name``."""
    for key in ("points", "weights"):
        items = manifest.get(key)
        if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("name"), str)
                                                  for i in items):
            raise ExportError(f"load: {path}: '{key}' must be a list of objects with a string 'name'")


def _entry(name: str, e) -> tuple[str, tuple[int, ...], np.dtype]:
    """(file name, shape, dtype) of a manifest array entry, each checked to be sane before any file is opened."""
    if not isinstance(e, dict) or not isinstance(e.get("sha256"), str):
        raise ExportError(f"load: array {name!r}: the manifest entry needs 'file', 'sha256', 'shape' and 'dtype'")
    file, shape, dtype = e.get("file"), e.get("shape"), e.get("dtype")
    if not isinstance(file, str) or file in ("", ".", "..") or any(c in file for c in "/\\\0") or \
            os.path.basename(file) != file:
        raise ExportError(f"load: array {name!r}: file {file!r} is not a plain file name inside the export (no "
                          "directories, '..' or absolute paths)")
    if not isinstance(shape, list) or len(shape) > _MAX_NDIM or not all(type(d) is int and d >= 0 for d in shape):
        raise ExportError(f"load: array {name!r}: manifest shape {shape!r} is not a list of non-negative integers")
    if dtype not in _NUMERIC_DTYPES:
        raise ExportError(f"load: array {name!r}: manifest dtype {dtype!r} is not a numeric dtype the exporter "
                          f"writes ({', '.join(sorted(_NUMERIC_DTYPES))})")
    return file, tuple(shape), np.dtype(dtype)


def _read_array(path: Path, root: Path, name: str, e) -> np.ndarray:
    """One array, read only after its file, .npy header and size agree with the manifest entry ``e``."""
    file, shape, dtype = _entry(name, e)
    f = path / file
    try:
        st = os.lstat(f)
    except FileNotFoundError:
        raise ExportError(f"load: array {name!r}: file {f} is missing") from None
    except OSError as err:
        raise ExportError(f"load: array {name!r}: cannot read {f} ({err.strerror or err})") from None
    if stat.S_ISLNK(st.st_mode):
        raise ExportError(f"load: array {name!r}: {f} is a symbolic link; an export holds its own regular files")
    if not stat.S_ISREG(st.st_mode) or f.resolve().parent != root:
        raise ExportError(f"load: array {name!r}: {f} is not a regular file inside the export")
    try:
        return _read_npy(name, f, e["sha256"], shape, dtype)
    except OSError as err:  # e.g. replaced by a symlink since the lstat (O_NOFOLLOW)
        raise ExportError(f"load: array {name!r}: cannot read {f} ({err.strerror or err})") from None


def _read_npy(name: str, f: Path, sha256: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Header first (shape, dtype, size against the manifest: a forged header never allocates), then the
    checksum of the whole file, then the data (read-only)."""
    with os.fdopen(os.open(f, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as fh:
        h_shape, fortran, h_dtype = _npy_header(name, f, fh)
        offset = fh.tell()
        if h_dtype.str != dtype.str or tuple(h_shape) != shape:
            raise ExportError(f"load: array {name!r}: shape {h_shape} dtype {h_dtype.str} in the header of {f.name} "
                              f"differ from the manifest ({list(shape)}, {dtype.str})")
        count = math.prod(shape)
        data_bytes, want = os.fstat(fh.fileno()).st_size - offset, count * dtype.itemsize
        if data_bytes != want:
            raise ExportError(f"load: array {name!r}: {f.name} holds {data_bytes} data bytes but its header declares "
                              f"{shape} {dtype.str} ({want} bytes); the file is truncated or padded")
        fh.seek(0)
        raw = fh.read()
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise ExportError(f"load: array {name!r}: SHA-256 of {f.name} does not match the manifest (the file is "
                          "truncated or corrupted); re-export")
    arr = np.frombuffer(raw, dtype=dtype, count=count, offset=offset) if count else np.empty(0, dtype=dtype)
    return arr.reshape(shape, order="F" if fortran else "C")  # a view of immutable bytes: read-only


def _npy_header(name: str, f: Path, fh) -> tuple:
    """(shape, fortran_order, dtype) of an open .npy file (format 1.0 or 2.0, as ``np.save`` writes)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"format version {version} is not 1.0 or 2.0")
        return (fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0)(fh)
    except (ValueError, TypeError, SyntaxError) as e:
        raise ExportError(f"load: array {name!r}: {f.name} has no valid .npy header ({e})") from None


# ---------------------------------------------------------------------------------------- contents


def _check_contents(path: Path, manifest: dict, arrays: dict[str, np.ndarray]) -> None:
    """The structural invariants every consumer relies on (the graph, bitwidths, codes)."""
    arch = manifest["model"]["arch"]
    n = _num_nodes(path, manifest, arrays)
    _check_graph(path, arch, arrays, n)
    _check_bitwidths(path, arrays)
    if arch == "graph-transformer":
        for p in manifest["points"]:
            b = f"point.{p['name']}."
            codes = _codes(path, arrays, b + "x_codes", (n, None))
            _check_within(path, arrays, b + "x_codes", codes, b + "x_bits")
        for w in manifest["weights"]:
            b = f"weight.{w['name']}."
            _check_within(path, arrays, b + "w_codes", _codes(path, arrays, b + "w_codes", (None, None)), b + "w_bits")
        return
    for li, meta in enumerate(manifest["layers"]):
        p = f"layer{li}."
        codes = _codes(path, arrays, p + "x_codes", (n, meta["in_dim"]))
        _check_within(path, arrays, p + "x_codes", codes, p + "x_bits", per_channel=meta.get("x_step_scheme") ==
                      "channel")
        for wname, bits_key, shape in _LAYER_WEIGHTS[arch]:
            _check_within(path, arrays, p + wname, _codes(path, arrays, p + wname, shape(meta)), meta[bits_key])


def _index_array(path: Path, arrays: dict, name: str, ndim: int) -> np.ndarray:
    """Array ``name`` as int64, refused unless it is a signed-integer array of ``ndim`` dimensions."""
    a = arrays[name]
    if a.dtype.kind != "i" or a.ndim != ndim:
        raise ExportError(f"load: {path}: array '{name}' is {a.dtype.str} of shape {a.shape}; expected a {ndim}-D "
                          "signed-integer array")
    return a.astype(np.int64, copy=False)


def _check_ids(path: Path, name: str, a: np.ndarray, n: int) -> None:
    if a.size and (a.min() < 0 or a.max() >= n):
        raise ExportError(f"load: {path}: array '{name}' holds node ids in [{a.min()}, {a.max()}], outside [0, {n})")


def _num_nodes(path: Path, manifest: dict, arrays: dict) -> int:
    """N, the length of ``graph.in_degree`` (the manifest's ``dataset.num_nodes`` must agree)."""
    n = _index_array(path, arrays, "graph.in_degree", 1).shape[0]
    ds = manifest.get("dataset")
    declared = ds.get("num_nodes", n) if isinstance(ds, dict) else n
    if type(declared) is not int or declared != n:
        raise ExportError(f"load: {path}: dataset.num_nodes {declared!r} disagrees with 'graph.in_degree' ({n} "
                          "nodes)")
    return n


def _check_graph(path: Path, arch: str, arrays: dict, n: int) -> None:
    """Edges within [0, N), in-degrees of them, and (GCN, GraphSAGE, GIN, GAT) the exported CSR equal to the one
    the golden model builds from ``graph.edge_index``: consumers rebuild it from the edges, so the two must agree."""
    ei = _index_array(path, arrays, "graph.edge_index", 2)
    if ei.shape[0] != 2:
        raise ExportError(f"load: {path}: array 'graph.edge_index' has shape {ei.shape}; expected (2, E)")
    _check_ids(path, "graph.edge_index", ei, n)
    if not np.array_equal(arrays["graph.in_degree"], np.bincount(ei[1], minlength=n)):
        raise ExportError(f"load: {path}: array 'graph.in_degree' disagrees with the in-degrees of 'graph.edge_index'")
    if "graph.labels" in arrays and _index_array(path, arrays, "graph.labels", 1).shape != (n,):
        raise ExportError(f"load: {path}: array 'graph.labels' has shape {arrays['graph.labels'].shape}; expected "
                          f"({n},)")
    if "graph.test_index" in arrays:
        _check_ids(path, "graph.test_index", _index_array(path, arrays, "graph.test_index", 1), n)
    if arch in _GRAPHS:
        _check_csr(path, arch, arrays, ei, n)


def _check_csr(path: Path, arch: str, arrays: dict, ei: np.ndarray, n: int) -> None:
    indptr = _index_array(path, arrays, "graph.indptr", 1)
    indices = _index_array(path, arrays, "graph.indices", 1)
    if indptr.shape != (n + 1,):
        raise ExportError(f"load: {path}: array 'graph.indptr' has shape {indptr.shape}; expected ({n + 1},)")
    if indptr[0] != 0 or indptr[-1] != indices.size:
        raise ExportError(f"load: {path}: array 'graph.indptr' runs from {indptr[0]} to {indptr[-1]}; a CSR runs "
                          f"from 0 to len('graph.indices') = {indices.size}")
    rows = np.diff(indptr)
    if (rows < 0).any():
        raise ExportError(f"load: {path}: array 'graph.indptr' is not non-decreasing (row {int(np.argmax(rows < 0))})")
    _check_ids(path, "graph.indices", indices, n)
    want = _GRAPHS[arch](ei, n)
    if not np.array_equal(rows, np.diff(want[0])):
        raise ExportError(f"load: {path}: row lengths of 'graph.indptr' disagree with the in-degrees of "
                          f"'graph.edge_index' (the {ARCH_NAMES[arch]} graph)")
    if not np.array_equal(indices, want[1]):
        raise ExportError(f"load: {path}: array 'graph.indices' is not the {ARCH_NAMES[arch]} CSR of "
                          "'graph.edge_index'")
    slot = _SLOT_ARRAYS.get(arch)
    if slot in arrays and not np.array_equal(arrays[slot], want[2]):
        raise ExportError(f"load: {path}: array '{slot}' disagrees with the CSR of 'graph.edge_index'")


def _check_bitwidths(path: Path, arrays: dict) -> None:
    """Every bitwidth array (``*_bits``, ``*.bits``) holds integers in 1..the width of its codes' container."""
    for name, a in arrays.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf != "bits" and not leaf.endswith("_bits"):
            continue
        codes = arrays.get(name[: -len("bits")] + "codes")
        cap = 8 * codes.dtype.itemsize if codes is not None and codes.dtype.kind == "i" else MAX_CODE_BITS
        if a.dtype.kind not in "iu":
            raise ExportError(f"load: {path}: array '{name}' is {a.dtype.str}; bitwidths are integers")
        if a.size and (a.min() < 1 or a.max() > cap):
            raise ExportError(f"load: {path}: array '{name}' holds bitwidths in [{a.min()}, {a.max()}], outside "
                              f"the schema's 1..{cap}")


def _codes(path: Path, arrays: dict, name: str, shape: tuple) -> np.ndarray:
    """Array ``name``: signed-integer codes of ``shape`` (None: any length)."""
    a = arrays[name]
    if a.dtype.kind != "i" or a.ndim != len(shape) or any(w is not None and w != d for w, d in zip(shape, a.shape,
                                                                                                  strict=True)):
        raise ExportError(f"load: {path}: array '{name}' is {a.dtype.str} of shape {a.shape}; expected integer codes "
                          f"of shape {tuple('*' if w is None else w for w in shape)}")
    return a


def _check_within(path: Path, arrays: dict, name: str, codes: np.ndarray, bits, per_channel: bool = False) -> None:
    """Codes within their signed bitwidths (``|code| <= 2^(b-1) - 1``, :func:`quant.fixed_point.code_limit`, as the
    exporter writes every tensor, unsigned post-ReLU ones included). ``bits``: an int (all codes), or the name of a
    per-row (per-column when ``per_channel``) bitwidth array."""
    if not codes.size:
        return
    if isinstance(bits, str):
        b, want = arrays[bits], codes.shape[1 if per_channel else 0]
        if b.shape != (want,):
            raise ExportError(f"load: {path}: array '{bits}' has shape {b.shape}; expected ({want},), one bitwidth "
                              f"per {'column' if per_channel else 'row'} of '{name}'")
        axis = 0 if per_channel else 1  # reduce over the other axis: a max and a min per bitwidth
        hi, lo, limit = codes.max(axis=axis), codes.min(axis=axis), code_limit(b)
    else:
        hi, lo, limit = codes.max(), codes.min(), code_limit(bits)
    if (hi > limit).any() or (lo < -limit).any():
        raise ExportError(f"load: {path}: array '{name}' holds codes outside their bitwidths")


def _is_transformer(manifest: dict) -> bool:
    model = manifest.get("model")
    return isinstance(model, dict) and model.get("arch") == "graph-transformer"


def _required(manifest: dict) -> list[str]:
    if _is_transformer(manifest):
        from quant.export_transformer import required_arrays

        return required_arrays(manifest)
    arch = manifest.get("model", {}).get("arch")
    if arch in OTHER_INTEGER_EXPORTS:
        return OTHER_INTEGER_EXPORTS[arch][0].required_arrays(manifest)
    names = ["graph.edge_index", "graph.indptr", "graph.indices", "graph.in_degree", "logits"]
    for li, meta in enumerate(manifest.get("layers", [])):
        p = f"layer{li}."
        names += [p + s for s in ("x_codes", "x_steps", "x_bits", "w_codes", "w_steps", "xw_steps", "xw_bits",
                                  "xw_mult", "xw_shift", "coef", "xw_codes", "psum", "out", "out_unit")]
        names += [p + s for s in ("agg_steps", "agg_bits") if meta.get("has_aggregate_quantizer")]
        names += [p + "bias"] if meta.get("has_bias") else []
        names += [p + s for s in ("degree_min", "degree_max", "degree_bits", "degree_step")
                  if meta.get("x_scheme") == "degree"]
    return names


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
        layers, golden = _gcn_layers_meta(conv), "quant.integer_gnn"
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
