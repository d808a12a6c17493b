"""Graph isomorphism network layer: Xu et al., "How Powerful are Graph Neural Networks?"
(ICLR 2019, https://arxiv.org/abs/1810.00826)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing

from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint


def gin_mlp(in_dim: int, out_dim: int, hidden_dim: int | None = None) -> nn.Sequential:
    """The two-layer MLP of a GIN layer: Linear -> BatchNorm -> ReLU -> Linear."""
    hidden_dim = hidden_dim or out_dim
    return nn.Sequential(Linear(in_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(),
                         Linear(hidden_dim, out_dim))


class GINConv(MessagePassing):
    r"""$x_i' = \mathrm{MLP}\big((1 + \epsilon) x_i + \sum_{j \in N(i)} x_j\big)$.

    Quantization points: ``q_input`` (X, per node, before the sum), ``q_aggregate`` (the summed input of
    the MLP, per node), and the ``q_weight`` of every `Linear` inside ``mlp``.

    Args:
        mlp: the update network (default: `gin_mlp`).
        eps: initial epsilon; ``train_eps`` makes it learnable.

    Shapes:
        x: (N, F_in), edge_index: (2, E) -> (N, F_out).
    """

    def __init__(self, in_dim: int, out_dim: int, mlp: nn.Module | None = None, eps: float = 0.0,
                 train_eps: bool = False) -> None:
        super().__init__(aggr="add")
        self.in_dim, self.out_dim = in_dim, out_dim
        self.mlp = mlp if mlp is not None else gin_mlp(in_dim, out_dim)
        self.initial_eps = eps
        if train_eps:
            self.eps = nn.Parameter(torch.tensor([eps]))
        else:
            self.register_buffer("eps", torch.tensor([eps]))
        self.q_input = QuantPoint("input", "node")
        self.q_aggregate = QuantPoint("aggregate", "node")

    def reset_parameters(self) -> None:
        for m in self.mlp.modules():
            if m is not self.mlp and hasattr(m, "reset_parameters"):
                m.reset_parameters()
        self.eps.data.fill_(self.initial_eps)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = self.q_input(x)  # (N, F_in)
        h = self.propagate(edge_index, x=x) + (1 + self.eps) * x  # (N, F_in)
        return self.mlp(self.q_aggregate(h))  # (N, F_out)

    def message(self, x_j: Tensor) -> Tensor:
        return x_j

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_dim}, {self.out_dim})"
