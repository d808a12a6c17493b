"""Stimulus derived from the project's own quantization code: a tiny GCN layer in integers (quant.archs.gcn.integer).

Nothing here is hand-written arithmetic: codes come from ``integer_gnn.fake_quant``, multipliers from
``fixed_point.quantize_multiplier``, edge coefficients from ``fixed_point.edge_coefficients`` on ``gcn_graph``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant.archs.gcn.integer import gcn_graph
from quant.formats.fixed_point import edge_coefficients, quantize_multiplier, requantize, saturate
from quant.integer import ACC_BITS, fake_quant


@dataclass(frozen=True, kw_only=True)
class LayerWorkload:
    """Integer tensors of one GCN layer. Shapes: N nodes, F_in -> F_out, E' edges (with self loops)."""

    x_codes: np.ndarray   # (N, F_in) int8, per-node bitwidth x_bits
    x_bits: np.ndarray    # (N,) 2..8
    w_codes: np.ndarray   # (F_out, F_in) int8, 4-bit symmetric
    acc: np.ndarray       # (N, F_out) int64 = sat32(x @ w^T)
    mult: np.ndarray      # (N, F_out) requant multiplier to the XW step
    shift: np.ndarray     # (N, F_out)
    xw_bits: np.ndarray   # (N,)
    xw: np.ndarray        # (N, F_out) XW codes = requantize(acc, mult, shift, xw_bits)
    indptr: np.ndarray    # (N+1,) destination-major CSR
    indices: np.ndarray   # (E',) source of each slot
    coef: np.ndarray      # (E',) unsigned fixed-point edge coefficients


def make_layer(seed: int, num_nodes: int = 20, f_in: int = 12, f_out: int = 8, num_edges: int = 40,
               frac_bits: int = 8, sparsity: float = 0.5) -> LayerWorkload:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    edge_index = np.stack([np.r_[src, dst], np.r_[dst, src]])  # symmetric (2, 2E)
    indptr, indices, weight = gcn_graph(edge_index, num_nodes)
    x_bits = rng.integers(2, 9, num_nodes)
    x_steps = 2.0 ** rng.uniform(-6, -2, num_nodes)
    x = rng.normal(0, 1, (num_nodes, f_in)) * (rng.random((num_nodes, f_in)) > sparsity)
    x = x * (x_steps * 2.0 ** (x_bits - 2))[:, None]  # about a quarter of the code range, some saturation
    x_codes = fake_quant(x, x_steps[:, None], x_bits[:, None]).astype(np.int8)
    w_steps = 2.0 ** rng.uniform(-4, -1, f_out)
    w = rng.normal(0, 3, (f_out, f_in)) * w_steps[:, None]
    w_codes = fake_quant(w, w_steps[:, None], np.full((f_out, 1), 4)).astype(np.int8)
    acc = saturate(x_codes.astype(np.int64) @ w_codes.astype(np.int64).T, ACC_BITS)
    xw_bits = rng.integers(2, 9, num_nodes)
    acc_rms = np.sqrt((acc.astype(np.float64) ** 2).mean(axis=1)) + 1.0  # (N,)
    xw_steps = x_steps * w_steps.mean() * acc_rms / 2.0 ** (xw_bits - 2) * 2.0 ** rng.uniform(-1, 1, num_nodes)
    mult, shift = quantize_multiplier(x_steps[:, None] * w_steps[None, :] / xw_steps[:, None])
    xw = requantize(acc, mult, shift, xw_bits[:, None])
    u_ref = float(2.0 ** np.ceil(np.log2(xw_steps.max())))
    coef = edge_coefficients(weight * xw_steps[indices] / u_ref, frac_bits)
    return LayerWorkload(x_codes=x_codes, x_bits=x_bits, w_codes=w_codes, acc=acc, mult=mult, shift=shift,
                         xw_bits=xw_bits, xw=xw, indptr=indptr, indices=indices, coef=coef)


def random_gcn_layer(seed: int, num_nodes: int, f_in: int, f_out: int, num_edges: int, *, psum_bits: int,
                     frac_bits: int, xw_scheme: str, agg: bool, bias: bool, relu: bool, last: bool):
    """A random :class:`quant.archs.gcn.integer.QuantizedGCNLayer`, its input codes and its GCN graph (gcn_graph)."""
    from quant.archs.gcn.integer import QuantizedGCNLayer

    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, num_nodes, num_edges), rng.integers(0, num_nodes, num_edges)
    graph = gcn_graph(np.stack([np.r_[src, dst], np.r_[dst, src]]), num_nodes)
    x_bits = rng.integers(2, 9, num_nodes)
    x_bits[rng.random(num_nodes) < 0.15] = 1  # 1-bit nodes are all zero (no values, no XW row)
    x_steps = 2.0 ** rng.uniform(-6, -2, num_nodes)
    x = rng.normal(0, 1, (num_nodes, f_in)) * (rng.random((num_nodes, f_in)) > 0.5)
    x_codes = fake_quant(x * (x_steps * 2.0 ** (np.maximum(x_bits, 2) - 2))[:, None], x_steps[:, None],
                         x_bits[:, None]).astype(np.int8)
    w_steps = 2.0 ** rng.uniform(-4, -1, f_out)
    w_codes = fake_quant(rng.normal(0, 3, (f_out, f_in)) * w_steps[:, None], w_steps[:, None],
                         np.full((f_out, 1), 4)).astype(np.int8)
    acc_rms = float(np.sqrt(((x_codes.astype(np.float64) @ w_codes.T) ** 2).mean()) + 1.0)
    xw_len = num_nodes if xw_scheme == "node" else f_out
    xw_bits = rng.integers(2, 9, xw_len)
    xw_steps = (x_steps.mean() * w_steps.mean() * acc_rms / 2.0 ** (xw_bits - 2)
                * 2.0 ** rng.uniform(-1, 1, xw_len))
    agg_scale = xw_steps.mean() * 2.0
    return QuantizedGCNLayer(
        x_steps=x_steps, x_bits=x_bits, w_codes=w_codes, w_steps=w_steps, xw_steps=xw_steps, xw_bits=xw_bits,
        xw_scheme=xw_scheme, agg_steps=agg_scale * 2.0 ** rng.uniform(-2, 0, num_nodes) if agg else None,
        agg_bits=rng.integers(2, 9, num_nodes) if agg else None,
        bias=rng.normal(0, 2 * agg_scale, f_out) if bias else None,
        out_steps=None if last else agg_scale * 2.0 ** rng.uniform(-3, 0, num_nodes),
        out_bits=None if last else rng.integers(1, 9, num_nodes), relu=relu, frac_bits=frac_bits,
        psum_bits=psum_bits), x_codes, graph
