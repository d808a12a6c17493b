"""Reading a graph-transformer ``.qgraph`` export (numpy only): the arrays it must hold, each node tensor's packed
streams, and the decode check of every packed tensor (the export carries quantized tensors, no integer path). The
arrays are documented by the writer, :mod:`quant.archs.transformer.export`; :func:`quant.qgraph.load` validates the
export
first."""

from __future__ import annotations

import numpy as np

from quant.formats import adaptive_package, packing
from quant.qgraph import ExportError

ARCH = "graph-transformer"


def required_arrays(manifest: dict) -> list[str]:
    """Array names a graph-transformer export must hold (``quant.qgraph.load`` checks them)."""
    names = ["graph.edge_index", "graph.in_degree", "logits"]
    for p in manifest.get("points", []):
        base = f"point.{p['name']}."
        names += [base + s for s in ("x_codes", "x_steps", "x_bits", "x_packed.payload", "x_packed.bits",
                                     "x_packed.bit_offsets", "x_packed.group_byte_offsets", "x_ap.words",
                                     "x_ap.bitmap", "x_ap.first_node", "x_ap.first_value", "x_ap.num_values")]
        if p.get("scheme") == "degree":
            names += [base + s for s in ("degree_min", "degree_max", "degree_bits", "degree_step")]
    for w in manifest.get("weights", []):
        names += [f"weight.{w['name']}." + s for s in ("w_codes", "w_steps", "w_bits", "w_packed.payload")]
    return names


def point_streams(q, name: str) -> tuple[packing.PackedRows, adaptive_package.AdaptivePackageStream]:
    """The packed rows and Adaptive-Package stream of node tensor ``name`` of a loaded export ``q``."""
    p = f"point.{name}."
    return q.feature_streams(p, *q[p + "x_codes"].shape)


def verify(q) -> None:
    """Decode every node tensor's packed rows and Adaptive-Package stream and unpack every weight; each must equal
    the exported codes, and every code must fit its bitwidth. Raises ExportError naming the first array that
    disagrees."""
    for p in q.manifest["points"]:
        base = f"point.{p['name']}."
        codes = q[base + "x_codes"]
        packed, ap = point_streams(q, p["name"])
        limit = (1 << (q[base + "x_bits"].astype(np.int64) - 1)) - 1
        if (np.abs(codes.astype(np.int64)) > limit[:, None]).any():
            raise ExportError(f"{q.path}: array '{base}x_codes' holds codes outside their bitwidths")
        for array, got in (("x_packed.payload", packing.unpack_rows(packed)),
                           ("x_ap.words", adaptive_package.decode(ap))):
            if not np.array_equal(got, codes):
                raise ExportError(f"{q.path}: array '{base}{array}' does not decode to '{base}x_codes'")
    for w in q.manifest["weights"]:
        base = f"weight.{w['name']}."
        codes = q[base + "w_codes"]
        packed = packing.PackedRows(payload=q[base + "w_packed.payload"], bits=q[base + "w_packed.bits"],
                                    bit_offsets=q[base + "w_packed.bit_offsets"],
                                    group_byte_offsets=q[base + "w_packed.group_byte_offsets"],
                                    num_features=codes.shape[1])
        if not np.array_equal(packing.unpack_rows(packed), codes):
            raise ExportError(f"{q.path}: array '{base}w_packed.payload' does not decode to '{base}w_codes'")


__all__ = ["ARCH", "point_streams", "required_arrays", "verify"]
