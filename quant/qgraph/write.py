"""Writing a ``.qgraph`` export (numpy only): the arrays every architecture shares (a feature tensor with both
packed layouts, a degree table, bias and output constants), the storage summary, provenance, and the atomic
directory writer ``write_qgraph``. The reader is :mod:`quant.qgraph`."""


from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from quant.formats import adaptive_package, packing
from quant.qgraph import FORMAT, MANIFEST, SCHEMA_VERSION, ExportError


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

def accuracy(logits: np.ndarray, labels: np.ndarray, idx: np.ndarray) -> float:
    return float((logits[idx].argmax(axis=1) == labels[idx]).mean()) if idx.size else float("nan")

def summarise_storage(per_layer: list[dict]) -> dict:
    learned = [s for s in per_layer if s["x_scheme"] in ("node", "degree", "nns")]
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

def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()

def array_file_name(name: str) -> str:
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
        f = tmp / array_file_name(name)
        np.save(f, arr, allow_pickle=False)
        entries[name] = {"file": f.name, "sha256": sha256_file(f), "shape": list(arr.shape), "dtype": arr.dtype.str}
    manifest = {"format": FORMAT, "schema_version": SCHEMA_VERSION, **meta, "arrays": entries}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=json_default))
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out

def json_default(v):
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    raise TypeError(f"not JSON-serialisable: {type(v).__name__}")

def git_commit() -> tuple[str | None, bool | None]:
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

def command_line() -> str:
    argv = list(sys.argv)
    if argv and argv[0].endswith(("quant/export.py", "quant\\export.py")):
        argv[0] = "python -m quant.export"
    return " ".join(argv)

def bits_histogram(bits: np.ndarray) -> dict[str, int]:
    values, counts = np.unique(bits, return_counts=True)
    return {str(int(b)): int(c) for b, c in zip(values, counts, strict=True)}


def integer_model_arrays(spec, conv, labels: np.ndarray, test_index: np.ndarray, layer_arrays, layer_storage
                         ) -> tuple[dict, list[dict]]:
    """Every array of a converted integer model and its storage rows, for an architecture ``spec``
    (``quant.archs.ArchSpec``): the graph (``graph.edge_index``, the CSR of ``spec.graph`` with its per-slot array
    ``spec.slot_array``, ``graph.in_degree``, ``graph.labels``, ``graph.test_index``), then per layer
    ``layer_arrays(li, layer, codes, csr, conv) -> (arrays, trace)`` and ``layer_storage(li, layer, codes, trace,
    conv) -> [storage rows]``, each layer's output codes (``trace["out"]``) feeding the next; ``logits`` = the last
    layer's ``out * unit``."""
    csr = spec.graph(conv.edge_index, conv.model.x_codes.shape[0])
    arrays = {"graph.edge_index": conv.edge_index, "graph.indptr": csr[0], "graph.indices": csr[1],
              "graph.in_degree": conv.in_degree}
    if labels is not None:  # node labels (node tasks; a graph classifier's labels are per graph: quant.export)
        arrays |= {"graph.labels": np.asarray(labels, dtype=np.int64),
                   "graph.test_index": np.asarray(test_index, dtype=np.int64)}
    if spec.slot_array is not None:
        arrays[spec.slot_array] = csr[2]
    codes, storage, trace = conv.model.x_codes, [], None
    for li, layer in enumerate(conv.model.layers):
        a, trace = layer_arrays(li, layer, codes, csr, conv)
        arrays.update(a)
        storage += layer_storage(li, layer, codes, trace, conv)
        codes = trace["out"]
    arrays["logits"] = trace["out"] * trace["unit"]
    return arrays, storage
