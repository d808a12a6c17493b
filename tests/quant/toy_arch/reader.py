"""Reading a toy export back (numpy only): its required arrays, its integer model and the recomputation check."""

from __future__ import annotations

import numpy as np

from quant.qgraph import ExportError, layer_array_names
from toy_arch.integer import ToyLayer, ToyModel, toy_forward

_GRAPH = ("graph.edge_index", "graph.in_degree", "graph.labels", "graph.test_index")


def required_arrays(manifest: dict) -> list[str]:
    return layer_array_names(manifest, _GRAPH, lambda meta: ("x_codes", "x_steps", "x_bits", "w_codes", "w_steps",
                                                             "bias"))


def integer_model(q) -> ToyModel:
    layers = tuple(ToyLayer(x_steps=q[f"layer{li}.x_steps"], x_bits=q[f"layer{li}.x_bits"].astype(np.int64),
                            w_codes=q[f"layer{li}.w_codes"], w_steps=q[f"layer{li}.w_steps"], w_bits=meta["w_bits"],
                            bias=q[f"layer{li}.bias"], relu=meta["relu"])
                   for li, meta in enumerate(q.manifest["layers"]))
    return ToyModel(x_codes=q["layer0.x_codes"], layers=layers)


def verify(q) -> None:
    inputs, logits = toy_forward(integer_model(q))
    for li, codes in enumerate(inputs):
        if not np.array_equal(codes, q[f"layer{li}.x_codes"]):
            raise ExportError(f"{q.path}: array 'layer{li}.x_codes' disagrees with the recomputed integer path")
    if not np.array_equal(logits, q["logits"]):
        raise ExportError(f"{q.path}: array 'logits' disagrees with the recomputed integer path")
