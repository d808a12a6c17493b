"""Memory-efficient edge-list attention: the forward keeps no per-edge tensor, the backward recomputes them.

:func:`graphtransformer.attention.sparse_attention` is plain autograd over gathered rows, so each layer keeps
``q[:, dst]``, ``k[:, src]``, ``v[:, src]`` and the weighted messages, four (H, E, D) tensors, until the backward
pass: 11 KiB per node and layer at 8 heads x 8 dims and average degree 11, which caps the graph that fits on a GPU.
:func:`fused_sparse_attention` computes the same ``(out, lse)`` with one custom autograd function, in the manner of
FlashAttention on an edge list:

* forward, without autograd: scores per edge (H, E), row maximum, ``exp``, row sums and the weighted sum of values;
  saved: q, k, v, out, lse and the edge list (no (H, E, D) tensor survives the call);
* backward, from those: with ``p_e = exp(s_e - lse_dst)`` and ``delta_i = dout_i . out_i``,
  ``ds_e = p_e (dout_dst . v_src - delta_dst + dlse_dst)``, then ``dq_dst += scale ds_e k_src``,
  ``dk_src += scale ds_e q_dst``, ``dv_src += p_e dout_dst``.

Edges are processed in chunks of ``chunk_edges``, so the transient (H, chunk, D) gathers stay bounded whatever E
is. Gradients flow into q, k and v through ``out`` and ``lse`` (the ring merge differentiates the lse). No attention
dropout (use :func:`~graphtransformer.attention.sparse_attention` for that) and no double backward.

Shapes and conventions as in :mod:`graphtransformer.attention`: q (H, Nq, D), k and v (H, Nk, D), edge_index (2, E)
int64 with row 0 = source (key) and row 1 = target (query); rows without edges get out = 0 and lse = -inf.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

DEFAULT_CHUNK_ELEMENTS = 1 << 25  # H * chunk * D elements per transient gather (128 MiB in float32)


def _chunks(num_edges: int, chunk_edges: int):
    for start in range(0, num_edges, chunk_edges):
        yield start, min(start + chunk_edges, num_edges)


def _edge_scores(q: Tensor, k: Tensor, src: Tensor, dst: Tensor, scale: float) -> Tensor:
    """Scaled scores of the edges src -> dst. q (H, Nq, D), k (H, Nk, D), src/dst (e,) -> (H, e)."""
    return (q[:, dst] * k[:, src]).sum(dim=-1) * scale


def _forward(q: Tensor, k: Tensor, v: Tensor, src: Tensor, dst: Tensor, scale: float,
             chunk_edges: int) -> tuple[Tensor, Tensor]:
    num_heads, num_q, head_dim = q.shape
    scores = torch.empty((num_heads, src.numel()), dtype=q.dtype, device=q.device)  # (H, E)
    for a, b in _chunks(src.numel(), chunk_edges):
        scores[:, a:b] = _edge_scores(q, k, src[a:b], dst[a:b], scale)
    m = torch.full((num_heads, num_q), -math.inf, dtype=q.dtype, device=q.device)
    m = m.scatter_reduce(1, dst.expand(num_heads, -1), scores, reduce="amax")  # (H, Nq)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # empty rows: shift 0, never -inf - -inf
    w = scores.sub_(m[:, dst]).exp_()  # (H, E), in place over the scores
    denom = torch.zeros((num_heads, num_q), dtype=q.dtype, device=q.device).index_add_(1, dst, w)
    num = torch.zeros((num_heads, num_q, head_dim), dtype=v.dtype, device=v.device)
    for a, b in _chunks(src.numel(), chunk_edges):
        num.index_add_(1, dst[a:b], w[:, a:b].unsqueeze(-1) * v[:, src[a:b]])
    nonempty = denom > 0
    denom_safe = torch.where(nonempty, denom, torch.ones_like(denom))
    out = num.div_(denom_safe.unsqueeze(-1))  # (H, Nq, D)
    lse = torch.where(nonempty, m + torch.log(denom_safe), torch.full_like(denom, -math.inf))  # (H, Nq)
    return out, lse


class _FusedEdgeAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, src, dst, scale, chunk_edges):
        out, lse = _forward(q, k, v, src, dst, scale, chunk_edges)
        ctx.save_for_backward(q, k, v, src, dst, out, lse)
        ctx.scale, ctx.chunk_edges = scale, chunk_edges
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout, dlse):
        q, k, v, src, dst, out, lse = ctx.saved_tensors
        scale = ctx.scale
        if dout is None:
            dout = torch.zeros_like(out)
        # Row terms of ds: -delta_i + dlse_i, (H, Nq). Empty rows have no edges, so their -inf lse is never read.
        row = -(dout * out).sum(dim=-1)
        if dlse is not None:
            row = row + torch.where(torch.isfinite(lse), dlse, torch.zeros_like(dlse))
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for a, b in _chunks(src.numel(), ctx.chunk_edges):
            s, d = src[a:b], dst[a:b]
            q_e, k_e, v_e, dout_e = q[:, d], k[:, s], v[:, s], dout[:, d]  # (H, e, D) each
            p = torch.exp((q_e * k_e).sum(dim=-1) * scale - lse[:, d])  # (H, e) softmax weight of each edge
            dv.index_add_(1, s, p.unsqueeze(-1) * dout_e)
            ds = (p * ((dout_e * v_e).sum(dim=-1) + row[:, d])).unsqueeze(-1) * scale  # (H, e, 1)
            dq.index_add_(1, d, ds * k_e)
            dk.index_add_(1, s, ds * q_e)
        return dq, dk, dv, None, None, None, None


def fused_sparse_attention(q: Tensor, k: Tensor, v: Tensor, edge_index: Tensor, scale: float | None = None,
                           chunk_edges: int | None = None) -> tuple[Tensor, Tensor]:
    """Edge-list softmax attention with recompute in the backward pass (module docstring).

    Args:
        q: (H, Nq, D); k, v: (H, Nk, D), all of one floating dtype and device.
        edge_index: (2, E) int64, sources (keys) in [0, Nk), targets (queries) in [0, Nq); duplicates count twice.
        scale: score scale, default 1 / sqrt(D).
        chunk_edges: edges per transient gather; default keeps H * chunk * D at 2^25 elements.

    Returns:
        out (H, Nq, D), lse (H, Nq): equal to :func:`graphtransformer.attention.sparse_attention` without dropout.
    """
    if q.dim() != 3 or k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ValueError(f"fused_sparse_attention: need q (H, Nq, D), k and v (H, Nk, D); got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"fused_sparse_attention: edge_index must be (2, E); got {tuple(edge_index.shape)}")
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    num_heads, _, head_dim = q.shape
    if chunk_edges is None:
        chunk_edges = max(1, DEFAULT_CHUNK_ELEMENTS // (num_heads * head_dim))
    if chunk_edges < 1:
        raise ValueError(f"fused_sparse_attention: chunk_edges={chunk_edges}; use >= 1")
    edge_index = edge_index.to(q.device)
    return _FusedEdgeAttention.apply(q, k, v, edge_index[0], edge_index[1], scale, int(chunk_edges))
