"""Accelerator export of a quantized graph transformer: its quantized tensors, in the ``.qgraph`` format.

A graph transformer's attention (softmax over edges or all pairs) is not a GCN layer, so this export carries no
integer forward path; it carries what the accelerator's memory system and decoder consume: every learned node
tensor as integer codes with per-node bitwidths and steps (A2Q: per node; degree-aware: the degree table and its
per-node expansion), bit-packed and as an Adaptive-Package stream, and every weight as per-output-channel codes.
``hw.tensor_traffic`` reads it back (bytes per layout, decoder cycles of the exported streams).

Arrays (N nodes): ``graph.edge_index`` (2, E), ``graph.in_degree`` (N,), ``logits`` (N, C) of the fake-quant model
on the exported input; per node tensor ``point.<name>.``: ``x_codes`` (N, F) int8, ``x_steps`` (N,) float64,
``x_bits`` (N,) uint8 signed widths, ``x_packed.*`` (:mod:`quant.formats.packing`), ``x_ap.*``
(:mod:`quant.formats.adaptive_package`), degree-aware also ``degree_min/max/bits/step``; per weight ``weight.<name>.``:
``w_codes`` (F_out, F_in) int8, ``w_steps`` (F_out,) float64, ``w_bits`` (F_out,) uint8, ``w_packed.*``
(rows = output channels). ``<name>`` is the quantizer's module path (e.g. ``model.layers.0.attn.q_key``).

Exactness: each point's codes are computed by the model's own quantizer function on the tensor it saw in an
evaluation forward, and ``codes * step`` must equal that quantizer's output (checked before writing), so a consumer
dequantizing the export gets the model's tensors.

This module writes the export (it needs torch); :mod:`quant.archs.transformer.reader` reads it back with numpy only.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from gnn.ops import in_degree
from quant.archs.transformer.reader import ARCH
from quant.convert import _step, degree_table, per_node
from quant.formats import packing
from quant.qat.a2q import A2QQuantizer
from quant.qat.quantizers import a2q_quantize
from quant.qgraph import ExportError
from quant.qgraph.write import (
    bits_histogram,
    command_line,
    degree_table_arrays,
    feature_arrays,
    git_commit,
    write_qgraph,
)

MAX_CODE_BITS = 8  # int8 containers


def _node_quantizers(qmodel: nn.Module) -> list[tuple[str, A2QQuantizer]]:
    out = []
    for name, m in qmodel.named_modules():
        if isinstance(m, A2QQuantizer) and m.kind == "node":
            if m.scheme not in ("node", "degree"):
                raise ExportError(f"export: {name} uses scheme {m.scheme!r}; per-node tensors exist for the schemes "
                                  "'node' (A2Q) and 'degree' (degree-aware)")
            out.append((name, m))
        elif type(m).__name__ == "DQQuantizer":
            raise ExportError(f"export: {name} is a Degree-Quant quantizer; the accelerator export carries learned "
                              "bitwidths: train with --quant a2q or --quant degree-aware")
    if not out:
        raise ExportError("export: the model has no quantized node tensors; apply quant.quantize_ (a2q or "
                          "degree-aware) first")
    return out


def _weight_quantizers(qmodel: nn.Module) -> list[tuple[str, nn.Module, A2QQuantizer]]:
    """(weight module path, module holding ``.weight``, its row-scheme quantizer)."""
    out = []
    for name, m in qmodel.named_modules():
        q = getattr(m, "q_weight", None)
        if isinstance(q, A2QQuantizer):
            if q.scheme != "row":
                raise ExportError(f"export: {name}.q_weight uses scheme {q.scheme!r}; expected per-output-channel "
                                  "'row'")
            out.append((name, m, q))
    return out


def _check_bits(name: str, bits: np.ndarray) -> None:
    if bits.size and (bits.min() < 1 or bits.max() > MAX_CODE_BITS):
        raise ExportError(f"export: {name} has bitwidths in [{bits.min()}, {bits.max()}]; int8 containers hold "
                          f"1..{MAX_CODE_BITS} bits (lower the quantizer's max_bits)")


@torch.no_grad()
def transformer_arrays(qmodel: nn.Module, x: torch.Tensor, edge_index: torch.Tensor) -> tuple[dict, dict]:
    """(arrays, manifest parts) of a quantized :class:`graphtransformer.quantize.QuantizableGraphTransformer`
    evaluated once on ``x`` (N, F_in) with the graph ``edge_index`` (in-degrees of the degree tables)."""
    points = _node_quantizers(qmodel)
    weights = _weight_quantizers(qmodel)
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = [q.register_forward_hook(lambda mod, args, out, name=name: seen.__setitem__(name, (args[0], out)))
             for name, q in points]
    qmodel.eval()
    try:
        logits = qmodel(x, edge_index)
    finally:
        for h in hooks:
            h.remove()
    n = x.shape[0]
    in_deg = in_degree(edge_index, n).cpu()
    arrays = {"graph.edge_index": edge_index.detach().cpu().numpy().astype(np.int64),
              "graph.in_degree": in_deg.numpy().astype(np.int64), "logits": logits.detach().cpu().double().numpy()}
    point_meta, weight_meta = [], []
    for name, q in points:
        if name not in seen:
            raise ExportError(f"export: {name} saw no tensor in the evaluation forward (a layer the schedule skips?)")
        t, out = seen[name]
        if t.dim() != 2 or t.shape[0] != n:
            raise ExportError(f"export: {name} saw a tensor of shape {tuple(t.shape)}; expected ({n}, F)")
        steps, bits = per_node(q, in_deg.to(t.device), name)
        _check_bits(name, bits)
        step_t = torch.as_tensor(steps, dtype=t.dtype, device=t.device)[:, None]
        codes, deq = a2q_quantize(t, step_t, torch.as_tensor(bits, dtype=t.dtype, device=t.device)[:, None])
        if not torch.allclose(deq, out, rtol=1e-6, atol=1e-7 * float(step_t.max())):
            raise ExportError(f"export: {name}: codes * step differ from the quantizer's output by "
                              f"{float((deq - out).abs().max()):.3g}; refusing to write an inexact export")
        p = f"point.{name}."
        arrays.update(feature_arrays(p, codes.cpu().numpy().astype(np.int8), steps, bits))
        if q.scheme == "degree":
            arrays.update(degree_table_arrays(p, degree_table(q)))
        point_meta.append({"name": name, "role": q.role, "scheme": q.scheme, "rows": int(n),
                           "features": int(t.shape[1]), "unsigned": bool(q.unsigned),
                           "bits_histogram": bits_histogram(bits),
                           "degree_bucket_scheme": q.bucket_scheme if q.scheme == "degree" else None})
    for name, mod, q in weights:
        w = mod.weight.detach()
        step, bits = _step(q), q.rounded_bits()
        codes, _ = a2q_quantize(w, step, bits)  # the model's own codes
        w_bits = bits.view(-1).expand(w.shape[0]).long().cpu().numpy()
        _check_bits(name + ".q_weight", w_bits)
        codes8 = codes.cpu().numpy().astype(np.int8)
        packed = packing.pack_rows(codes8, w_bits.astype(np.uint8))
        p = f"weight.{name}."
        w_steps = step.view(-1).expand(w.shape[0]).double().cpu().numpy()
        arrays.update({p + "w_codes": codes8, p + "w_steps": w_steps,
                       p + "w_bits": w_bits.astype(np.uint8), p + "w_packed.payload": packed.payload,
                       p + "w_packed.bits": packed.bits, p + "w_packed.bit_offsets": packed.bit_offsets,
                       p + "w_packed.group_byte_offsets": packed.group_byte_offsets})
        weight_meta.append({"name": name, "shape": list(w.shape), "bits_histogram": bits_histogram(w_bits)})
    return arrays, {"points": point_meta, "weights": weight_meta}


def export_graph_transformer(qmodel: nn.Module, data, out: Path | str, *, dataset: str = "", provenance:
                             dict | None = None, overwrite: bool = False) -> Path:
    """Write the quantized tensors of ``qmodel`` (see :func:`transformer_arrays`) on the node task ``data`` (PyG
    Data: x, edge_index, y) to ``out``; returns the path. The manifest's ``model.arch`` is "graph-transformer"."""
    from quant.qat.api import quant_summary

    device = next(qmodel.parameters()).device
    x = data.x.float().to(device)
    arrays, parts = transformer_arrays(qmodel, x, data.edge_index.to(device))
    summary = quant_summary(qmodel)
    cfg = qmodel.model.cfg
    qcfg = qmodel._quant_cfg
    commit, dirty = git_commit()
    fp32_bytes = sum(4 * p["rows"] * p["features"] for p in parts["points"])
    packed_bytes = sum(int(arrays[f"point.{p['name']}.x_packed.payload"].nbytes) for p in parts["points"])
    meta = {
        "model": {"arch": ARCH, "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
                  "quant_method": qcfg.method, "target_bits": qcfg.target_bits},
        "dataset": {"name": dataset, "num_nodes": int(data.num_nodes), "num_edges": int(data.edge_index.size(1)),
                    "num_features": int(data.x.size(1))},
        "provenance": {"git_commit": commit, "git_dirty": dirty, "command": command_line(),
                       "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "torch": torch.__version__, **(provenance or {})},
        **parts,
        "metrics": {"avg_bits": summary["avg_bits"], "avg_bits_with_sign": summary["avg_bits_with_sign"],
                    "bits_convention": summary["headline_convention"],
                    "node_tensor_bytes": {"fp32": fp32_bytes, "packed": packed_bytes}},
    }
    return write_qgraph(out, arrays, meta, overwrite=overwrite)


__all__ = ["export_graph_transformer", "transformer_arrays"]
