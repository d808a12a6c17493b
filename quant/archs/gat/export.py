"""A quantized GAT in the ``.qgraph`` format (:mod:`quant.export`): its integer golden model
(:mod:`quant.archs.gat.integer`)
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
  :func:`quant.archs.gat.integer.gat_constants` (``xw_mult``/``xw_shift``, ``logit_mult``/``logit_shift``,
  ``score_mult``/``score_shift``, ``exp_table``, ``ratio``, ``bias_int``, and for hidden layers ``out_mult``/
  ``out_shift``/``elu_thresholds``) and the integer path's outputs ``score`` (E', H), ``numer``, ``coef``, ``psum``,
  ``acc``, ``out``, ``out_unit``; plus ``logits``.

The accelerator model (``hw/``) simulates GCN, GIN and GraphSAGE layers and refuses these exports with a message.
This module writes them (it needs torch); :mod:`quant.archs.gat.reader` reads them back with numpy only.
"""

from __future__ import annotations

import numpy as np

from quant.archs.gat import SPEC
from quant.archs.gat.convert import ConvertedGAT
from quant.archs.gat.integer import QuantizedGATLayer, gat_constants, gat_layer_trace
from quant.formats import packing
from quant.formats.storage import tensor_storage
from quant.qgraph.write import bits_histogram, integer_model_arrays


def _layer_arrays(li: int, lay: QuantizedGATLayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedGAT
                  ) -> tuple[dict, dict]:
    from quant.qgraph.write import degree_table_arrays, feature_arrays

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


def _layer_storage(li: int, lay, h: np.ndarray, t: dict, conv: ConvertedGAT) -> list[dict]:
    """The input (with the weights) and the projected features."""
    xw_scheme = "degree" if (li, "xw") in conv.degree_tables else "node"
    return [tensor_storage(codes, bits, conv.edge_index, w, lay.w_bits, layer=li, tensor=tensor, x_scheme=scheme)
            for tensor, codes, bits, scheme, w in (("input", h, lay.x_bits, conv.x_schemes[li], lay.w_codes),
                                                   ("xw", t["xw"], lay.xw_bits, xw_scheme, None))]


def model_arrays(conv: ConvertedGAT, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    """All arrays of a converted GAT and its measured storage per layer (input with the weights, projected features)."""
    return integer_model_arrays(SPEC, conv, labels, test_index, _layer_arrays, _layer_storage)


def layers_meta(conv: ConvertedGAT) -> list[dict]:
    """The manifest's per-layer description."""
    num = len(conv.model.layers)
    return [{"index": li, "in_dim": int(lay.w_codes.shape[1]), "heads": lay.heads, "channels": lay.channels,
             "concat": lay.concat, "negative_slope": lay.negative_slope, "x_scheme": conv.x_schemes[li],
             "xw_scheme": "degree" if (li, "xw") in conv.degree_tables else "node", "w_bits": lay.w_bits,
             "att_bits": lay.att_bits, "score_bits": lay.score_bits, "has_bias": lay.bias is not None,
             "x_bits_histogram": bits_histogram(lay.x_bits), "xw_bits_histogram": bits_histogram(lay.xw_bits),
             "activation": "elu" if li + 1 < num else None, "next_layer_codes": li + 1 < num}
            for li, lay in enumerate(conv.model.layers)]


__all__ = ["layers_meta", "model_arrays"]
