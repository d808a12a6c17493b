"""Pure graph kernels shared by the layers, the quantizers and the accelerator model."""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass

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
    """``X @ W^T`` for constant sparse COO features X: CSR product forward, ``dW = (X^T G)^T`` backward (``X^T``
    from the kept column-major order when X's entries are a registered fixed pattern, see `sparse_weight_grad`)."""

    @staticmethod
    def forward(ctx, x: Tensor, w: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            return x.to_sparse_csr() @ w.t()

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (x,) = ctx.saved_tensors
        return None, sparse_weight_grad(x, grad_out)


class _SparseFromValues(torch.autograd.Function):
    """A coalesced sparse COO tensor from its stored values; backward hands the gradient of those values back
    directly when the incoming gradient has the same entries (as `_SparseValuesMatmul` returns), instead of the
    ``sparse_mask`` that autograd's own constructor gradient runs (most of a quantized epoch on Coauthor CS)."""

    @staticmethod
    def forward(ctx, values: Tensor, indices: Tensor, shape: tuple[int, ...]) -> Tensor:
        ctx.indices = indices
        return torch.sparse_coo_tensor(indices, values, shape, is_coalesced=True, check_invariants=False)

    @staticmethod
    def backward(ctx, grad: Tensor):
        idx = ctx.indices
        if not grad.is_sparse:
            return grad[tuple(idx)], None, None
        grad = grad.coalesce()
        if grad._nnz() == idx.size(1) and torch.equal(grad.indices(), idx):
            return grad.values(), None, None
        return grad.to_dense()[tuple(idx)], None, None  # other entries: read the values at ours


def sparse_from_values(indices: Tensor, values: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Differentiable coalesced COO tensor (``indices`` (2, nnz) sorted row-major and unique, ``values`` (nnz,)):
    how the quantizers return a rounded sparse aggregate."""
    return _SparseFromValues.apply(values, indices, tuple(shape))


def sparse_add_scaled(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """``a + c * b`` for coalesced COO tensors ``a`` and ``b`` (N, F) that need no gradient and a scalar tensor ``c``
    (which may): a coalesced COO tensor on the union of their entries, differentiable in ``c``. When every entry
    of ``b`` is already an entry of ``a`` (``a = (A + I) @ b``) the values of ``c * b`` are added in place of a
    union."""
    n_cols = a.size(1)
    a_idx, b_idx = a.indices(), b.indices()
    a_key, b_key = a_idx[0] * n_cols + a_idx[1], b_idx[0] * n_cols + b_idx[1]  # row-major, sorted (coalesced)
    scaled = c.reshape(()) * b.values()  # (nnz_b,)
    pos = torch.searchsorted(a_key, b_key).clamp_max(max(a_key.numel() - 1, 0))
    if a_key.numel() and bool((a_key[pos] == b_key).all()):
        return sparse_from_values(a_idx, a.values().index_add(0, pos, scaled), a.shape)
    keys, inverse = torch.unique(torch.cat([a_key, b_key]), sorted=True, return_inverse=True)
    values = scaled.new_zeros(keys.numel()).index_add(0, inverse[:a_key.numel()], a.values().to(scaled.dtype))
    values = values.index_add(0, inverse[a_key.numel():], scaled)
    return sparse_from_values(torch.stack([keys // n_cols, keys % n_cols]), values, a.shape)


def storage_address(t: Tensor) -> tuple[int, int]:
    """Where a tensor's elements start in memory (storage pointer, offset)."""
    return t.untyped_storage().data_ptr(), t.storage_offset()


def same_entries(x: Tensor, indices: Tensor) -> bool:
    """Whether coalesced COO ``x`` stores its entries in ``indices``' memory (the same index tensor, aliased; the
    caller keeps ``indices`` alive, so an equal address cannot be reused memory)."""
    idx = x.indices()
    return (idx.shape == indices.shape and idx.device == indices.device
            and storage_address(idx) == storage_address(indices))


@dataclass(frozen=True)
class ColumnMajorPattern:
    """A coalesced COO pattern of an (N, F) matrix X read column by column: ``X^T`` in CSR for any stored values.

    Attributes:
        order: (nnz,) positions of X's stored values (row-major) in column-major order.
        crow: (F + 1,) where each column of X starts in that order.
        rows: (nnz,) the row of each entry in that order (the CSR column indices of ``X^T``).
        shape: (F, N) of ``X^T``.
    """

    order: Tensor
    crow: Tensor
    rows: Tensor
    shape: tuple[int, int]

    @staticmethod
    def of(indices: Tensor, shape: tuple[int, int]) -> ColumnMajorPattern:
        """The pattern of coalesced COO ``indices`` (2, nnz) (row-major sorted, unique) of an (N, F) matrix."""
        rows, cols = indices
        order = torch.argsort(cols, stable=True)  # rows stay ascending within a column
        crow = torch.zeros(shape[1] + 1, dtype=torch.long, device=indices.device)
        crow[1:] = torch.bincount(cols, minlength=shape[1]).cumsum(0)
        return ColumnMajorPattern(order, crow, rows[order], (shape[1], shape[0]))

    def transpose(self, values: Tensor) -> Tensor:
        """``X^T`` (F, N) in CSR from X's stored ``values`` (nnz,), row-major as the COO pattern stores them."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            return torch.sparse_csr_tensor(self.crow, self.rows, values[self.order], self.shape,
                                           check_invariants=False)


class _FixedPattern:
    """A registered pattern: a weak reference to its index tensor and, once needed, its column-major form."""

    def __init__(self, indices: Tensor, shape: tuple[int, int]) -> None:
        self.indices = weakref.ref(indices)
        self.shape = shape
        self.column_major: ColumnMajorPattern | None = None


_FIXED_PATTERNS: dict[tuple[int, int], _FixedPattern] = {}


def register_fixed_pattern(indices: Tensor, shape: tuple[int, int]) -> None:
    """Declare that sparse tensors with the entries ``indices`` (2, nnz, coalesced COO of an (N, F) matrix) will
    be built again and again with new stored values (a planned sparse product's output, `gnn.conv.sparse_product`),
    so that `sparse_input_matmul`'s weight gradient may keep that pattern's column-major order instead of sorting
    ``X^T`` every step. The entry lives as long as this index tensor object; while it lives its memory cannot be
    reused, so a tensor whose indices start at the same address has these entries."""
    key = storage_address(indices)
    entry = _FIXED_PATTERNS[key] = _FixedPattern(indices, (int(shape[0]), int(shape[1])))

    def forget() -> None:
        if _FIXED_PATTERNS.get(key) is entry:
            del _FIXED_PATTERNS[key]

    weakref.finalize(indices, forget)


def fixed_column_major(x: Tensor) -> ColumnMajorPattern | None:
    """The column-major form of coalesced COO ``x``'s registered pattern (built on first use), or None when its
    entries were not registered with `register_fixed_pattern`."""
    entry = _FIXED_PATTERNS.get(storage_address(x.indices()))
    registered = entry.indices() if entry is not None else None
    if registered is None or entry.shape != tuple(x.shape) or not same_entries(x, registered):
        return None
    if entry.column_major is None:
        entry.column_major = ColumnMajorPattern.of(registered, entry.shape)
    return entry.column_major


def sparse_weight_grad(x: Tensor, grad_out: Tensor) -> Tensor:
    """``(X^T G)^T`` (F_out, F_in), the weight gradient of ``X W^T`` for sparse COO X (N, F_in) and G (N, F_out).
    When X's entries are a registered fixed pattern (a planned product's), ``X^T`` is built from its kept
    column-major order without sorting (about 5x faster on Coauthor CS's quantized GIN aggregate); otherwise
    ``torch.sparse.mm`` sorts ``X^T``. Looked up here, in backward, so a forward without backward builds nothing."""
    column_major = fixed_column_major(x) if x.is_coalesced() else None
    if column_major is not None:
        return (column_major.transpose(x.values()) @ grad_out.contiguous()).t()
    return torch.sparse.mm(x.t(), grad_out).t()


class _SparseValuesMatmul(torch.autograd.Function):
    """``X @ W^T`` for sparse COO X whose stored values need a gradient (a quantized aggregate of sparse inputs).

    Forward: CSR product. Backward: ``dW = (X^T G)^T`` (``X^T`` in CSR from the kept column-major order when X's
    entries are a registered fixed pattern, else sorted each call) and the gradient of the stored values only,
    ``dX[i, k] = G[i] . W[:, k]`` at X's entries (one sampled product, never the dense N x F_in gradient that
    ``torch.sparse.mm``'s backward builds and then masks), returned as a COO tensor with X's entries.
    """

    @staticmethod
    def forward(ctx, x: Tensor, w: Tensor) -> Tensor:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            x = x.detach().coalesce()
            csr = x.to_sparse_csr()  # stored values in the coalesced COO order (row-major)
            ctx.csr, ctx.x = csr, x
            ctx.save_for_backward(w)
            return csr @ w.t()

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (w,) = ctx.saved_tensors
        g = grad_out.contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            values = torch.sparse.sampled_addmm(ctx.csr, g, w, beta=0.0).values()  # (nnz,)
            grad_x = torch.sparse_coo_tensor(ctx.x.indices(), values, ctx.x.shape, is_coalesced=True,
                                             check_invariants=False)
        if ctx.needs_input_grad[1]:
            grad_w = sparse_weight_grad(ctx.x, g)
        return grad_x, grad_w


def sparse_input_matmul(x: Tensor, w: Tensor) -> Tensor:
    """``X W^T`` for sparse COO node features X (N, F_in) and a weight W (F_out, F_in) -> dense (N, F_out).

    The same product ``torch.sparse.mm(x, w.t())`` gives, faster: the forward runs on CSR and the weight gradient
    is one ``X^T @ G`` (the speed against PyG's layers is in ``benchmarks/results/train_speed.json``). When X's
    stored values need a gradient (a quantized aggregate of sparse inputs) it flows to those values only.
    """
    if x.requires_grad:
        return _SparseValuesMatmul.apply(x, w)
    return _SparseInputMatmul.apply(x, w)
