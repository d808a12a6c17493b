"""GraphSAGE with mean aggregation: Hamilton et al., "Inductive Representation Learning on Large Graphs"
(NeurIPS 2017, https://arxiv.org/abs/1706.02216)."""

from __future__ import annotations

from torch import Tensor
from torch_geometric.nn import MessagePassing

from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint


class SAGEConv(MessagePassing):
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

    def reset_parameters(self) -> None:
        self.lin_neigh.reset_parameters()
        self.lin_root.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = self.q_input(x)  # (N, F_in)
        agg = self.q_aggregate(self.propagate(edge_index, x=x))  # (N, F_in)
        return self.lin_neigh(agg) + self.lin_root(x)  # (N, F_out)

    def message(self, x_j: Tensor) -> Tensor:
        return x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_dim}, {self.out_dim})"
