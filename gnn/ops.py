"""Pure graph kernels shared by the layers, the quantizers and the accelerator model."""

from __future__ import annotations

import warnings

import torch
from torch import Tensor


def add_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Append one self loop per node. edge_index: (2, E) -> (2, E + N), loops last."""
    loops = torch.arange(num_nodes, device=edge_index.device).repeat(2, 1)
    return torch.cat([edge_index, loops], dim=1)


def remove_self_loops(edge_index: Tensor) -> Tensor:
    """Drop edges i -> i. edge_index: (2, E) -> (2, E')."""
    return edge_index[:, edge_index[0] != edge_index[1]]


def in_degree(edge_index: Tensor, num_nodes: int) -> Tensor:
    """In-degree of every node (edges point source -> target = edge_index[0] -> edge_index[1]). (N,) int64."""
    return torch.bincount(edge_index[1], minlength=num_nodes)


def gcn_norm(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """Symmetric GCN normalisation with self loops (Kipf & Welling 2017, Eq. 2).

    Returns the edge list with self loops appended and the weight of each edge,
    ``w_ji = 1 / sqrt(deg(j) deg(i))`` with ``deg`` counting the self loop.
    Existing self loops are replaced by exactly one loop per node.

    Shapes: edge_index (2, E) -> ((2, E' + N), (E' + N,)).
    """
    edge_index = add_self_loops(remove_self_loops(edge_index), num_nodes)
    deg = in_degree(edge_index, num_nodes).to(dtype)  # (N,), >= 1 thanks to the loops
    deg_inv_sqrt = deg.rsqrt()
    src, dst = edge_index
    return edge_index, deg_inv_sqrt[src] * deg_inv_sqrt[dst]


def csr_adjacency(edge_index: Tensor, num_nodes: int, weight: Tensor | None = None, reduce: str = "sum",
                  dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """The aggregation matrix ``A`` (N_dst, N_src) of a graph and its transpose, both in CSR.

    ``A[i, j]`` is the summed weight of the edges j -> i (weight 1 when ``weight`` is None); with
    ``reduce="mean"`` row i is divided by the in-degree of i (rows of nodes without in-edges stay empty).
    Then ``A @ X`` is the sum (mean) of neighbour rows that message passing computes, and ``A^T @ G`` its
    gradient with respect to X.

    Shapes: edge_index (2, E), weight (E,) -> two sparse CSR tensors (N, N).
    """
    if reduce not in ("sum", "mean"):
        raise ValueError(f"csr_adjacency: reduce must be 'sum' or 'mean', not {reduce!r}")
    src, dst = edge_index
    w = torch.ones(src.numel(), dtype=dtype, device=src.device) if weight is None else weight.to(dtype)
    if reduce == "mean":
        deg = in_degree(edge_index, num_nodes).to(dtype)  # (N,)
        w = w / deg.clamp_min(1.0)[dst]
    a = torch.sparse_coo_tensor(torch.stack([dst, src]), w, (num_nodes, num_nodes), check_invariants=False)
    a = a.coalesce()  # sums duplicate edges, as message passing does
    with warnings.catch_warnings():  # "Sparse CSR tensor support is in beta state": CSR @ dense is what we use
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        return a.to_sparse_csr(), a.t().coalesce().to_sparse_csr()


class _CsrMatmul(torch.autograd.Function):
    """``A @ H`` with a constant sparse ``A``; backward ``A^T @ G`` (no gradient for A)."""

    @staticmethod
    def forward(ctx, h: Tensor, a: Tensor, a_t: Tensor) -> Tensor:
        ctx.a_t = a_t
        return a @ h

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        return ctx.a_t @ grad_out.contiguous(), None, None


def csr_matmul(a: Tensor, a_t: Tensor, h: Tensor) -> Tensor:
    """Differentiable ``A @ H`` for the pair returned by `csr_adjacency`. h: (N_src, F) dense -> (N_dst, F)."""
    return _CsrMatmul.apply(h.contiguous(), a, a_t)


class _SparseInputMatmul(torch.autograd.Function):
    """``X @ W^T`` for constant sparse COO features X: CSR product forward, ``dW = (X^T G)^T`` backward."""

    @staticmethod
    def forward(ctx, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            return x.to_sparse_csr() @ w.t()

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (x,) = ctx.saved_tensors
        return None, torch.sparse.mm(x.t(), grad_out).t()


def sparse_input_matmul(x: Tensor, w: Tensor) -> Tensor:
    """``X W^T`` for sparse COO node features X (N, F_in) and a weight W (F_out, F_in) -> dense (N, F_out).

    The same product ``torch.sparse.mm(x, w.t())`` gives, faster: the forward runs on CSR and the weight gradient
    is one ``X^T @ G`` (the speed against PyG's layers is in ``benchmarks/results/train_speed.json``). Input
    features that need a gradient themselves take ``torch.sparse.mm``.
    """
    if x.requires_grad:
        return torch.sparse.mm(x, w.t())
    return _SparseInputMatmul.apply(x, w)
