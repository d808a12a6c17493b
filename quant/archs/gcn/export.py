"""The arrays of a GCN export (``model.arch = "gcn"``; N nodes, E' = GCN edges with one self loop per node):

* ``graph.edge_index`` (2, E), ``graph.indptr`` (N+1,), ``graph.indices`` (E',) destination-major CSR of the GCN
  graph, ``graph.gcn_weight`` (E',), ``graph.in_degree`` (N,), ``graph.labels`` (N,), ``graph.test_index``;
* per layer ``layer{l}.``: ``x_codes``, ``x_steps``, ``x_bits`` (bitwidth and step per node; degree-aware layers
  also ``degree_min``/``degree_max``/``degree_bits``/``degree_step``, the table), ``x_packed.*`` (plain packed rows,
  :mod:`quant.formats.packing`), ``x_ap.*`` (Adaptive-Package stream, :mod:`quant.formats.adaptive_package`),
  ``w_codes``, ``w_packed``, ``w_steps``, ``xw_steps``, ``xw_bits``, optional ``agg_steps``/``agg_bits``/``bias``, the
  integer constants ``xw_mult``/``xw_shift``, ``coef``, ``bias_int``, ``out_mult``/``out_shift``
  (:func:`quant.formats.fixed_point.quantize_multiplier`), and the integer path's outputs for the fixed input:
  ``xw_codes``, ``psum``, ``out`` (next-layer codes; the last layer's 32-bit accumulator), ``out_unit``; plus
  ``logits``.
"""

from __future__ import annotations

import numpy as np

from quant.archs.gcn import SPEC
from quant.archs.gcn.convert import ConvertedGCN
from quant.archs.gcn.integer import QuantizedGCNLayer, gcn_layer_trace, layer_constants
from quant.formats import packing
from quant.formats.storage import tensor_storage
from quant.qgraph.write import (
    bias_and_output_arrays,
    bits_histogram,
    degree_table_arrays,
    feature_arrays,
    integer_model_arrays,
)


def _layer_arrays(li: int, lay: QuantizedGCNLayer, x_codes: np.ndarray, graph: tuple, conv: ConvertedGCN) -> dict:
    """Every array of layer ``li`` (see the module docstring) and its integer trace."""
    p = f"layer{li}."
    k = layer_constants(lay, graph)
    t = gcn_layer_trace(lay, x_codes, graph, constants=k)
    a = feature_arrays(p, np.asarray(x_codes, dtype=np.int8), lay.x_steps, lay.x_bits)
    a |= {p + "w_codes": lay.w_codes, p + "w_packed": packing.pack_codes(lay.w_codes.reshape(-1), lay.w_bits),
         p + "w_steps": lay.w_steps, p + "xw_steps": lay.xw_steps, p + "xw_bits": lay.xw_bits.astype(np.uint8),
         p + "xw_mult": k.xw_mult.astype(np.int32), p + "xw_shift": k.xw_shift.astype(np.uint8),
         p + "coef": k.coef.astype(np.int32),
         p + "xw_codes": t["xw"].astype(np.int8), p + "psum": t["psum"].astype(np.int32),
         p + "out": t["out"].astype(np.int8 if lay.out_steps is not None else np.int32), p + "out_unit": t["unit"]}
    if li in conv.degree_tables:
        a.update(degree_table_arrays(p, conv.degree_tables[li]))
    if lay.agg_steps is not None:
        a.update({p + "agg_steps": lay.agg_steps, p + "agg_bits": lay.agg_bits.astype(np.uint8),
                  p + "agg_mult": k.agg_mult.astype(np.int32), p + "agg_shift": k.agg_shift.astype(np.uint8)})
    return a | bias_and_output_arrays(p, lay.bias, k.bias_int, lay.out_steps is not None, k.out_mult, k.out_shift), t

def _layer_storage(li: int, lay, h: np.ndarray, t: dict, conv: ConvertedGCN) -> list[dict]:
    return [tensor_storage(h, lay.x_bits, conv.edge_index, lay.w_codes, lay.w_bits, layer=li,
                           x_scheme=conv.x_schemes[li])]


def model_arrays(conv: ConvertedGCN, labels: np.ndarray, test_index: np.ndarray) -> tuple[dict, list[dict]]:
    """All arrays of a converted GCN and the measured storage of each layer (input codes with the weights)."""
    return integer_model_arrays(SPEC, conv, labels, test_index, _layer_arrays, _layer_storage)

def layers_meta(conv: ConvertedGCN) -> list[dict]:
    """The manifest's per-layer description of a GCN."""
    return [{"index": li, "in_dim": int(lay.w_codes.shape[1]), "out_dim": int(lay.w_codes.shape[0]),
             "relu": lay.relu, "x_scheme": conv.x_schemes[li], "xw_scheme": lay.xw_scheme, "w_bits": lay.w_bits,
             "has_aggregate_quantizer": lay.agg_steps is not None, "has_bias": lay.bias is not None,
             "x_bits_histogram": bits_histogram(lay.x_bits),
             "degree_bucket_scheme": conv.degree_tables.get(li, {}).get("bucket_scheme"),
             "next_layer_codes": li + 1 < len(conv.model.layers)}
            for li, lay in enumerate(conv.model.layers)]
