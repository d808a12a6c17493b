"""A quantized GAT in the ``.qgraph`` format (:mod:`quant.export`): its integer golden model (:mod:`quant.integer_gat`)
with every constant and the integer path's intermediates for the fixed input.

``python -m quant.export --run <run of python -m gnn.train --model gat --quant a2q>`` lands here. Arrays (N nodes,
E' = the given edges without self loops plus one self loop per node; manifest ``model.arch = "gat"``):

* ``graph.edge_index`` (2, E), ``graph.indptr`` (N+1,), ``graph.indices`` (E',) destination-major CSR with the self
  loop last in each row, ``graph.in_degree``, ``graph.labels``, ``graph.test_index``;
* per layer ``layer{l}.``: the input codes with both packed layouts (``x_codes``, ``x_steps``, ``x_bits``,
  ``x_packed.*``, ``x_ap.*``; a degree-aware input's ``degree_*`` table), the projected features, the per-node
  learned tensor the aggregation reads, likewise (``xw_codes``, ``xw_steps``, ``xw_bits``, ``xw_packed.*``,
  ``xw_ap.*``, ``xw_degree_*``), the weights ``w_codes``/``w_packed``/``w_steps``, the attention vectors
  ``att_src_codes``/``att_dst_codes``/``att_steps``, ``score_steps``, optional ``bias``; the constants of
  :func:`quant.integer_gat.gat_constants` (``xw_mult``/``xw_shift``, ``logit_mult``/``logit_shift``,
  ``score_mult``/``score_shift``, ``exp_table``, ``ratio``, ``bias_int``, and for hidden layers ``out_mult``/
  ``out_shift``/``elu_thresholds``) and the integer path's outputs ``score`` (E', H), ``numer``, ``coef``, ``psum``,
  ``acc``, ``out``, ``out_unit``; plus ``logits``.

The accelerator model (``hw/``) simulates GCN, GIN and GraphSAGE layers and refuses these exports with a message.
"""

from __future__ import annotations

import numpy as np

from quant import packing
from quant.convert_gat import ConvertedGAT
from quant.integer_gat import QuantizedGAT, QuantizedGATLayer, gat_constants, gat_graph, gat_layer_trace
from quant.storage import tensor_storage

ARCH = "gat"
_LAYER_ARRAYS = ("x_codes", "x_steps", "x_bits", "xw_codes", "xw_steps", "xw_bits", "w_codes", "w_steps",
                 "att_src_codes", "att_dst_codes", "att_steps", "score_steps", "xw_mult", "xw_shift", "logit_mult",
                 "logit_shift", "score_mult", "score_shift", "exp_table", "ratio", "score", "numer", "coef", "psum",
                 "acc", "out", "out_unit")
_HIDDEN_ARRAYS = ("out_mult", "out_shift", "elu_thresholds")
_DEGREE = ("degree_min", "degree_max", "degree_bits", "degree_step")


def _layer_arrays(li: int, lay: QuantizedGATLayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedGAT
                  ) -> tuple[dict, dict]:
    from quant.export import degree_table_arrays, feature_arrays

    p = f"layer{li}."
    k = gat_constants(lay)
    t = gat_layer_trace(lay, x_codes, graph, constants=k)
    a = feature_arrays(p, np.asarray(x_codes, dtype=np.int8), lay.x_steps, lay.x_bits)
    a |= feature_arrays(p, t["xw"].astype(np.int8), lay.xw_steps, lay.xw_bits, name="xw")
    a |= {p + "w_codes": lay.w_codes, p + "w_packed": packing.pack_codes(lay.w_codes.reshape(-1), lay.w_bits),
          p + "w_steps": lay.w_steps, p + "att_src_codes": lay.att_src_codes, p + "att_dst_codes": lay.att_dst_codes,
          p + "att_steps": lay.att_steps, p + "score_steps": lay.score_steps,
          p + "xw_mult": k.xw_mult.astype(np.int32), p + "xw_shift": k.xw_shift.astype(np.uint8),
          p + "logit_mult": k.logit_mult.astype(np.int32), p + "logit_shift": k.logit_shift.astype(np.uint8),
          p + "score_mult": np.asarray(k.score_mult, dtype=np.int32),
          p + "score_shift": np.asarray(k.score_shift, dtype=np.uint8), p + "exp_table": k.exp_table.astype(np.int32),
          p + "ratio": k.ratio.astype(np.int32), p + "score": t["score"].astype(np.int8),
          p + "numer": t["numer"].astype(np.int32), p + "coef": t["coef"].astype(np.int32),
          p + "psum": t["psum"].astype(np.int32), p + "acc": t["acc"].astype(np.int32),
          p + "out": t["out"].astype(np.int8 if lay.out_steps is not None else np.int32), p + "out_unit": t["unit"]}
    if lay.bias is not None:
        a |= {p + "bias": lay.bias, p + "bias_int": np.asarray(k.bias_int, dtype=np.int64)}
    if lay.out_steps is not None:
        a |= {p + "out_mult": k.out_mult.astype(np.int32), p + "out_shift": k.out_shift.astype(np.uint8),
              p + "elu_thresholds": k.elu_thresholds}
    for role, name in (("input", ""), ("xw", "xw_")):
        if (li, role) in conv.degree_tables:
            a.update(degree_table_arrays(p + name, conv.degree_tables[(li, role)]))
    return a, t


def model_arrays(conv: ConvertedGAT, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    """All arrays of a converted GAT and its measured storage per layer (input with the weights, projected features)."""
    n = conv.model.x_codes.shape[0]
    graph = gat_graph(conv.edge_index, n)
    arrays = {"graph.edge_index": conv.edge_index, "graph.indptr": graph[0], "graph.indices": graph[1],
              "graph.in_degree": conv.in_degree, "graph.labels": np.asarray(labels, dtype=np.int64),
              "graph.test_index": np.asarray(test_index, dtype=np.int64)}
    h, storage = conv.model.x_codes, []
    for li, lay in enumerate(conv.model.layers):
        a, t = _layer_arrays(li, lay, h, graph, conv)
        arrays.update(a)
        xw_scheme = "degree" if (li, "xw") in conv.degree_tables else "node"
        for tensor, codes, bits, scheme, w in (("input", h, lay.x_bits, conv.x_schemes[li], lay.w_codes),
                                               ("xw", t["xw"], lay.xw_bits, xw_scheme, None)):
            storage.append(tensor_storage(codes, bits, conv.edge_index, w, lay.w_bits, layer=li, tensor=tensor,
                                          x_scheme=scheme))
        h = t["out"]
        if lay.out_steps is None:
            arrays["logits"] = t["out"] * t["unit"]
    return arrays, storage


def layers_meta(conv: ConvertedGAT) -> list[dict]:
    """The manifest's per-layer description."""
    from quant.export import _histogram

    num = len(conv.model.layers)
    return [{"index": li, "in_dim": int(lay.w_codes.shape[1]), "heads": lay.heads, "channels": lay.channels,
             "concat": lay.concat, "negative_slope": lay.negative_slope, "x_scheme": conv.x_schemes[li],
             "xw_scheme": "degree" if (li, "xw") in conv.degree_tables else "node", "w_bits": lay.w_bits,
             "att_bits": lay.att_bits, "score_bits": lay.score_bits, "has_bias": lay.bias is not None,
             "x_bits_histogram": _histogram(lay.x_bits), "xw_bits_histogram": _histogram(lay.xw_bits),
             "activation": "elu" if li + 1 < num else None, "next_layer_codes": li + 1 < num}
            for li, lay in enumerate(conv.model.layers)]


def integer_model(q) -> QuantizedGAT:
    """The integer GAT a loaded export (``quant.export.QGraph``) describes."""
    ip, layers, metas = q.manifest["integer_path"], [], q.manifest["layers"]
    for li, meta in enumerate(metas):
        p, nxt, last = f"layer{li}.", f"layer{li + 1}.", li == len(metas) - 1
        layers.append(QuantizedGATLayer(
            x_steps=q[p + "x_steps"], x_bits=q[p + "x_bits"], w_codes=q[p + "w_codes"], w_steps=q[p + "w_steps"],
            w_bits=meta["w_bits"], xw_steps=q[p + "xw_steps"], xw_bits=q[p + "xw_bits"], heads=meta["heads"],
            att_src_codes=q[p + "att_src_codes"], att_dst_codes=q[p + "att_dst_codes"], att_steps=q[p + "att_steps"],
            att_bits=meta["att_bits"], score_steps=q[p + "score_steps"], score_bits=meta["score_bits"],
            negative_slope=meta["negative_slope"], concat=meta["concat"],
            bias=q[p + "bias"] if meta["has_bias"] else None, out_steps=None if last else q[nxt + "x_steps"],
            out_bits=None if last else q[nxt + "x_bits"], frac_bits=ip["frac_bits"], psum_bits=ip["psum_bits"]))
    return QuantizedGAT(x_codes=q["layer0.x_codes"], layers=tuple(layers))


def verify(q) -> None:
    """Recompute the integer path from the exported parameters and decode every packed layout; raise
    ``ExportError`` naming the first array that disagrees."""
    model = integer_model(q)
    graph = gat_graph(q["graph.edge_index"], model.x_codes.shape[0])
    h = model.x_codes
    for li, lay in enumerate(model.layers):
        p = f"layer{li}."
        k = gat_constants(lay)
        t = gat_layer_trace(lay, h, graph, constants=k)
        checks = [("x_codes", h, q[p + "x_codes"]), ("xw_codes", t["xw"], q[p + "xw_codes"]),
                  *q.packed_checks(p, h), *q.packed_checks(p, t["xw"], "xw"),
                  ("xw_mult", k.xw_mult, q[p + "xw_mult"]), ("logit_mult", k.logit_mult, q[p + "logit_mult"]),
                  ("exp_table", k.exp_table, q[p + "exp_table"]), ("ratio", k.ratio, q[p + "ratio"]),
                  ("score", t["score"], q[p + "score"]), ("numer", t["numer"], q[p + "numer"]),
                  ("coef", t["coef"], q[p + "coef"]), ("psum", t["psum"], q[p + "psum"]),
                  ("acc", t["acc"], q[p + "acc"]), ("out", t["out"], q[p + "out"])]
        if lay.out_steps is not None:
            checks.append(("elu_thresholds", k.elu_thresholds, q[p + "elu_thresholds"]))
        q.check_recomputed(p, checks)
        h = t["out"]


def required_arrays(manifest: dict) -> list[str]:
    """Names a complete GAT export must hold."""
    names = ["graph.edge_index", "graph.indptr", "graph.indices", "graph.in_degree", "logits"]
    for li, meta in enumerate(manifest.get("layers", [])):
        p = f"layer{li}."
        names += [p + s for s in _LAYER_ARRAYS]
        names += [p + s for s in _HIDDEN_ARRAYS] if meta.get("next_layer_codes") else []
        names += [p + s for s in ("bias", "bias_int")] if meta.get("has_bias") else []
        names += [p + s for s in _DEGREE] if meta.get("x_scheme") == "degree" else []
        names += [p + "xw_" + s for s in _DEGREE] if meta.get("xw_scheme") == "degree" else []
    return names


__all__ = ["ARCH", "integer_model", "layers_meta", "model_arrays", "required_arrays", "verify"]
