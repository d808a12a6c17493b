"""Reading a GCN ``.qgraph`` export (numpy only): the arrays it must hold, its integer model, and the bit-exact
recomputation of its integer path (:mod:`quant.archs.gcn.integer`). The arrays are documented by the writer,
:mod:`quant.export`; :func:`quant.qgraph.load` validates the export first."""

from __future__ import annotations

from quant.archs.gcn.integer import QuantizedGCN, QuantizedGCNLayer, gcn_graph, gcn_layer_trace, layer_constants
from quant.qgraph import CSR_ARRAYS, degree_table, layer_array_names

ARCH = "gcn"
_LAYER_ARRAYS = ("x_codes", "x_steps", "x_bits", "w_codes", "w_steps", "xw_steps", "xw_bits", "xw_mult", "xw_shift",
                 "coef", "xw_codes", "psum", "out", "out_unit")


def integer_model(q) -> QuantizedGCN:
    """The integer GCN a loaded export (``quant.qgraph.QGraph``) describes; ``q.to_quantized_gcn()`` checks the
    arch first."""
    ip, layers = q.manifest["integer_path"], []
    num = len(q.manifest["layers"])
    for li, meta in enumerate(q.manifest["layers"]):
        p, nxt = f"layer{li}.", f"layer{li + 1}."
        has_agg, last = meta["has_aggregate_quantizer"], li == num - 1
        layers.append(QuantizedGCNLayer(
            x_steps=q[p + "x_steps"], x_bits=q[p + "x_bits"], w_codes=q[p + "w_codes"],
            w_steps=q[p + "w_steps"], w_bits=meta["w_bits"], xw_steps=q[p + "xw_steps"],
            xw_bits=q[p + "xw_bits"], xw_scheme=meta["xw_scheme"],
            agg_steps=q[p + "agg_steps"] if has_agg else None,
            agg_bits=q[p + "agg_bits"] if has_agg else None,
            bias=q[p + "bias"] if meta["has_bias"] else None,
            out_steps=None if last else q[nxt + "x_steps"], out_bits=None if last else q[nxt + "x_bits"],
            relu=meta["relu"], frac_bits=ip["frac_bits"], psum_bits=ip["psum_bits"]))
    return QuantizedGCN(x_codes=q["layer0.x_codes"], layers=tuple(layers))


def _layer_checks(q, li: int, lay, h, graph) -> tuple[list, dict]:
    """Layer ``li`` recomputed from its exported parameters: the (name, recomputed, exported) triples, its trace."""
    p = f"layer{li}."
    t = gcn_layer_trace(lay, h, graph)
    k = layer_constants(lay, graph)
    return [("x_codes", h, q[p + "x_codes"]), *q.packed_checks(p, h),
            ("xw_mult", k.xw_mult, q[p + "xw_mult"]), ("coef", k.coef, q[p + "coef"]),
            ("xw_codes", t["xw"], q[p + "xw_codes"]),
            ("psum", t["psum"], q[p + "psum"]), ("out", t["out"], q[p + "out"])], t


def verify(q) -> None:
    """Recompute the integer path from the exported parameters and decode both packed layouts; raise
    ``ExportError`` naming the first array that disagrees."""
    q.verify_layers(q.to_quantized_gcn(), gcn_graph, _layer_checks)


def required_arrays(manifest: dict) -> list[str]:
    """Names a complete GCN export must hold."""
    def suffixes(meta: dict) -> list[str]:
        return [*_LAYER_ARRAYS, *(("agg_steps", "agg_bits") if meta.get("has_aggregate_quantizer") else ()),
                *(["bias"] if meta.get("has_bias") else []), *degree_table("", meta, "x_scheme")]

    return layer_array_names(manifest, (*CSR_ARRAYS, "graph.in_degree"), suffixes)


__all__ = ["ARCH", "integer_model", "required_arrays", "verify"]
