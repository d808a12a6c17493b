"""Reading a GraphSAGE ``.qgraph`` export (numpy only): the arrays it must hold, its integer model, and the
bit-exact recomputation of its integer path (:mod:`quant.archs.sage.integer`). The arrays are documented by the writer,
:mod:`quant.archs.sage.export`; :func:`quant.qgraph.load` validates the export first."""

from __future__ import annotations

from quant.archs.sage.integer import QuantizedSAGE, QuantizedSAGELayer, sage_constants, sage_graph, sage_layer_trace
from quant.qgraph import CSR_ARRAYS, degree_table, layer_array_names

ARCH = "sage"
_LAYER_ARRAYS = ("x_codes", "x_steps", "x_bits", "agg_steps", "agg_bits", "wn_codes", "wn_steps", "wr_codes",
                 "wr_steps", "coef", "agg_mult", "agg_shift", "neigh_mult", "neigh_shift", "root_mult", "root_shift",
                 "psum", "agg_codes", "acc", "out", "out_unit")


def integer_model(q) -> QuantizedSAGE:
    """The integer GraphSAGE a loaded export (``quant.qgraph.QGraph``) describes."""
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


def _layer_checks(q, li: int, lay, h, graph) -> tuple[list, dict]:
    """Layer ``li`` recomputed from its exported parameters: the (name, recomputed, exported) triples, its trace."""
    p = f"layer{li}."
    k = sage_constants(lay, graph)
    t = sage_layer_trace(lay, h, graph, constants=k)
    checks = [("x_codes", h, q[p + "x_codes"]), *q.packed_checks(p, h), ("coef", k.coef, q[p + "coef"]),
              ("agg_mult", k.agg_mult, q[p + "agg_mult"]), ("neigh_mult", k.neigh_mult, q[p + "neigh_mult"]),
              ("root_mult", k.root_mult, q[p + "root_mult"]), ("psum", t["psum"], q[p + "psum"]),
              ("agg_codes", t["agg"], q[p + "agg_codes"]), ("acc", t["acc"], q[p + "acc"]),
              ("out", t["out"], q[p + "out"])]
    return checks, t


def verify(q) -> None:
    """Recompute the integer path from the exported parameters and decode both packed layouts; raise
    ``quant.qgraph.ExportError`` naming the first array that disagrees."""
    q.verify_layers(integer_model(q), sage_graph, _layer_checks)


def required_arrays(manifest: dict) -> list[str]:
    """Names a complete GraphSAGE export must hold."""
    def suffixes(meta: dict) -> list[str]:
        return [*_LAYER_ARRAYS, *(["bias"] if meta.get("has_bias") else []), *degree_table("", meta, "x_scheme"),
                *degree_table("agg_", meta, "agg_scheme")]

    return layer_array_names(manifest, (*CSR_ARRAYS, "graph.in_degree"), suffixes)


__all__ = ["ARCH", "integer_model", "required_arrays", "verify"]
