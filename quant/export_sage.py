"""A quantized GraphSAGE in the ``.qgraph`` format (:mod:`quant.export`): its integer golden model
(:mod:`quant.integer_sage`) with every constant and the integer path's intermediates for the fixed input.

``python -m quant.export --run <run of python -m gnn.train --model sage --quant a2q>`` lands here. Arrays (N nodes,
E in-edges as given, no self loops; manifest ``model.arch = "sage"``):

* ``graph.edge_index`` (2, E), ``graph.indptr`` (N+1,), ``graph.indices`` (E,) destination-major CSR,
  ``graph.mean_weight`` (E,) ``1 / deg_i``, ``graph.in_degree``, ``graph.labels``, ``graph.test_index``;
* per layer ``layer{l}.``: the input tensor as for a GCN (``x_codes``, ``x_steps``, ``x_bits``, ``x_packed.*``,
  ``x_ap.*``, a degree-aware input's ``degree_*`` table), the neighbour-mean quantizer ``agg_steps``, ``agg_bits``
  (a degree-aware one's table as ``agg_degree_*``), the weights ``wn_codes``/``wn_packed``/``wn_steps`` (neighbour)
  and ``wr_codes``/``wr_packed``/``wr_steps`` (root), optional ``bias``, the integer constants ``coef``,
  ``agg_mult``/``agg_shift``, ``neigh_mult``/``neigh_shift``, ``root_mult``/``root_shift``, ``bias_int``,
  ``out_mult``/``out_shift`` (:func:`quant.integer_sage.sage_constants`), and the integer path's outputs:
  ``psum`` (mean partial sums), ``agg_codes``, ``acc`` (output accumulator after bias and ReLU), ``out``
  (next-layer codes; the last layer's accumulator), ``out_unit``; plus ``logits``.

The accelerator model (``hw/``) simulates these exports aggregation-first (``hw/aggregate_first.py``).
"""

from __future__ import annotations

import numpy as np

from quant import packing
from quant.convert_sage import ConvertedSAGE
from quant.integer_sage import QuantizedSAGE, QuantizedSAGELayer, sage_constants, sage_graph, sage_layer_trace
from quant.storage import tensor_storage

ARCH = "sage"
_LAYER_ARRAYS = ("x_codes", "x_steps", "x_bits", "agg_steps", "agg_bits", "wn_codes", "wn_steps", "wr_codes",
                 "wr_steps", "coef", "agg_mult", "agg_shift", "neigh_mult", "neigh_shift", "root_mult", "root_shift",
                 "psum", "agg_codes", "acc", "out", "out_unit")
_DEGREE = ("degree_min", "degree_max", "degree_bits", "degree_step")


def _layer_arrays(li: int, lay: QuantizedSAGELayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedSAGE
                  ) -> tuple[dict, dict]:
    from quant.export import bias_and_output_arrays, degree_table_arrays, feature_arrays

    p = f"layer{li}."
    k = sage_constants(lay, graph)
    t = sage_layer_trace(lay, x_codes, graph, constants=k)
    a = feature_arrays(p, np.asarray(x_codes, dtype=np.int8), lay.x_steps, lay.x_bits)
    a |= {p + "agg_steps": lay.agg_steps, p + "agg_bits": lay.agg_bits.astype(np.uint8),
          p + "wn_codes": lay.wn_codes, p + "wn_packed": packing.pack_codes(lay.wn_codes.reshape(-1), lay.w_bits),
          p + "wn_steps": lay.wn_steps, p + "wr_codes": lay.wr_codes,
          p + "wr_packed": packing.pack_codes(lay.wr_codes.reshape(-1), lay.w_bits), p + "wr_steps": lay.wr_steps,
          p + "coef": k.coef.astype(np.int32), p + "agg_mult": k.agg_mult.astype(np.int32),
          p + "agg_shift": k.agg_shift.astype(np.uint8), p + "neigh_mult": k.neigh_mult.astype(np.int32),
          p + "neigh_shift": k.neigh_shift.astype(np.uint8), p + "root_mult": k.root_mult.astype(np.int32),
          p + "root_shift": k.root_shift.astype(np.uint8), p + "psum": t["psum"].astype(np.int32),
          p + "agg_codes": t["agg"].astype(np.int8), p + "acc": t["acc"].astype(np.int32),
          p + "out": t["out"].astype(np.int8 if lay.out_steps is not None else np.int32), p + "out_unit": t["unit"]}
    if (li, "input") in conv.degree_tables:
        a.update(degree_table_arrays(p, conv.degree_tables[(li, "input")]))
    if (li, "aggregate") in conv.degree_tables:
        a.update(degree_table_arrays(p + "agg_", conv.degree_tables[(li, "aggregate")]))
    return a | bias_and_output_arrays(p, lay.bias, k.bias_int, lay.out_steps is not None, k.out_mult, k.out_shift), t


def model_arrays(conv: ConvertedSAGE, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    """All arrays of a converted GraphSAGE and its measured storage per layer (input codes, both weights)."""
    n = conv.model.x_codes.shape[0]
    graph = sage_graph(conv.edge_index, n)
    arrays = {"graph.edge_index": conv.edge_index, "graph.indptr": graph[0], "graph.indices": graph[1],
              "graph.mean_weight": graph[2], "graph.in_degree": conv.in_degree,
              "graph.labels": np.asarray(labels, dtype=np.int64),
              "graph.test_index": np.asarray(test_index, dtype=np.int64)}
    h, storage = conv.model.x_codes, []
    for li, lay in enumerate(conv.model.layers):
        a, t = _layer_arrays(li, lay, h, graph, conv)
        arrays.update(a)
        storage.append(tensor_storage(h, lay.x_bits, conv.edge_index, np.concatenate([lay.wn_codes, lay.wr_codes]),
                                      lay.w_bits, layer=li, x_scheme=conv.x_schemes[li]))
        h = t["out"]
        if lay.out_steps is None:
            arrays["logits"] = t["out"] * t["unit"]
    return arrays, storage


def layers_meta(conv: ConvertedSAGE) -> list[dict]:
    """The manifest's per-layer description."""
    from quant.export import _histogram

    num = len(conv.model.layers)
    return [{"index": li, "in_dim": int(lay.wn_codes.shape[1]), "out_dim": int(lay.wn_codes.shape[0]),
             "relu": lay.relu, "x_scheme": conv.x_schemes[li],
             "agg_scheme": "degree" if (li, "aggregate") in conv.degree_tables else "node", "w_bits": lay.w_bits,
             "has_bias": lay.bias is not None, "x_bits_histogram": _histogram(lay.x_bits),
             "agg_bits_histogram": _histogram(lay.agg_bits), "next_layer_codes": li + 1 < num}
            for li, lay in enumerate(conv.model.layers)]


def integer_model(q) -> QuantizedSAGE:
    """The integer GraphSAGE a loaded export (``quant.export.QGraph``) describes."""
    ip, layers, metas = q.manifest["integer_path"], [], q.manifest["layers"]
    for li, meta in enumerate(metas):
        p, nxt, last = f"layer{li}.", f"layer{li + 1}.", li == len(metas) - 1
        layers.append(QuantizedSAGELayer(
            x_steps=q[p + "x_steps"], x_bits=q[p + "x_bits"], agg_steps=q[p + "agg_steps"],
            agg_bits=q[p + "agg_bits"], wn_codes=q[p + "wn_codes"], wn_steps=q[p + "wn_steps"],
            wr_codes=q[p + "wr_codes"], wr_steps=q[p + "wr_steps"], w_bits=meta["w_bits"],
            bias=q[p + "bias"] if meta["has_bias"] else None, out_steps=None if last else q[nxt + "x_steps"],
            out_bits=None if last else q[nxt + "x_bits"], relu=meta["relu"], frac_bits=ip["frac_bits"],
            psum_bits=ip["psum_bits"]))
    return QuantizedSAGE(x_codes=q["layer0.x_codes"], layers=tuple(layers))


def verify(q) -> None:
    """Recompute the integer path from the exported parameters and decode both packed layouts; raise
    ``quant.export.ExportError`` naming the first array that disagrees."""
    model = integer_model(q)
    graph = sage_graph(q["graph.edge_index"], model.x_codes.shape[0])
    h = model.x_codes
    for li, lay in enumerate(model.layers):
        p = f"layer{li}."
        k = sage_constants(lay, graph)
        t = sage_layer_trace(lay, h, graph, constants=k)
        checks = [("x_codes", h, q[p + "x_codes"]), *q.packed_checks(p, h), ("coef", k.coef, q[p + "coef"]),
                  ("agg_mult", k.agg_mult, q[p + "agg_mult"]), ("neigh_mult", k.neigh_mult, q[p + "neigh_mult"]),
                  ("root_mult", k.root_mult, q[p + "root_mult"]), ("psum", t["psum"], q[p + "psum"]),
                  ("agg_codes", t["agg"], q[p + "agg_codes"]), ("acc", t["acc"], q[p + "acc"]),
                  ("out", t["out"], q[p + "out"])]
        q.check_recomputed(p, checks)
        h = t["out"]


def required_arrays(manifest: dict) -> list[str]:
    """Names a complete GraphSAGE export must hold."""
    names = ["graph.edge_index", "graph.indptr", "graph.indices", "graph.in_degree", "logits"]
    for li, meta in enumerate(manifest.get("layers", [])):
        p = f"layer{li}."
        names += [p + s for s in _LAYER_ARRAYS]
        names += [p + "bias"] if meta.get("has_bias") else []
        names += [p + s for s in _DEGREE] if meta.get("x_scheme") == "degree" else []
        names += [p + "agg_" + s for s in _DEGREE] if meta.get("agg_scheme") == "degree" else []
    return names


__all__ = ["ARCH", "integer_model", "layers_meta", "model_arrays", "required_arrays", "verify"]
