"""Graph convolution of Kipf & Welling, "Semi-Supervised Classification with Graph Convolutional Networks"
(ICLR 2017, https://arxiv.org/abs/1609.02907)."""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing

from gnn.conv.aggregation import CsrAggregation
from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint
from gnn.ops import gcn_norm


class GCNConv(MessagePassing):
    r"""$X' = \hat D^{-1/2} \hat A \hat D^{-1/2} X W + b$ with $\hat A = A + I$.

    Quantization points, in datapath order: ``q_input`` (X, per node), ``lin.q_weight`` (W, per output
    channel), ``q_xw`` (XW, per node, before aggregation), ``q_aggregate`` (aggregation output, per node).

    Args:
        in_dim: input width F_in.
        out_dim: output width F_out.
        cached: keep the normalised edge list of the first graph seen and reuse it while the same
            ``edge_index`` tensor is passed (transductive training; default: True).
        bias: add a learnable bias (default: True).

    Shapes:
        x: (N, F_in), edge_index: (2, E) -> (N, F_out).
    """

    def __init__(self, in_dim: int, out_dim: int, cached: bool = True, bias: bool = True) -> None:
        super().__init__(aggr="add")
        self.in_dim, self.out_dim, self.cached = in_dim, out_dim, cached
        self.lin = Linear(in_dim, out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_dim)) if bias else None
        self.q_input = QuantPoint("input", "node")
        self.q_xw = QuantPoint("xw", "node")
        self.q_aggregate = QuantPoint("aggregate", "node")
        self._cache: tuple[Tensor, int, Tensor, Tensor] | None = None
        self._csr = CsrAggregation("sum")

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        self._cache = None

    def normalized_edges(self, edge_index: Tensor, num_nodes: int, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        if self.cached and self._cache is not None:
            key, n, ei, w = self._cache
            if key is edge_index and n == num_nodes and w.dtype == dtype:
                return ei, w
        ei, w = gcn_norm(edge_index, num_nodes, dtype=dtype)
        if self.cached:
            self._cache = (edge_index, num_nodes, ei, w)
        return ei, w

    def accepts_sparse_input(self) -> bool:
        """The layer projects before it aggregates, so sparse input features are never densified (unless a
        quantizer on X needs dense rows)."""
        return QuantPoint.is_identity(self.q_input)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        num_nodes = x.size(0)
        ei, w = self.normalized_edges(edge_index, num_nodes, x.dtype)
        xw = self.q_xw(self.lin(self.q_input(x)))  # (N, F_out)
        if CsrAggregation.applies(ei, xw):
            agg = self._csr(ei, xw, w)  # (N, F_out), large graphs: one sparse-matrix product
        else:
            agg = self.propagate(ei, x=xw, edge_weight=w)  # (N, F_out)
        out = self.q_aggregate(agg)
        return out if self.bias is None else out + self.bias

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j  # (E, F_out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_dim}, {self.out_dim})"
