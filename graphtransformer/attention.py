"""Graph attention kernels behind one interface: ``kernel(q, k, v, ...) -> (out, lse)``.

Every kernel returns the attention output and the log-sum-exp of the (scaled) scores of each query row, so that
partial results over disjoint key sets merge exactly (:func:`merge_attention`, the ring-attention LSE merge). Rows
without any key get ``out = 0`` and ``lse = -inf``; every kernel and the merge are NaN-free for them, in value and
in gradient.

Kernels (single device; CPU and CUDA autograd):

* :func:`dense_attention`: explicit softmax over all key columns, optional boolean mask (``mask[i, j]``: query i
  may attend key j). O(Nq * Nk) memory.
* :func:`sparse_attention`: topology attention over an edge list (edge ``j -> i`` lets query ``i`` attend key
  ``j``), stable edge-list softmax (max subtraction, unlike TorchGT's ``clamp(-5, 5)``). O(E * D) memory.
* ``cluster`` (:mod:`graphtransformer.cluster`): METIS-reordered, dense tiles for dense cluster pairs, sparse rest.

Conventions. Shapes: q (H, Nq, D), k and v (H, Nk, D), out (H, Nq, D), lse (H, Nq). The default scale is
``1 / sqrt(D)``. edge_index (2, E) int64, row 0 = source (key), row 1 = target (query), as in PyG.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def _safe_max(m: Tensor) -> Tensor:
    """Replace the -inf maxima of empty rows by 0 so that ``s - m`` never becomes ``-inf - (-inf)``."""
    return torch.where(torch.isfinite(m), m, torch.zeros_like(m))


def _finish(num: Tensor, denom: Tensor, m: Tensor) -> tuple[Tensor, Tensor]:
    """num (H, N, D), denom (H, N), m (H, N) (the shift used for exp) -> (out, lse), guarded for empty rows."""
    nonempty = denom > 0
    denom_safe = torch.where(nonempty, denom, torch.ones_like(denom))
    out = num / denom_safe.unsqueeze(-1)  # (H, N, D); num == 0 on empty rows
    lse = torch.where(nonempty, m + torch.log(denom_safe), torch.full_like(denom, -math.inf))
    return out, lse


def dense_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                    scale: float | None = None) -> tuple[Tensor, Tensor]:
    """softmax(q k^T * scale, masked) v with its log-sum-exp.

    Args:
        q, k, v: (H, Nq, D), (H, Nk, D), (H, Nk, D).
        mask: None (all pairs) or a boolean tensor broadcastable to (Nq, Nk) / (H, Nq, Nk); True = attend.
        scale: score scale, default 1 / sqrt(D).

    Returns:
        out (H, Nq, D), lse (H, Nq) (-inf where a row attends nothing).
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = torch.matmul(q, k.transpose(-1, -2)) * scale  # (H, Nq, Nk)
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    # The shift cancels exactly in out and lse, so it carries no gradient.
    m = _safe_max(s.detach().amax(dim=-1))  # (H, Nq)
    p = torch.exp(s - m.unsqueeze(-1))  # (H, Nq, Nk), exactly 0 where masked
    return _finish(torch.matmul(p, v), p.sum(dim=-1), m)


def flash_dense_attention(q: Tensor, k: Tensor, v: Tensor, scale: float | None = None) -> tuple[Tensor, Tensor]:
    """All-pairs attention (no mask) through PyTorch's fused kernels, which also return the lse: the CPU flash
    kernel, or on CUDA the memory-efficient kernel (any float dtype, head dims that are not multiples of 8).

    Same result as ``dense_attention(q, k, v)`` without the (H, Nq, Nk) intermediates (~5x faster on CPU).
    Gradients flow through ``out`` only: the returned lse is detached (use :func:`dense_attention` where a
    loss depends on the lse, e.g. inside the ring merge).

    Shapes: q (H, Nq, D), k and v (H, Nk, D) -> out (H, Nq, D), lse (H, Nq).
    """
    q4, k4, v4 = q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0)  # (1, H, N, D)
    if q.is_cuda:
        op = torch.ops.aten._scaled_dot_product_efficient_attention
        out, lse = op(q4, k4, v4, None, True, scale=scale)[:2]  # lse (1, H, >= Nq): rows padded to its tile
    else:
        op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
        out, lse = op(q4, k4, v4, scale=scale)[:2]  # (1, H, Nq, D), (1, H, Nq)
    return out[0], lse[0, :, : q.shape[1]].detach()


def sparse_attention(q: Tensor, k: Tensor, v: Tensor, edge_index: Tensor,
                     scale: float | None = None, dropout_p: float = 0.0) -> tuple[Tensor, Tensor]:
    """Edge-list softmax attention: query i attends exactly the keys j with an edge j -> i.

    Args:
        q: (H, Nq, D); k, v: (H, Nk, D).
        edge_index: (2, E) int64, sources in [0, Nk) (keys), targets in [0, Nq) (queries). Duplicate edges count
            twice (as in a multigraph); callers pass coalesced edges.
        scale: score scale, default 1 / sqrt(D).
        dropout_p: attention dropout (GAT-style): each normalised edge weight is zeroed with probability p and
            the rest scaled by 1 / (1 - p); the lse is that of the undropped softmax. Training only (the caller
            passes 0 at evaluation); not mergeable across ranks.

    Returns:
        out (H, Nq, D), lse (H, Nq); equal to :func:`dense_attention` with ``mask[dst, src] = True`` (p = 0).
    """
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    num_heads, num_q, head_dim = q.shape
    src, dst = edge_index[0], edge_index[1]
    s = (q[:, dst] * k[:, src]).sum(dim=-1) * scale  # (H, E)
    m = torch.full((num_heads, num_q), -math.inf, dtype=s.dtype, device=s.device)
    m = _safe_max(m.scatter_reduce(1, dst.expand(num_heads, -1), s.detach(), reduce="amax"))  # (H, Nq)
    w = torch.exp(s - m[:, dst])  # (H, E)
    denom = torch.zeros((num_heads, num_q), dtype=s.dtype, device=s.device).index_add(1, dst, w)
    if dropout_p > 0.0:
        w = torch.nn.functional.dropout(w, dropout_p, training=True)  # (H, E), after the normaliser
    num = torch.zeros((num_heads, num_q, head_dim), dtype=v.dtype, device=v.device)
    num = num.index_add(1, dst, w.unsqueeze(-1) * v[:, src])  # (H, Nq, D)
    return _finish(num, denom, m)


def merge_attention(out_a: Tensor, lse_a: Tensor, out_b: Tensor, lse_b: Tensor) -> tuple[Tensor, Tensor]:
    """Exact merge of two partial attentions over disjoint key sets (ring-attention LSE merge).

    lse = log(exp(lse_a) + exp(lse_b)); out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b.
    Equivalent to ring-flash-attn's ``out - sigmoid(lse_b - lse_a) (out - out_b)`` form, written so that rows
    empty in both parts (-inf, -inf) give out = 0, lse = -inf and zero gradients instead of NaN.

    Shapes: out_* (H, N, D), lse_* (H, N) -> (H, N, D), (H, N).
    """
    m = _safe_max(torch.maximum(lse_a, lse_b).detach())  # (H, N)
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)  # (H, N), in [0, 1]
    denom = wa + wb
    out, lse = _finish(wa.unsqueeze(-1) * out_a + wb.unsqueeze(-1) * out_b, denom, m)
    return out, lse


def edge_mask(edge_index: Tensor, num_queries: int, num_keys: int) -> Tensor:
    """Boolean (Nq, Nk) mask with mask[dst, src] = True for every edge src -> dst (the dense view of a topology)."""
    mask = torch.zeros((num_queries, num_keys), dtype=torch.bool, device=edge_index.device)
    mask[edge_index[1], edge_index[0]] = True
    return mask
