"""Attention-weighted aggregation as one sparse-matrix product, for GAT on large graphs.

GAT's output for head h is ``out_h = A_h @ XW_h`` where ``A_h[i, j] = alpha_jih`` are the attention coefficients
of the edges j -> i. Message passing materialises an (E, H, C) message tensor, gathers it, scales it and
scatter-adds it; on Amazon Computers (about 505k edges with self-loops, 8 heads of 8 channels) those steps are
most of an epoch. Here all heads become one block-structured sparse matrix of shape (N*H, N*H): row ``i*H + h``,
column ``j*H + h``, value ``alpha[e, h]``, applied to ``XW`` viewed as (N*H, C). Then

    forward:        out = A @ XW                                   (one CSR product)
    backward, XW:   dXW = A^T @ dOut                               (one CSR product)
    backward, alpha: dalpha[e, h] = <dOut[i*H + h], XW[j*H + h]>   (one sampled dense-dense product)

and no per-edge message tensor exists. The index arrays that place ``alpha`` into the two CSR layouts are built
once per graph. Duplicate edges stay separate entries (each has its own coefficient), so the sums equal message
passing's, up to float summation order. ``tests/gnn/conv/test_attention_aggregation.py`` checks forward and
gradients against message passing in float64.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

import gnn.conv.aggregation as aggregation


def _block_csr_layout(rows: Tensor, cols: Tensor, num_nodes: int, heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """CSR layout of the (N*H, N*H) block matrix whose entry (rows[e]*H + h, cols[e]*H + h) is edge e, head h.

    Returns ``crow`` (N*H + 1,), ``col`` (E*H,) and ``value_index`` (E*H,): entry k of the CSR value array is
    ``alpha.reshape(-1)[value_index[k]]`` for alpha of shape (E, H).
    """
    num_edges = rows.numel()
    order = torch.argsort(rows * num_nodes + cols, stable=True)  # (E,) edges sorted by row, then column
    counts = torch.bincount(rows, minlength=num_nodes)  # (N,) entries per node row (per head)
    starts = torch.cumsum(counts, 0) - counts  # (N,) first sorted position of each node row
    sorted_rows = rows[order]
    offset = torch.arange(num_edges, device=rows.device) - starts[sorted_rows]  # (E,) position within the row
    h = torch.arange(heads, device=rows.device)
    # Block row r*H + h holds counts[r] entries and starts at H*starts[r] + h*counts[r].
    pos = (heads * starts[sorted_rows]).unsqueeze(1) + h * counts[sorted_rows].unsqueeze(1) + offset.unsqueeze(1)
    pos = pos.reshape(-1)  # (E*H,) CSR position of (sorted edge p, head h)
    value_index = torch.empty(num_edges * heads, dtype=torch.long, device=rows.device)
    value_index[pos] = (order.unsqueeze(1) * heads + h).reshape(-1)
    col = torch.empty(num_edges * heads, dtype=torch.long, device=rows.device)
    col[pos] = (cols[order].unsqueeze(1) * heads + h).reshape(-1)
    crow = torch.zeros(num_nodes * heads + 1, dtype=torch.long, device=rows.device)
    crow[1:] = torch.cumsum(counts.repeat_interleave(heads), 0)
    return crow, col, value_index


def _csr(crow: Tensor, col: Tensor, values: Tensor, size: int) -> Tensor:
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state"
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return torch.sparse_csr_tensor(crow, col, values, (size, size), check_invariants=False)


class _AttentionMatmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, alpha: Tensor, xw: Tensor, layout: AttentionLayout) -> Tensor:
        ctx.layout = layout
        ctx.save_for_backward(alpha, xw)
        a = _csr(layout.crow, layout.col, alpha.reshape(-1)[layout.value_index], layout.size)
        return a @ xw

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        alpha, xw = ctx.saved_tensors
        lay: AttentionLayout = ctx.layout
        grad_out = grad_out.contiguous()
        grad_alpha = grad_xw = None
        if ctx.needs_input_grad[1]:
            a_t = _csr(lay.crow_t, lay.col_t, alpha.reshape(-1)[lay.value_index_t], lay.size)
            grad_xw = a_t @ grad_out
        if ctx.needs_input_grad[0]:
            pattern = _csr(lay.crow, lay.col, torch.zeros_like(lay.col, dtype=grad_out.dtype), lay.size)
            sampled = torch.sparse.sampled_addmm(pattern, grad_out, xw.t(), beta=0.0)
            grad_alpha = torch.empty(alpha.numel(), dtype=alpha.dtype, device=alpha.device)
            grad_alpha[lay.value_index] = sampled.values()
            grad_alpha = grad_alpha.view_as(alpha)
        return grad_alpha, grad_xw, None


class AttentionLayout:
    """The two CSR layouts (A and A^T) of one graph's attention matrix; see `_block_csr_layout`."""

    def __init__(self, edge_index: Tensor, num_nodes: int, heads: int) -> None:
        src, dst = edge_index
        self.size = num_nodes * heads
        self.crow, self.col, self.value_index = _block_csr_layout(dst, src, num_nodes, heads)
        self.crow_t, self.col_t, self.value_index_t = _block_csr_layout(src, dst, num_nodes, heads)


class AttentionAggregation:
    """``out[i, h] = sum over edges e = (j -> i) of alpha[e, h] * xw[j, h]`` for the last graph seen.

    The cache key is the identity of ``edge_index`` (transductive training passes the same tensor every epoch)
    and the node count; a new tensor rebuilds the layout.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._layout: AttentionLayout | None = None

    @staticmethod
    def applies(edge_index: Tensor) -> bool:
        """Whether to aggregate by sparse-matrix product (a large graph; small ones keep message passing)."""
        return edge_index.size(1) >= aggregation.SPMM_MIN_EDGES

    def __call__(self, edge_index: Tensor, alpha: Tensor, xw: Tensor) -> Tensor:
        """alpha: (E, H) coefficients of the edges of ``edge_index`` (2, E); xw: (N, H, C) -> (N, H*C)."""
        num_nodes, heads, channels = xw.shape
        key = (edge_index, num_nodes, heads)
        if self._key is None or self._key[0] is not edge_index or self._key[1:] != key[1:]:
            with torch.no_grad():
                self._layout = AttentionLayout(edge_index, num_nodes, heads)
            self._key = key
        out = _AttentionMatmul.apply(alpha.contiguous(), xw.reshape(num_nodes * heads, channels).contiguous(),
                                     self._layout)
        return out.view(num_nodes, heads * channels)
