"""The arrays of a toy export: ``graph.edge_index``, ``graph.in_degree``, ``graph.labels``, ``graph.test_index``,
``logits`` and per layer ``layer{l}.x_codes / x_steps / x_bits / w_codes / w_steps / bias``."""

from __future__ import annotations

import numpy as np

from quant.formats.storage import tensor_storage
from toy_arch.integer import toy_forward


def model_arrays(conv, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    inputs, logits = toy_forward(conv.model)
    arrays = {"graph.edge_index": conv.edge_index, "graph.in_degree": conv.in_degree,
              "graph.labels": np.asarray(labels, dtype=np.int64),
              "graph.test_index": np.asarray(test_index, dtype=np.int64), "logits": logits}
    storage = []
    for li, (codes, lay) in enumerate(zip(inputs, conv.model.layers, strict=True)):
        p = f"layer{li}."
        arrays |= {p + "x_codes": codes, p + "x_steps": lay.x_steps, p + "x_bits": lay.x_bits.astype(np.uint8),
                   p + "w_codes": lay.w_codes, p + "w_steps": lay.w_steps, p + "bias": lay.bias}
        storage.append(tensor_storage(codes, lay.x_bits, conv.edge_index, lay.w_codes, lay.w_bits, layer=li,
                                      x_scheme="input" if li == 0 else "node"))
    return arrays, storage


def layers_meta(conv) -> list[dict]:
    return [{"index": li, "in_dim": int(lay.w_codes.shape[1]), "out_dim": int(lay.w_codes.shape[0]),
             "w_bits": lay.w_bits, "relu": lay.relu} for li, lay in enumerate(conv.model.layers)]
