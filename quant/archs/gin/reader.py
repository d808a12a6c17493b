"""Reading a GIN ``.qgraph`` export (numpy only): the arrays it must hold, its integer model, and the bit-exact
recomputation of its integer path (:mod:`quant.archs.gin.integer`). The arrays are documented by the writer,
:mod:`quant.archs.gin.export`; :func:`quant.qgraph.load` validates the export first."""

from __future__ import annotations

import numpy as np

from quant.archs.gin.integer import QuantizedGIN, QuantizedGINLayer, gin_constants, gin_graph, gin_layer_trace
from quant.formats import packing
from quant.qgraph import CSR_ARRAYS, ExportError, degree_table, layer_array_names

ARCH = "gin"
_LAYER_ARRAYS = ("x_codes", "x_steps", "x_bits", "eps", "agg_codes", "agg_steps", "agg_bits", "hid_codes",
                 "hid_steps", "hid_bits", "w1_codes", "w1_steps", "bn_scale", "w2_codes", "w2_steps", "coef",
                 "agg_mult", "agg_shift", "w1_signed", "mid_mult", "mid_shift", "lin2_mult", "lin2_shift", "psum",
                 "mid", "acc", "out", "out_unit")


def integer_model(q) -> QuantizedGIN:
    """The integer GIN a loaded export (``quant.qgraph.QGraph``) describes."""
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


def _layer_checks(q, li: int, lay, h, graph) -> tuple[list, dict]:
    """Layer ``li`` recomputed from its exported parameters: the (name, recomputed, exported) triples, its trace."""
    p = f"layer{li}."
    k = gin_constants(lay, graph)
    t = gin_layer_trace(lay, h, graph, constants=k)
    checks = [("x_codes", h, q[p + "x_codes"])]
    if lay.x_scheme == "node":
        checks += q.packed_checks(p, h)
    else:
        flat = packing.unpack_codes(q[p + "x_packed_flat"], uniform_width(lay.x_bits, p + "x_bits"), h.size)
        checks.append(("x_packed_flat", h, flat.reshape(h.shape)))
    fixed = q.manifest["layers"][li]["hid_scheme"] == "fixed"  # 16-bit fixed point: no packed layouts
    for name, codes in (("agg", t["agg"]), ("hid", t["hidden"])):
        checks.append((f"{name}_codes", codes, q[p + f"{name}_codes"]))
        checks += [] if name == "hid" and fixed else q.packed_checks(p, codes, name)
    checks += [("coef", k.coef, q[p + "coef"]), ("agg_mult", k.agg_mult, q[p + "agg_mult"]),
               ("w1_signed", k.w1_signed, q[p + "w1_signed"]), ("mid_mult", k.mid_mult, q[p + "mid_mult"]),
               ("lin2_mult", k.lin2_mult, q[p + "lin2_mult"]), ("psum", t["psum"], q[p + "psum"]),
               ("mid", t["mid"], q[p + "mid"]), ("acc", t["acc"], q[p + "acc"]), ("out", t["out"], q[p + "out"])]
    return checks, t


def verify(q) -> None:
    """Recompute the integer path from the exported parameters and decode every packed layout; raise
    ``ExportError`` naming the first array that disagrees."""
    q.verify_layers(integer_model(q), gin_graph, _layer_checks)


def required_arrays(manifest: dict) -> list[str]:
    """Names a complete GIN export must hold."""
    def suffixes(meta: dict) -> list[str]:
        return [*_LAYER_ARRAYS, "x_packed_flat" if meta.get("x_step_scheme") == "channel" else "x_packed.payload",
                *(("b1", "bias1_int") if meta.get("has_b1") else ()),
                *(("b2", "bias2_int") if meta.get("has_b2") else ()), *degree_table("", meta, "x_scheme"),
                *degree_table("agg_", meta, "agg_scheme"), *degree_table("hid_", meta, "hid_scheme")]

    return layer_array_names(manifest, (*CSR_ARRAYS, "graph.self_loop", "graph.in_degree"), suffixes)


def uniform_width(bits: np.ndarray, who: str) -> int:
    """The one bitwidth of a per-channel tensor (A2Q's fixed bits); refuses mixed widths."""
    widths = np.unique(bits)
    if widths.size != 1:
        raise ExportError(f"export: {who} has per-channel bitwidths {widths.tolist()}; the packed per-channel stream "
                          "takes one width")
    return int(widths[0])


__all__ = ["ARCH", "integer_model", "required_arrays", "uniform_width", "verify"]
