"""What the accelerator's memory system and decoder make of a graph-transformer export's tensors.

A graph transformer's attention is not a GCN layer, so ``hw.simulate`` cannot run it as one; its quantized node
tensors still travel through DRAM and the Adaptive-Package decoder like a GCN's features. For every node tensor of
a ``quant.archs.transformer.export`` export this reports the bytes of the FP32 tensor, of the plain bit-packed rows, of
the exported Adaptive-Package stream (packages + bitmap + boundary records, :mod:`hw.layout`), and the decoder
cycles of that exact stream (:func:`hw.timing.decoder_stream_cycles`, the cycle count the RTL decoder matches).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hw.layout import BOUNDARY_RECORD_BYTES, package_lengths
from hw.timing import decoder_stream_cycles


def feature_traffic(source) -> list[dict]:
    """One row per node tensor of a graph-transformer export (a path or a loaded ``QGraph``)."""
    from quant.archs.transformer.reader import point_streams
    from quant.qgraph import ExportError, load

    q = load(source) if isinstance(source, str | Path) else source
    if not q.is_graph_transformer:
        raise ExportError(f"feature_traffic: {q.path} is a GCN export; simulate it with python -m hw.simulate")
    rows = []
    for p in q.manifest["points"]:
        packed, ap = point_streams(q, p["name"])
        n, f = p["rows"], p["features"]
        bits = q[f"point.{p['name']}.x_bits"].astype(np.int64)
        ap_bytes = int(package_lengths(ap).sum()) + int(ap.bitmap.nbytes) + BOUNDARY_RECORD_BYTES * ap.num_packages
        rows.append({"name": p["name"], "role": p["role"], "scheme": p["scheme"], "rows": n, "features": f,
                     "avg_bits_with_sign": float(bits.mean()), "fp32_bytes": 4 * n * f,
                     "packed_bytes": int(packed.payload.nbytes), "adaptive_package_bytes": ap_bytes,
                     "packages": int(ap.num_packages), "decoder_cycles": int(decoder_stream_cycles(ap))})
    return rows


def format_rows(rows: list[dict]) -> str:
    head = (f"{'node tensor':<34}{'bits':>6}{'FP32 KiB':>11}{'packed KiB':>12}{'AP KiB':>9}{'AP / FP32':>11}"
            f"{'decoder cycles':>16}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['name'][-34:]:<34}{r['avg_bits_with_sign']:>6.2f}{r['fp32_bytes'] / 1024:>11.1f}"
                     f"{r['packed_bytes'] / 1024:>12.1f}{r['adaptive_package_bytes'] / 1024:>9.1f}"
                     f"{r['adaptive_package_bytes'] / r['fp32_bytes']:>11.3f}{r['decoder_cycles']:>16d}")
    return "\n".join(lines)
