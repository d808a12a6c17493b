"""Reading a GAT ``.qgraph`` export (numpy only): the arrays it must hold, its integer model, and the bit-exact
recomputation of its integer path (:mod:`quant.archs.gat.integer`). The arrays are documented by the writer,
:mod:`quant.archs.gat.export`; :func:`quant.qgraph.load` validates the export first."""

from __future__ import annotations

from quant.archs.gat.integer import QuantizedGAT, QuantizedGATLayer, gat_constants, gat_graph, gat_layer_trace
from quant.qgraph import CSR_ARRAYS, degree_table, layer_array_names

ARCH = "gat"
_LAYER_ARRAYS = ("x_codes", "x_steps", "x_bits", "xw_codes", "xw_steps", "xw_bits", "w_codes", "w_steps",
                 "att_src_codes", "att_dst_codes", "att_steps", "score_steps", "xw_mult", "xw_shift", "logit_mult",
                 "logit_shift", "score_mult", "score_shift", "exp_table", "ratio", "score", "numer", "coef", "psum",
                 "acc", "out", "out_unit")
_HIDDEN_ARRAYS = ("out_mult", "out_shift", "elu_thresholds")


def integer_model(q) -> QuantizedGAT:
    """The integer GAT a loaded export (``quant.qgraph.QGraph``) describes."""
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


def _layer_checks(q, li: int, lay, h, graph) -> tuple[list, dict]:
    """Layer ``li`` recomputed from its exported parameters: the (name, recomputed, exported) triples, its trace."""
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
    return checks, t


def verify(q) -> None:
    """Recompute the integer path from the exported parameters and decode every packed layout; raise
    ``ExportError`` naming the first array that disagrees."""
    q.verify_layers(integer_model(q), gat_graph, _layer_checks)


def required_arrays(manifest: dict) -> list[str]:
    """Names a complete GAT export must hold."""
    def suffixes(meta: dict) -> list[str]:
        return [*_LAYER_ARRAYS, *(_HIDDEN_ARRAYS if meta.get("next_layer_codes") else ()),
                *(("bias", "bias_int") if meta.get("has_bias") else ()), *degree_table("", meta, "x_scheme"),
                *degree_table("xw_", meta, "xw_scheme")]

    return layer_array_names(manifest, (*CSR_ARRAYS, "graph.in_degree"), suffixes)


__all__ = ["ARCH", "integer_model", "required_arrays", "verify"]
