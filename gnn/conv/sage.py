"""GraphSAGE with mean aggregation: Hamilton et al., "Inductive Representation Learning on Large Graphs"
(NeurIPS 2017, https://arxiv.org/abs/1706.02216)."""

from __future__ import annotations

from torch import Tensor
from torch_geometric.nn import MessagePassing

from gnn.conv.aggregation import CsrAggregation, RowMessages
from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint


class SAGEConv(RowMessages, MessagePassing):
    r"""$x_i' = W_1 \cdot \mathrm{mean}_{j \in N(i)} x_j + W_2 x_i + b$.

    Quantization points: ``q_input`` (X, per node), ``q_aggregate`` (neighbour mean, per node),
    ``lin_neigh.q_weight`` and ``lin_root.q_weight`` (per output channel).

    Shapes:
        x: (N, F_in), edge_index: (2, E) -> (N, F_out).
    """

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True) -> None:
        super().__init__(aggr="mean")
        self.in_dim, self.out_dim = in_dim, out_dim
        self.lin_neigh = Linear(in_dim, out_dim, bias=bias)
        self.lin_root = Linear(in_dim, out_dim, bias=False)
        self.q_input = QuantPoint("input", "node")
        self.q_aggregate = QuantPoint("aggregate", "node")
        self._csr = CsrAggregation("mean")

    def reset_parameters(self) -> None:
        self.lin_neigh.reset_parameters()
        self.lin_root.reset_parameters()

    def projects_first(self) -> bool:
        """Whether the layer projects before it aggregates: ``mean_j(x_j) W = mean_j(x_j W)``, so when
        F_out < F_in the messages are F_out wide instead of F_in wide (DGL's SAGEConv does the same). Only
        while the aggregate is not quantized: a quantizer there needs the F_in-wide mean itself."""
        return self.out_dim < self.in_dim and QuantPoint.is_identity(self.q_aggregate)

    def aggregates_sparse_input(self) -> bool:
        """Sparse input features stay sparse through a quantized neighbour mean when X itself is not quantized and
        the aggregate's quantizer rounds stored values only (``takes_sparse_rows``: zeros stay zero), so the
        F_in-wide aggregate is never densified (Coauthor CS: 6.6% of it is non-zero)."""
        return (QuantPoint.is_identity(self.q_input) and not self.projects_first()
                and getattr(self.q_aggregate, "takes_sparse_rows", False))

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = self.q_input(x)  # (N, F_in), dense or sparse COO
        if self.projects_first():
            neigh = self._mean(edge_index, self.lin_neigh.project(x))  # (N, F_out)
            if self.lin_neigh.bias is not None:  # after the mean, so nodes without neighbours get the bias too
                neigh = neigh + self.lin_neigh.bias
            return neigh + self.lin_root(x)  # (N, F_out)
        agg = self.q_aggregate(self._mean(edge_index, x))  # (N, F_in)
        return self.lin_neigh(agg) + self.lin_root(x)  # (N, F_out)

    def _mean(self, edge_index: Tensor, x: Tensor) -> Tensor:
        """Mean of the in-neighbours' rows (0 without in-edges). x: (N, F) -> (N, F), sparse COO stays sparse."""
        if x.is_sparse:
            return self._csr.sparse(edge_index, x)
        if CsrAggregation.applies(edge_index, x):
            return self._csr(edge_index, x)
        return self.propagate(edge_index, x=x)
