"""A quantized GIN in the ``.qgraph`` format (:mod:`quant.export`): its integer golden model
(:mod:`quant.integer_gin`) with every constant and the integer path's intermediates for the fixed input.

``python -m quant.export --run <run of python -m gnn.train --model gin --quant a2q>`` lands here (with or without
``--quantize-mlp-hidden``).

Arrays (N nodes, E in-edges as given, E' = E + N with one self loop per node; manifest ``model.arch = "gin"``):

* ``graph.edge_index`` (2, E), ``graph.indptr`` (N+1,), ``graph.indices`` (E',) destination-major CSR with the self
  loop last in each row, ``graph.self_loop`` (E',) bool, ``graph.in_degree``, ``graph.labels``, ``graph.test_index``;
* per layer ``layer{l}.``: the input codes ``x_codes`` with ``x_steps``, ``x_bits`` per node (the first layer's FP32
  features: both packed layouts ``x_packed.*``, ``x_ap.*``) or per channel (later layers: A2Q's fixed-width input,
  one packed stream ``x_packed_flat`` of that width); ``eps`` (1,); the two per-node learned tensors with both
  packed layouts, the MLP input ``agg_*`` and the hidden activation ``hid_*`` (``_codes``, ``_steps``, ``_bits``,
  ``_packed.*``, ``_ap.*``; degree-aware tables as ``agg_degree_*`` / ``hid_degree_*``; a model trained without the
  hidden quantizer (manifest ``hid_scheme = "fixed"``) has ``hid_codes`` as int16 16-bit fixed point with its
  calibrated per-node ``hid_steps`` and no packed layouts, which take 1..8 bits); the weights
  ``w1_codes``/``w1_packed``/``w1_steps``, ``bn_scale``, optional ``b1`` (after the folded norm),
  ``w2_codes``/``w2_packed``/``w2_steps``, optional ``b2``; the integer constants of
  :func:`quant.integer_gin.gin_constants` (``coef``, ``agg_mult``/``agg_shift``, ``w1_signed``,
  ``mid_mult``/``mid_shift``, ``bias1_int``, ``hid_mult``/``hid_shift``, ``lin2_mult``/``lin2_shift``, ``bias2_int``,
  ``out_mult``/``out_shift``) and the integer path's outputs ``psum``, ``mid``, ``acc``, ``out`` (next-layer codes;
  the last layer's accumulator), ``out_unit``; plus ``logits``.

The accelerator model (``hw/``) simulates these exports aggregation-first (``hw/aggregate_first.py``).
"""

from __future__ import annotations

import numpy as np

from quant import packing
from quant.convert_gin import ConvertedGIN
from quant.integer_gin import QuantizedGIN, QuantizedGINLayer, gin_constants, gin_graph, gin_layer_trace
from quant.storage import fixed_point_storage, tensor_storage

ARCH = "gin"
_LAYER_ARRAYS = ("x_codes", "x_steps", "x_bits", "eps", "agg_codes", "agg_steps", "agg_bits", "hid_codes",
                 "hid_steps", "hid_bits", "w1_codes", "w1_steps", "bn_scale", "w2_codes", "w2_steps", "coef",
                 "agg_mult", "agg_shift", "w1_signed", "mid_mult", "mid_shift", "lin2_mult", "lin2_shift", "psum",
                 "mid", "acc", "out", "out_unit")
_DEGREE = ("degree_min", "degree_max", "degree_bits", "degree_step")


def _uniform_width(bits: np.ndarray, who: str) -> int:
    """The one bitwidth of a per-channel tensor (A2Q's fixed bits); refuses mixed widths."""
    from quant.export import ExportError

    widths = np.unique(bits)
    if widths.size != 1:
        raise ExportError(f"export: {who} has per-channel bitwidths {widths.tolist()}; the packed per-channel stream "
                          "takes one width")
    return int(widths[0])


def _input_arrays(p: str, lay: QuantizedGINLayer, x_codes: np.ndarray) -> dict:
    from quant.export import feature_arrays

    codes8 = np.asarray(x_codes, dtype=np.int8)
    if lay.x_scheme == "node":
        return feature_arrays(p, codes8, lay.x_steps, lay.x_bits)
    width = _uniform_width(lay.x_bits, p + "x_bits")
    return {p + "x_codes": codes8, p + "x_steps": lay.x_steps, p + "x_bits": lay.x_bits.astype(np.uint8),
            p + "x_packed_flat": packing.pack_codes(codes8.reshape(-1), width)}


def _layer_arrays(li: int, lay: QuantizedGINLayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedGIN
                  ) -> tuple[dict, dict]:
    from quant.export import bias_and_output_arrays, degree_table_arrays, feature_arrays

    p = f"layer{li}."
    k = gin_constants(lay, graph)
    t = gin_layer_trace(lay, x_codes, graph, constants=k)
    a = _input_arrays(p, lay, x_codes)
    a |= feature_arrays(p, t["agg"].astype(np.int8), lay.agg_steps, lay.agg_bits, name="agg")
    if conv.hidden_schemes[li] == "fixed":
        a |= {p + "hid_codes": t["hidden"].astype(np.int16), p + "hid_steps": lay.hid_steps,
              p + "hid_bits": lay.hid_bits.astype(np.uint8)}
    else:
        a |= feature_arrays(p, t["hidden"].astype(np.int8), lay.hid_steps, lay.hid_bits, name="hid")
    a |= {p + "eps": np.array([lay.eps]), p + "w1_codes": lay.w1_codes,
          p + "w1_packed": packing.pack_codes(lay.w1_codes.reshape(-1), lay.w_bits), p + "w1_steps": lay.w1_steps,
          p + "bn_scale": lay.bn_scale, p + "w2_codes": lay.w2_codes,
          p + "w2_packed": packing.pack_codes(lay.w2_codes.reshape(-1), lay.w_bits), p + "w2_steps": lay.w2_steps,
          p + "coef": k.coef.astype(np.int32), p + "agg_mult": k.agg_mult.astype(np.int32),
          p + "agg_shift": k.agg_shift.astype(np.uint8), p + "w1_signed": k.w1_signed,
          p + "mid_mult": k.mid_mult.astype(np.int32), p + "mid_shift": k.mid_shift.astype(np.uint8),
          p + "hid_mult": np.asarray(k.hid_mult, dtype=np.int32), p + "hid_shift": np.asarray(k.hid_shift, np.uint8),
          p + "lin2_mult": k.lin2_mult.astype(np.int32), p + "lin2_shift": k.lin2_shift.astype(np.uint8),
          p + "psum": t["psum"].astype(np.int32), p + "mid": t["mid"].astype(np.int32),
          p + "acc": t["acc"].astype(np.int32),
          p + "out": t["out"].astype(np.int8 if lay.out_steps is not None else np.int32), p + "out_unit": t["unit"]}
    if lay.b1 is not None:
        a |= {p + "b1": lay.b1, p + "bias1_int": np.asarray(k.bias1_int, dtype=np.int64)}
    for role, name in (("input", ""), ("aggregate", "agg_"), ("hidden", "hid_")):
        if (li, role) in conv.degree_tables:
            a.update(degree_table_arrays(p + name, conv.degree_tables[(li, role)]))
    if lay.b2 is not None:
        a |= {p + "b2": lay.b2, p + "bias2_int": np.asarray(k.bias2_int, dtype=np.int64)}
    return a | bias_and_output_arrays(p, None, None, lay.out_steps is not None, k.out_mult, k.out_shift), t


def model_arrays(conv: ConvertedGIN, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    """All arrays of a converted GIN and its measured storage: per layer the input, the MLP input (with W1) and the
    hidden activation (with W2)."""
    n = conv.model.x_codes.shape[0]
    graph = gin_graph(conv.edge_index, n)
    arrays = {"graph.edge_index": conv.edge_index, "graph.indptr": graph[0], "graph.indices": graph[1],
              "graph.self_loop": graph[2], "graph.in_degree": conv.in_degree,
              "graph.labels": np.asarray(labels, dtype=np.int64),
              "graph.test_index": np.asarray(test_index, dtype=np.int64)}
    h, storage = conv.model.x_codes, []
    for li, lay in enumerate(conv.model.layers):
        a, t = _layer_arrays(li, lay, h, graph, conv)
        arrays.update(a)
        x_bits = lay.x_bits if lay.x_scheme == "node" else np.full(n, _uniform_width(lay.x_bits, "x_bits"))
        agg_scheme = "degree" if (li, "aggregate") in conv.degree_tables else "node"
        hid_scheme = conv.hidden_schemes[li]
        for tensor, codes, bits, scheme, w in (("input", h, x_bits, conv.x_schemes[li], None),
                                               ("aggregate", t["agg"], lay.agg_bits, agg_scheme, lay.w1_codes),
                                               ("hidden", t["hidden"], lay.hid_bits, hid_scheme, lay.w2_codes)):
            measure = fixed_point_storage if scheme == "fixed" else tensor_storage
            storage.append(measure(codes, bits, conv.edge_index, w, lay.w_bits, layer=li, tensor=tensor,
                                   x_scheme=scheme))
        h = t["out"]
        if lay.out_steps is None:
            arrays["logits"] = t["out"] * t["unit"]
    return arrays, storage


def layers_meta(conv: ConvertedGIN) -> list[dict]:
    """The manifest's per-layer description."""
    from quant.export import _histogram

    num = len(conv.model.layers)
    return [{"index": li, "in_dim": int(lay.w1_codes.shape[1]), "hidden_dim": int(lay.w1_codes.shape[0]),
             "out_dim": int(lay.w2_codes.shape[0]), "relu": lay.relu, "x_scheme": conv.x_schemes[li],
             "x_step_scheme": lay.x_scheme,
             "agg_scheme": "degree" if (li, "aggregate") in conv.degree_tables else "node",
             "hid_scheme": conv.hidden_schemes[li], "w_bits": lay.w_bits,
             "has_b1": lay.b1 is not None, "has_b2": lay.b2 is not None,
             "agg_bits_histogram": _histogram(lay.agg_bits), "hid_bits_histogram": _histogram(lay.hid_bits),
             "next_layer_codes": li + 1 < num}
            for li, lay in enumerate(conv.model.layers)]


def integer_model(q) -> QuantizedGIN:
    """The integer GIN a loaded export (``quant.export.QGraph``) describes."""
    ip, layers, metas = q.manifest["integer_path"], [], q.manifest["layers"]
    for li, meta in enumerate(metas):
        p, nxt, last = f"layer{li}.", f"layer{li + 1}.", li == len(metas) - 1
        layers.append(QuantizedGINLayer(
            x_steps=q[p + "x_steps"], x_bits=q[p + "x_bits"], x_scheme=meta["x_step_scheme"],
            eps=float(q[p + "eps"][0]), agg_steps=q[p + "agg_steps"], agg_bits=q[p + "agg_bits"],
            w1_codes=q[p + "w1_codes"], w1_steps=q[p + "w1_steps"], bn_scale=q[p + "bn_scale"],
            b1=q[p + "b1"] if meta["has_b1"] else None, hid_steps=q[p + "hid_steps"], hid_bits=q[p + "hid_bits"],
            w2_codes=q[p + "w2_codes"], w2_steps=q[p + "w2_steps"], b2=q[p + "b2"] if meta["has_b2"] else None,
            w_bits=meta["w_bits"], out_steps=None if last else q[nxt + "x_steps"],
            out_bits=None if last else q[nxt + "x_bits"],
            out_scheme="channel" if last else metas[li + 1]["x_step_scheme"], relu=meta["relu"],
            frac_bits=ip["frac_bits"], psum_bits=ip["psum_bits"]))
    return QuantizedGIN(x_codes=q["layer0.x_codes"], layers=tuple(layers))


def verify(q) -> None:
    """Recompute the integer path from the exported parameters and decode every packed layout; raise
    ``ExportError`` naming the first array that disagrees."""
    model = integer_model(q)
    graph = gin_graph(q["graph.edge_index"], model.x_codes.shape[0])
    h = model.x_codes
    for li, lay in enumerate(model.layers):
        p = f"layer{li}."
        k = gin_constants(lay, graph)
        t = gin_layer_trace(lay, h, graph, constants=k)
        checks = [("x_codes", h, q[p + "x_codes"])]
        if lay.x_scheme == "node":
            checks += q.packed_checks(p, h)
        else:
            flat = packing.unpack_codes(q[p + "x_packed_flat"], _uniform_width(lay.x_bits, p + "x_bits"), h.size)
            checks.append(("x_packed_flat", h, flat.reshape(h.shape)))
        fixed = q.manifest["layers"][li]["hid_scheme"] == "fixed"  # 16-bit fixed point: no packed layouts
        for name, codes in (("agg", t["agg"]), ("hid", t["hidden"])):
            checks.append((f"{name}_codes", codes, q[p + f"{name}_codes"]))
            checks += [] if name == "hid" and fixed else q.packed_checks(p, codes, name)
        checks += [("coef", k.coef, q[p + "coef"]), ("agg_mult", k.agg_mult, q[p + "agg_mult"]),
                   ("w1_signed", k.w1_signed, q[p + "w1_signed"]), ("mid_mult", k.mid_mult, q[p + "mid_mult"]),
                   ("lin2_mult", k.lin2_mult, q[p + "lin2_mult"]), ("psum", t["psum"], q[p + "psum"]),
                   ("mid", t["mid"], q[p + "mid"]), ("acc", t["acc"], q[p + "acc"]), ("out", t["out"], q[p + "out"])]
        q.check_recomputed(p, checks)
        h = t["out"]


def required_arrays(manifest: dict) -> list[str]:
    """Names a complete GIN export must hold."""
    names = ["graph.edge_index", "graph.indptr", "graph.indices", "graph.self_loop", "graph.in_degree", "logits"]
    for li, meta in enumerate(manifest.get("layers", [])):
        p = f"layer{li}."
        names += [p + s for s in _LAYER_ARRAYS]
        names += [p + "x_packed_flat"] if meta.get("x_step_scheme") == "channel" else [p + "x_packed.payload"]
        names += [p + s for s in ("b1", "bias1_int") if meta.get("has_b1")]
        names += [p + s for s in ("b2", "bias2_int") if meta.get("has_b2")]
        names += [p + s for s in _DEGREE] if meta.get("x_scheme") == "degree" else []
        names += [p + "agg_" + s for s in _DEGREE] if meta.get("agg_scheme") == "degree" else []
        names += [p + "hid_" + s for s in _DEGREE] if meta.get("hid_scheme") == "degree" else []
    return names


__all__ = ["ARCH", "integer_model", "layers_meta", "model_arrays", "required_arrays", "verify"]
