"""Graph isomorphism network layer: Xu et al., "How Powerful are Graph Neural Networks?"
(ICLR 2019, https://arxiv.org/abs/1810.00826)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing

from gnn.conv.aggregation import CsrAggregation, RowMessages
from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint


def gin_mlp(in_dim: int, out_dim: int, hidden_dim: int | None = None) -> nn.Sequential:
    """The two-layer MLP of a GIN layer: Linear -> BatchNorm -> ReLU -> QuantPoint -> Linear.

    The ``QuantPoint("hidden", "node")`` (identity until a quantizer replaces it) is the input of the second linear
    map, which A2Q's code quantizes per node (``QuantConfig.quantize_mlp_hidden``)."""
    hidden_dim = hidden_dim or out_dim
    return nn.Sequential(Linear(in_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(),
                         QuantPoint("hidden", "node"), Linear(hidden_dim, out_dim))


class GINConv(RowMessages, MessagePassing):
    r"""$x_i' = \mathrm{MLP}\big((1 + \epsilon) x_i + \sum_{j \in N(i)} x_j\big)$.

    Quantization points: ``q_input`` (X, per node, before the sum), ``q_aggregate`` (the summed input of
    the MLP, per node), the ``q_weight`` of every `Linear` inside ``mlp`` and, in `gin_mlp`, the hidden activation
    before its second linear map.

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
        self._csr = CsrAggregation("sum")

    def reset_parameters(self) -> None:
        for m in self.mlp.modules():
            if m is not self.mlp and hasattr(m, "reset_parameters"):
                m.reset_parameters()
        self.eps.data.fill_(self.initial_eps)

    def projects_first(self) -> bool:
        """Whether the layer applies the MLP's first linear map before it aggregates:
        ``((1 + eps) x_i + sum_j x_j) W = (1 + eps) x_i W + sum_j x_j W``, so when that map narrows the
        features the messages are narrower. Only with an `nn.Sequential` MLP that starts with our `Linear`,
        and while the aggregate is not quantized (a quantizer there needs the F_in-wide sum itself)."""
        first = self.mlp[0] if isinstance(self.mlp, nn.Sequential) and len(self.mlp) > 0 else None
        return (isinstance(first, Linear) and first.out_dim < first.in_dim
                and QuantPoint.is_identity(self.q_aggregate))

    def aggregates_sparse_input(self) -> bool:
        """Sparse input features stay sparse through a quantized sum when X itself is not quantized, the MLP starts
        with our `Linear` (it takes sparse rows) and the aggregate's quantizer rounds stored values only
        (``takes_sparse_rows``), so the F_in-wide ``(1 + eps) x_i + sum_j x_j`` is never densified."""
        first = self.mlp[0] if isinstance(self.mlp, nn.Sequential) and len(self.mlp) > 0 else None
        return (QuantPoint.is_identity(self.q_input) and not self.projects_first() and isinstance(first, Linear)
                and getattr(self.q_aggregate, "takes_sparse_rows", False))

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        x = self.q_input(x)  # (N, F_in), dense or sparse COO
        if self.projects_first():
            first = self.mlp[0]
            xw = first.project(x)  # (N, H)
            h = self._sum(edge_index, xw) + (1 + self.eps) * xw
            if first.bias is not None:
                h = h + first.bias
            return self.mlp[1:](h)  # (N, F_out)
        if x.is_sparse:  # (A + I) x + eps x, sparse COO (N, F_in), differentiable in eps
            h = self._csr.sparse(edge_index, x, self_loops=True, self_scale=self.eps)
        else:
            h = self._sum(edge_index, x) + (1 + self.eps) * x  # (N, F_in)
        return self.mlp(self.q_aggregate(h))  # (N, F_out)

    def _sum(self, edge_index: Tensor, x: Tensor) -> Tensor:
        """Sum of the in-neighbours' rows. x: (N, F) -> (N, F)."""
        if CsrAggregation.applies(edge_index, x):
            return self._csr(edge_index, x)
        return self.propagate(edge_index, x=x)
