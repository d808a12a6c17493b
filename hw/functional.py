"""Functional check run with every simulation: the stream the model moves decodes to the codes it was given,
and the golden integer layer (:func:`quant.archs.gcn.integer.gcn_layer_int`; GIN and GraphSAGE layers: their golden
models, ``hw.aggregate_first``, also matching every combination pass's input codes) on those decoded codes
reproduces the workload's reference outputs bit for bit. A mismatch raises :class:`FunctionalMismatch` naming
layer, node and feature. Layers whose integer product needs more than ``max_macs`` multiply-accumulates
(non-zero codes x F_out: :func:`quant.integer.int_matmul` skips zero codes, but numpy's int64 matmul has no
BLAS and ~1 GMAC takes seconds) are checked on the stream only; the mode used per layer is returned and reported.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hw.aggregate_first import AggregateFirstLayer, golden_graph, golden_trace, pass_inputs
from hw.layout import FeatureLayout
from quant.archs.gcn.integer import gcn_graph, gcn_layer_int
from quant.formats.adaptive_package import decode
from quant.integer import int_matmul_macs
from quant.readout import graph_forward_int


class FunctionalMismatch(AssertionError):
    pass


def raise_on_difference(got: np.ndarray, want: np.ndarray, error: type[Exception], shape_message: str,
                        element_message: Callable[[int, int, int], str]) -> None:
    """Raise ``error(shape_message)`` when the 2-D arrays differ in shape, else
    ``error(element_message(row, column, count))`` at their first differing element (``count``: how many differ)."""
    if got.shape != want.shape:
        raise error(shape_message)
    bad = np.argwhere(got != want)
    if bad.size:
        i, j = (int(v) for v in bad[0])
        raise error(element_message(i, j, int(bad.shape[0])))


def _first_diff(got: np.ndarray, want: np.ndarray, what: str, layer: int) -> None:
    raise_on_difference(got, want, FunctionalMismatch,
                        f"layer {layer}: {what} shape {got.shape} != reference {want.shape}",
                        lambda i, f, n: f"layer {layer}: {what} differs at node {i}, feature {f}: model {got[i, f]} "
                                        f"!= reference {want[i, f]} ({n} mismatches)")


def _decoded_input(lt, layout: FeatureLayout | None, li: int) -> np.ndarray:
    """The layer's input codes as the simulated stream holds them (its Adaptive-Package packages decoded)."""
    if layout is None or layout.packages is None:
        return lt.x_codes
    codes = decode(layout.packages)
    _first_diff(codes, lt.x_codes, "decoded Adaptive-Package input", li)
    return codes


def _check_aggregate_first(lt, codes: np.ndarray, graph: tuple, li: int, max_macs: float) -> str:
    """A GIN / GraphSAGE layer: the golden trace on the decoded input (over ``graph``, the golden model's CSR)
    reproduces every pass's input codes and the output (``hw.aggregate_first``)."""
    if sum(int_matmul_macs(cp.codes, cp.f_out) for cp in lt.passes) > max_macs:
        return "stream"
    trace = golden_trace(lt, codes, graph)
    for cp, want in zip(lt.passes, pass_inputs(lt, trace, codes), strict=True):
        _first_diff(np.asarray(want), cp.codes, f"input of combination pass '{cp.name}' ({lt.arch} golden model)", li)
    _first_diff(np.asarray(trace["out"]), lt.out_codes, f"integer output (quant.integer_{lt.arch})", li)
    return "bit-exact"


def check_workload(workload, layouts: list[FeatureLayout | None] | None = None, max_macs: float = 1e9
                   ) -> list[str]:
    """Check every layer; ``layouts[l]`` = the simulated input layout of layer ``l`` (its AP stream is decoded). A
    graph classifier's workload also checks its readout: ``"readout bit-exact"`` last."""
    modes = _check_layers(workload, layouts, max_macs)
    if workload.readout is not None:
        modes.append(_check_readout(workload))
    return modes


def _check_readout(workload) -> str:
    """The golden readout (pooling and head, :mod:`quant.readout`) over the layers' integer accumulators reproduces
    the exported graph logits exactly."""
    ro = workload.readout
    _, r = graph_forward_int(ro.golden, workload.model, ro.readout, workload.edge_index, ro.graph_ptr)
    raise_on_difference(r["logits"], ro.logits, FunctionalMismatch,
                        f"readout: logits shape {r['logits'].shape} != exported {ro.logits.shape}",
                        lambda g, c, n: f"readout: logits differ at graph {g}, class {c}: {r['logits'][g, c]} != "
                                        f"exported {ro.logits[g, c]} ({n} mismatches)")
    return "readout bit-exact"


def _check_layers(workload, layouts: list[FeatureLayout | None] | None, max_macs: float) -> list[str]:
    modes = []
    if workload.layers and isinstance(workload.layers[0], AggregateFirstLayer):
        graph = golden_graph(workload.layers[0].arch, workload.edge_index, workload.num_nodes)
        for li, lt in enumerate(workload.layers):
            codes = _decoded_input(lt, layouts[li] if layouts else None, li)
            modes.append(_check_aggregate_first(lt, codes, graph, li, max_macs))
        return modes
    graph = gcn_graph(workload.edge_index, workload.num_nodes)
    for li, (lay, lt) in enumerate(zip(workload.model.layers, workload.layers, strict=False)):
        codes = _decoded_input(lt, layouts[li] if layouts else None, li)
        if int_matmul_macs(codes, lay.w_codes.shape[0]) > max_macs:
            modes.append("stream")
            continue
        out, _ = gcn_layer_int(lay, codes, graph)
        _first_diff(out, lt.out_codes, "integer output (quant.archs.gcn.integer.gcn_layer_int)", li)
        modes.append("bit-exact")
    return modes
