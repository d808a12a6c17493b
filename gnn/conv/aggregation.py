"""Neighbour aggregation as one sparse-matrix product on large graphs.

Message passing materializes one message row per edge (an E x F tensor, gathered and then scatter-added); on a
graph like Amazon Computers (491,722 edges) that is most of an epoch. ``A @ X`` with ``A`` in CSR computes the
same sum without the E x F intermediate, much faster on CPU (``benchmarks/train_speed.py``: Coauthor CS GCN against
PyG's message-passing GCNConv). The layers use it for aggregations
whose edge weights are constants (GCN's normalisation, SAGE's mean, GIN's sum) on graphs with at least
``SPMM_MIN_EDGES`` edges or when the messages would hold at least ``SPMM_MIN_MESSAGE_ELEMENTS`` values (wide
features on a small graph: a quantized GraphSAGE aggregates Cora's 1433-wide input over 10,556 edges), and keep
PyG's message passing on small inputs (mini-batches of molecules), where building the CSR matrices would cost
more than it saves. Both compute the same sums (up to float summation order).

Each layer makes the choice itself (``if CsrAggregation.applies(...)`` next to its own ``self.propagate(...)``):
PyG generates a layer's ``propagate`` signature from the ``self.propagate(...)`` calls it finds in the layer's
source, so the call cannot move into a shared helper.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

from gnn.conv.quant_point import QuantPoint
from gnn.conv.sparse_product import SparseProductPlan, build_sparse_product_plan
from gnn.ops import csr_adjacency, csr_matmul, same_entries, sparse_add_scaled

SPMM_MIN_EDGES = 50_000
SPMM_MIN_MESSAGE_ELEMENTS = 4_000_000  # E x F


class CsrAggregation:
    """``A @ X`` for the last graph seen, with ``A`` (and ``A^T`` for backward) built once per graph.

    The cache key is the identity of the ``edge_index`` (and weight) tensors: transductive training passes the
    same tensors every epoch; a new tensor rebuilds the matrices.
    """

    def __init__(self, reduce: str) -> None:
        self.reduce = reduce
        self._key: tuple | None = None
        self._mats: tuple[Tensor, Tensor] | None = None
        self._coo_of: Tensor | None = None  # the CSR A whose COO forms ``_coo`` holds
        self._coo: dict[bool, Tensor] = {}  # self_loops -> A or A + I in COO (the sparse-input product)
        self._plans: dict[bool, SparseProductPlan] = {}  # self_loops -> plan of the last repeated X pattern
        self._seen: dict[bool, Tensor] = {}  # self_loops -> indices of the last X pattern, planned if it repeats
        self._unplanned: set[bool] = set()  # self_loops values whose plan would exceed MAX_PLAN_PAIRS

    @staticmethod
    def applies(edge_index: Tensor, x: Tensor) -> bool:
        """Whether to aggregate by sparse-matrix product: dense features and a large graph or wide messages."""
        num_edges = edge_index.size(1)
        large = num_edges >= SPMM_MIN_EDGES or num_edges * x.size(-1) >= SPMM_MIN_MESSAGE_ELEMENTS
        return large and not x.is_sparse

    def __call__(self, edge_index: Tensor, x: Tensor, weight: Tensor | None = None) -> Tensor:
        """Sum (or mean) over in-edges j -> i of ``weight_ji * x_j``. x: (N, F) -> (N, F)."""
        a, a_t = self._matrices(edge_index, weight, x)
        return csr_matmul(a, a_t, x)

    def sparse(self, edge_index: Tensor, x: Tensor, weight: Tensor | None = None, self_loops: bool = False,
               self_scale: Tensor | None = None) -> Tensor:
        """The same aggregation of sparse COO features that need no gradient (raw bag-of-words inputs), kept sparse.
        ``self_loops``: add each node's own row too (``(A + I) @ X``, GIN's sum); ``self_scale`` c (a scalar
        tensor): add ``c X`` as well, differentiable in c (GIN's eps). x: (N, F) COO -> (N, F) coalesced COO
        (Coauthor CS: 6.6% of the 18333 x 6805 neighbour mean is non-zero).

        The first call with a new entry pattern of X runs one sparse-sparse product; when the same pattern comes
        back (dropout changes X's values every step, not its entries) the product is planned once
        (:mod:`gnn.conv.sparse_product`) and each later call is one sparse matrix-vector product.

        The product runs on COO operands: torch 2.13's CPU CSR x CSR product is about 3x faster but leaks memory
        (about 60 MB per call on Coauthor CS, so a training run grows by gigabytes) and returns a row's columns
        unsorted."""
        if x.requires_grad:
            raise ValueError("CsrAggregation.sparse: the features need a gradient; aggregate dense features instead")
        a_coo = self._coo_matrix(edge_index, weight, x, self_loops)
        x = x.coalesce()
        plan = self._plans.get(self_loops)
        if plan is not None and plan.matches(x):
            if self_scale is None or plan.x_positions is not None:
                return plan.product(x, self_scale)
        elif self._seen.get(self_loops) is not None and same_entries(x, self._seen[self_loops]):
            plan = build_sparse_product_plan(a_coo, x)  # None: too many pairs, keep the product below
            if plan is None:
                self._unplanned.add(self_loops)
                del self._seen[self_loops]
            else:
                self._plans[self_loops] = plan
                if self_scale is None or plan.x_positions is not None:
                    return plan.product(x, self_scale)
        if self_loops not in self._unplanned:
            self._seen[self_loops] = x.indices()  # kept alive: an equal address later is the same entries
        out = torch.sparse.mm(a_coo, x).coalesce()
        return out if self_scale is None else sparse_add_scaled(out, x, self_scale)

    def _coo_matrix(self, edge_index: Tensor, weight: Tensor | None, x: Tensor, self_loops: bool) -> Tensor:
        """A (or A + I) in coalesced COO, built once per graph."""
        a, _ = self._matrices(edge_index, weight, x)
        if self._coo_of is not a:  # a new graph: drop the COO forms and product plans of the old one
            self._coo_of, self._coo, self._plans, self._seen, self._unplanned = a, {}, {}, {}, set()
        if self_loops not in self._coo:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
                m = a.to_sparse_coo().coalesce()
            if self_loops:
                n = x.size(0)
                eye = torch.sparse_coo_tensor(torch.arange(n, device=x.device).repeat(2, 1),
                                              torch.ones(n, dtype=x.dtype, device=x.device), (n, n),
                                              check_invariants=False)
                m = (m + eye).coalesce()
            self._coo[self_loops] = m
        return self._coo[self_loops]

    def _matrices(self, edge_index: Tensor, weight: Tensor | None, x: Tensor) -> tuple[Tensor, Tensor]:
        num_nodes = x.size(0)
        shape = (num_nodes, x.dtype, x.device)
        if self._key is None or self._key[0] is not edge_index or self._key[1] is not weight \
                or self._key[2] != shape:
            with torch.no_grad():
                self._mats = csr_adjacency(edge_index, num_nodes, weight, self.reduce, x.dtype)
            self._key = (edge_index, weight, shape)
        return self._mats


class RowMessages:
    """Mixin of the `MessagePassing` layers whose message is the source row itself (GIN's sum, GraphSAGE's mean;
    the layer's ``aggr`` reduces them) and that may project before they aggregate (``projects_first``). The
    layer keeps its own ``self.propagate(...)`` call (see the module docstring)."""

    def accepts_sparse_input(self) -> bool:
        """Sparse input features are never densified when the layer projects first and X is not quantized."""
        return self.projects_first() and QuantPoint.is_identity(self.q_input)

    def message(self, x_j: Tensor) -> Tensor:
        return x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_dim}, {self.out_dim})"
