"""A quantized GIN in the ``.qgraph`` format (:mod:`quant.export`): its integer golden model
(:mod:`quant.archs.gin.integer`) with every constant and the integer path's intermediates for the fixed input.

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
  :func:`quant.archs.gin.integer.gin_constants` (``coef``, ``agg_mult``/``agg_shift``, ``w1_signed``,
  ``mid_mult``/``mid_shift``, ``bias1_int``, ``hid_mult``/``hid_shift``, ``lin2_mult``/``lin2_shift``, ``bias2_int``,
  ``out_mult``/``out_shift``) and the integer path's outputs ``psum``, ``mid``, ``acc``, ``out`` (next-layer codes;
  the last layer's accumulator), ``out_unit``; plus ``logits``.

The accelerator model (``hw/``) simulates these exports aggregation-first (``hw/aggregate_first.py``). This module
writes them (it needs torch); :mod:`quant.archs.gin.reader` reads them back with numpy only.
"""

from __future__ import annotations

import numpy as np

from quant.archs.gin import SPEC
from quant.archs.gin.convert import ConvertedGIN
from quant.archs.gin.integer import QuantizedGINLayer, gin_constants, gin_layer_trace
from quant.archs.gin.reader import uniform_width
from quant.formats import packing
from quant.formats.storage import fixed_point_storage, tensor_storage
from quant.qgraph.write import bits_histogram, integer_model_arrays


def _input_arrays(p: str, lay: QuantizedGINLayer, x_codes: np.ndarray) -> dict:
    from quant.qgraph.write import feature_arrays

    codes8 = np.asarray(x_codes, dtype=np.int8)
    if lay.x_scheme == "node":
        return feature_arrays(p, codes8, lay.x_steps, lay.x_bits)
    width = uniform_width(lay.x_bits, p + "x_bits")
    return {p + "x_codes": codes8, p + "x_steps": lay.x_steps, p + "x_bits": lay.x_bits.astype(np.uint8),
            p + "x_packed_flat": packing.pack_codes(codes8.reshape(-1), width)}


def _layer_arrays(li: int, lay: QuantizedGINLayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedGIN
                  ) -> tuple[dict, dict]:
    from quant.qgraph.write import bias_and_output_arrays, degree_table_arrays, feature_arrays

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


def _layer_storage(li: int, lay, h: np.ndarray, t: dict, conv: ConvertedGIN) -> list[dict]:
    """The input, the MLP input (with W1) and the hidden activation (with W2)."""
    x_bits = lay.x_bits if lay.x_scheme == "node" else np.full(h.shape[0], uniform_width(lay.x_bits, "x_bits"))
    agg_scheme = "degree" if (li, "aggregate") in conv.degree_tables else "node"
    hid_scheme = conv.hidden_schemes[li]
    rows = []
    for tensor, codes, bits, scheme, w in (("input", h, x_bits, conv.x_schemes[li], None),
                                           ("aggregate", t["agg"], lay.agg_bits, agg_scheme, lay.w1_codes),
                                           ("hidden", t["hidden"], lay.hid_bits, hid_scheme, lay.w2_codes)):
        measure = fixed_point_storage if scheme == "fixed" else tensor_storage
        rows.append(measure(codes, bits, conv.edge_index, w, lay.w_bits, layer=li, tensor=tensor, x_scheme=scheme))
    return rows


def model_arrays(conv: ConvertedGIN, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    """All arrays of a converted GIN and its measured storage per layer (input, MLP input, hidden activation)."""
    return integer_model_arrays(SPEC, conv, labels, test_index, _layer_arrays, _layer_storage)


def layers_meta(conv: ConvertedGIN) -> list[dict]:
    """The manifest's per-layer description."""
    num = len(conv.model.layers)
    return [{"index": li, "in_dim": int(lay.w1_codes.shape[1]), "hidden_dim": int(lay.w1_codes.shape[0]),
             "out_dim": int(lay.w2_codes.shape[0]), "relu": lay.relu, "x_scheme": conv.x_schemes[li],
             "x_step_scheme": lay.x_scheme,
             "agg_scheme": "degree" if (li, "aggregate") in conv.degree_tables else "node",
             "hid_scheme": conv.hidden_schemes[li], "w_bits": lay.w_bits,
             "has_b1": lay.b1 is not None, "has_b2": lay.b2 is not None,
             "agg_bits_histogram": bits_histogram(lay.agg_bits), "hid_bits_histogram": bits_histogram(lay.hid_bits),
             "next_layer_codes": li + 1 < num}
            for li, lay in enumerate(conv.model.layers)]


__all__ = ["layers_meta", "model_arrays"]
