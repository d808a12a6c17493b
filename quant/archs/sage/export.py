"""A quantized GraphSAGE in the ``.qgraph`` format (:mod:`quant.export`): its integer golden model
(:mod:`quant.archs.sage.integer`) with every constant and the integer path's intermediates for the fixed input.

``python -m quant.export --run <run of python -m gnn.train --model sage --quant a2q>`` lands here. Arrays (N nodes,
E in-edges as given, no self loops; manifest ``model.arch = "sage"``):

* ``graph.edge_index`` (2, E), ``graph.indptr`` (N+1,), ``graph.indices`` (E,) destination-major CSR,
  ``graph.mean_weight`` (E,) ``1 / deg_i``, ``graph.in_degree``, ``graph.labels``, ``graph.test_index``;
* per layer ``layer{l}.``: the input tensor as for a GCN (``x_codes``, ``x_steps``, ``x_bits``, ``x_packed.*``,
  ``x_ap.*``, a degree-aware input's ``degree_*`` table), the neighbour-mean quantizer ``agg_steps``, ``agg_bits``
  (a degree-aware one's table as ``agg_degree_*``), the weights ``wn_codes``/``wn_packed``/``wn_steps`` (neighbour)
  and ``wr_codes``/``wr_packed``/``wr_steps`` (root), optional ``bias``, the integer constants ``coef``,
  ``agg_mult``/``agg_shift``, ``neigh_mult``/``neigh_shift``, ``root_mult``/``root_shift``, ``bias_int``,
  ``out_mult``/``out_shift`` (:func:`quant.archs.sage.integer.sage_constants`), and the integer path's outputs:
  ``psum`` (mean partial sums), ``agg_codes``, ``acc`` (output accumulator after bias and ReLU), ``out``
  (next-layer codes; the last layer's accumulator), ``out_unit``; plus ``logits``.

The accelerator model (``hw/``) simulates these exports aggregation-first (``hw/aggregate_first.py``). This module
writes them (it needs torch); :mod:`quant.archs.sage.reader` reads them back with numpy only.
"""

from __future__ import annotations

import numpy as np

from quant.archs.sage import SPEC
from quant.archs.sage.convert import ConvertedSAGE
from quant.archs.sage.integer import QuantizedSAGELayer, sage_constants, sage_layer_trace
from quant.formats import packing
from quant.formats.storage import tensor_storage
from quant.qgraph.write import bits_histogram, integer_model_arrays


def _layer_arrays(li: int, lay: QuantizedSAGELayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedSAGE
                  ) -> tuple[dict, dict]:
    from quant.qgraph.write import bias_and_output_arrays, degree_table_arrays, feature_arrays

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


def _layer_storage(li: int, lay, h: np.ndarray, t: dict, conv: ConvertedSAGE) -> list[dict]:
    return [tensor_storage(h, lay.x_bits, conv.edge_index, np.concatenate([lay.wn_codes, lay.wr_codes]), lay.w_bits,
                           layer=li, x_scheme=conv.x_schemes[li])]


def model_arrays(conv: ConvertedSAGE, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    """All arrays of a converted GraphSAGE and its measured storage per layer (input codes, both weights)."""
    return integer_model_arrays(SPEC, conv, labels, test_index, _layer_arrays, _layer_storage)


def layers_meta(conv: ConvertedSAGE) -> list[dict]:
    """The manifest's per-layer description."""
    num = len(conv.model.layers)
    return [{"index": li, "in_dim": int(lay.wn_codes.shape[1]), "out_dim": int(lay.wn_codes.shape[0]),
             "relu": lay.relu, "x_scheme": conv.x_schemes[li],
             "agg_scheme": "degree" if (li, "aggregate") in conv.degree_tables else "node", "w_bits": lay.w_bits,
             "has_bias": lay.bias is not None, "x_bits_histogram": bits_histogram(lay.x_bits),
             "agg_bits_histogram": bits_histogram(lay.agg_bits), "next_layer_codes": li + 1 < num}
            for li, lay in enumerate(conv.model.layers)]


__all__ = ["layers_meta", "model_arrays"]
