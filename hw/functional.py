"""Functional check run with every simulation: the stream the model moves decodes to the codes it was given,
and the golden integer layer (:func:`quant.integer_gnn.gcn_layer_int`) on those decoded codes reproduces the
workload's reference outputs bit for bit. A mismatch raises :class:`FunctionalMismatch` naming layer, node and
feature. Layers whose integer product needs more than ``max_macs`` multiply-accumulates (non-zero codes x F_out:
:func:`quant.integer_gnn.int_matmul` skips zero codes, but numpy's int64 matmul has no BLAS and ~1 GMAC takes
seconds) are checked on the stream only; the mode used per layer is returned and reported.
"""

from __future__ import annotations

import numpy as np

from hw.layout import FeatureLayout
from quant.adaptive_package import decode
from quant.integer_gnn import gcn_graph, gcn_layer_int, int_matmul_macs


class FunctionalMismatch(AssertionError):
    pass


def _first_diff(got: np.ndarray, want: np.ndarray, what: str, layer: int) -> None:
    if got.shape != want.shape:
        raise FunctionalMismatch(f"layer {layer}: {what} shape {got.shape} != reference {want.shape}")
    bad = np.argwhere(got != want)
    if bad.size:
        i, f = (int(v) for v in bad[0])
        raise FunctionalMismatch(f"layer {layer}: {what} differs at node {i}, feature {f}: model {got[i, f]} != "
                                 f"reference {want[i, f]} ({bad.shape[0]} mismatches)")


def check_workload(workload, layouts: list[FeatureLayout | None] | None = None, max_macs: float = 1e9
                   ) -> list[str]:
    """Check every layer; ``layouts[l]`` = the simulated input layout of layer ``l`` (its AP stream is decoded)."""
    graph = gcn_graph(workload.edge_index, workload.num_nodes)
    modes = []
    for li, (lay, lt) in enumerate(zip(workload.model.layers, workload.layers, strict=False)):
        codes = lt.x_codes
        ap = layouts[li].packages if layouts and layouts[li] is not None else None
        if ap is not None:
            codes = decode(ap)
            _first_diff(codes, lt.x_codes, "decoded Adaptive-Package input", li)
        if int_matmul_macs(codes, lay.w_codes.shape[0]) > max_macs:
            modes.append("stream")
            continue
        out, _ = gcn_layer_int(lay, codes, graph)
        _first_diff(out, lt.out_codes, "integer output (quant.integer_gnn.gcn_layer_int)", li)
        modes.append("bit-exact")
    return modes
