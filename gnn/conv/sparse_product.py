"""``A @ X`` for a fixed sparse ``A`` and sparse ``X`` whose stored values change but whose entries do not.

A quantized GraphSAGE or GIN aggregates its sparse bag-of-words input every step (``CsrAggregation.sparse``);
dropout changes X's stored values, never its entries. The product's entries are then fixed, and each of its stored
values is a fixed linear combination of X's stored values:

    out_values = M @ x_values,   M[k, e] = sum of A[i, j] over the pairs (A[i, j], X[j, c] = entry e) with k = (i, c)

``M`` (nnz_out x nnz_x, one stored value per pair) is built once; a step is then one sparse matrix-vector product
instead of a sparse-sparse product that recomputes the output pattern (Coauthor CS: 15.6M pairs, 8.2M output
entries; about 4x faster on one core, ``benchmarks/quant_speed.py``).

The plan registers its output pattern with ``gnn.ops.register_fixed_pattern``: the layer that multiplies the
(quantized) product by a weight then takes its weight gradient ``X^T G`` from that pattern's column-major order,
kept once, instead of sorting ``X^T`` every step.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import Tensor

from gnn.ops import register_fixed_pattern, same_entries, sparse_from_values


@dataclass(frozen=True)
class SparseProductPlan:
    """The fixed part of ``A @ X`` for one sparse ``A`` and one entry pattern of ``X``.

    Attributes:
        x_indices: (2, nnz_x) X's entries the plan was built for (a reference: the plan is valid for exactly these).
        x_shape: (N, F) of X.
        indices: (2, nnz_out) the product's entries, row-major sorted and unique (a coalesced COO pattern).
        shape: (N, F) of the product.
        value_map: CSR (nnz_out, nnz_x), ``M`` above.
        x_positions: (nnz_x,) where each entry of X sits among the product's entries, or None when some entry of X
            is not an entry of the product (then ``add_scaled_x`` needs a union and is not offered).
    """

    x_indices: Tensor
    x_shape: tuple[int, int]
    indices: Tensor
    shape: tuple[int, int]
    value_map: Tensor
    x_positions: Tensor | None

    def matches(self, x: Tensor) -> bool:
        """Whether ``x`` (coalesced COO) has exactly the entries this plan was built for: the same index storage
        (the plan keeps it alive, so an equal address is the same memory, never reused) and the same shape."""
        return (tuple(x.shape) == self.x_shape and same_entries(x, self.x_indices) and x.dtype == self.value_map.dtype
                and x.device == self.value_map.device)

    def product(self, x: Tensor, self_scale: Tensor | None = None) -> Tensor:
        """``A @ X`` as a coalesced COO tensor with the plan's entries (``x`` coalesced COO with the plan's entries,
        needing no gradient); with ``self_scale`` c (scalar tensor) ``A @ X + c X``, differentiable in c."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
            values = (self.value_map @ x.values().unsqueeze(1)).squeeze(1)  # (nnz_out,)
        if self_scale is None:
            return torch.sparse_coo_tensor(self.indices, values, self.shape, is_coalesced=True,
                                           check_invariants=False)
        if self.x_positions is None:
            raise ValueError("SparseProductPlan: X has entries outside A @ X; add c X with gnn.ops.sparse_add_scaled")
        values = values.index_add(0, self.x_positions, self_scale.reshape(()) * x.values())
        return sparse_from_values(self.indices, values, self.shape)


MAX_PLAN_PAIRS = 100_000_000  # about 1.2 GB of plan, 5 GB while building it; larger products stay unplanned


def count_pairs(a: Tensor, x: Tensor) -> int:
    """Pairs (stored ``A[i, j]``, stored entry of X's row j) of ``A @ X``: the plan's size. Coalesced COO inputs."""
    x_row_nnz = torch.bincount(x.indices()[0], minlength=x.size(0))
    return int(x_row_nnz[a.indices()[1]].sum())


def build_sparse_product_plan(a: Tensor, x: Tensor, max_pairs: int | None = None) -> SparseProductPlan | None:
    """The plan of ``A @ X`` for coalesced COO ``a`` (N, N) and ``x`` (N, F) (x's values are not used), or None when
    it would hold more than ``max_pairs`` pairs (default ``MAX_PLAN_PAIRS``; the caller keeps the sparse-sparse
    product).

    Pairs: every stored ``A[i, j]`` with every stored entry of X's row j; pair p lands on output entry (i, c).
    Memory: ``value_map`` holds one index and one value per pair (Coauthor CS: 15.6M pairs, about 190 MB), and the
    build briefly needs about six int64 words per pair."""
    a, x = a.coalesce(), x.coalesce()
    if count_pairs(a, x) > (MAX_PLAN_PAIRS if max_pairs is None else max_pairs):
        return None
    n, f = x.shape
    a_rows, a_cols = a.indices()
    x_idx = x.indices()
    x_rows, x_cols = x_idx
    x_row_nnz = torch.bincount(x_rows, minlength=n)  # (N,)
    x_row_start = x_row_nnz.cumsum(0) - x_row_nnz  # (N,) first entry of each row (row-major order)
    pairs_per_edge = x_row_nnz[a_cols]  # (nnz_a,)
    edge = torch.repeat_interleave(torch.arange(a_cols.numel(), device=a.device), pairs_per_edge)  # (P,)
    first_pair = pairs_per_edge.cumsum(0) - pairs_per_edge
    x_entry = x_row_start[a_cols][edge] + torch.arange(edge.numel(), device=a.device) - first_pair[edge]  # (P,)
    keys, out_of_pair = torch.unique(a_rows[edge] * f + x_cols[x_entry], sorted=True, return_inverse=True)
    order = torch.argsort(out_of_pair, stable=True)  # pairs grouped by output entry -> CSR rows of M
    crow = torch.zeros(keys.numel() + 1, dtype=torch.long, device=a.device)
    crow[1:] = torch.bincount(out_of_pair, minlength=keys.numel()).cumsum(0)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
        value_map = torch.sparse_csr_tensor(crow, x_entry[order], a.values()[edge[order]].to(x.dtype),
                                            (keys.numel(), x_idx.size(1)), check_invariants=False)
    x_keys = x_rows * f + x_cols
    pos = torch.searchsorted(keys, x_keys).clamp_max(max(keys.numel() - 1, 0))
    x_positions = pos if keys.numel() and bool((keys[pos] == x_keys).all()) else None
    indices = torch.stack([keys // f, keys % f])
    register_fixed_pattern(indices, (a.size(0), f))  # every product has these entries: X^T's order can be kept
    return SparseProductPlan(x_indices=x_idx, x_shape=(n, f), indices=indices, shape=(a.size(0), f),
                             value_map=value_map, x_positions=x_positions)
