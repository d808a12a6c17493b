"""Graph attention layer: Velickovic et al., "Graph Attention Networks" (ICLR 2018,
https://arxiv.org/abs/1710.10903)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import softmax

from gnn.conv.attention_aggregation import AttentionAggregation
from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint
from gnn.ops import add_self_loops, remove_self_loops


class GATConv(MessagePassing):
    r"""$x_i' = \Vert_{h} \sum_{j \in N(i) \cup \{i\}} \alpha^h_{ij} W^h x_j$, with
    $\alpha^h_{ij} = \mathrm{softmax}_j\big(\mathrm{LeakyReLU}(a_s^h \cdot W^h x_j + a_d^h \cdot W^h x_i)\big)$.

    Quantization points: ``q_input`` (X, per node), ``lin.q_weight`` (per output channel), ``q_xw``
    (WX, per node), ``q_att`` (the attention vectors a_s and a_d), ``q_score`` (edge scores before the
    LeakyReLU, per edge and head), ``q_aggregate`` (output before the bias, per node).

    Args:
        in_dim: input width F_in.
        out_dim: width per head C.
        heads: number of heads H.
        concat: concatenate heads (output H*C) or average them (output C).
        negative_slope: LeakyReLU slope (default 0.2).
        dropout: dropout on the attention coefficients during training.

    Shapes:
        x: (N, F_in), edge_index: (2, E) -> (N, H*C) or (N, C).
    """

    def __init__(self, in_dim: int, out_dim: int, heads: int = 1, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, bias: bool = True) -> None:
        super().__init__(aggr="add", node_dim=0)
        self.in_dim, self.out_dim, self.heads, self.concat = in_dim, out_dim, heads, concat
        self.negative_slope, self.dropout = negative_slope, dropout
        self.lin = Linear(in_dim, heads * out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, heads, out_dim))
        self.att_dst = nn.Parameter(torch.empty(1, heads, out_dim))
        width = heads * out_dim if concat else out_dim
        self.bias = nn.Parameter(torch.zeros(width)) if bias else None
        self.q_input = QuantPoint("input", "node")
        self.q_xw = QuantPoint("xw", "node")
        self.q_att = QuantPoint("attention", "vector")
        self.q_score = QuantPoint("score", "edge")
        self.q_aggregate = QuantPoint("aggregate", "node")
        self._attention_spmm = AttentionAggregation()
        self._loops_cache: tuple[Tensor, int, Tensor] | None = None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        self.lin.reset_parameters()
        for att in (self.att_src, self.att_dst):
            bound = math.sqrt(6.0 / (att.size(-2) + att.size(-1)))
            nn.init.uniform_(att, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def accepts_sparse_input(self) -> bool:
        """The layer projects before it aggregates, so sparse input features are never densified (unless a
        quantizer on X needs dense rows)."""
        return QuantPoint.is_identity(self.q_input)

    def edges_with_self_loops(self, edge_index: Tensor, num_nodes: int) -> Tensor:
        """``edge_index`` without its self-loops plus one self-loop per node, kept while the same tensor is
        passed again (transductive training), so the sparse-product layout is built once."""
        cache = self._loops_cache
        if cache is not None and cache[0] is edge_index and cache[1] == num_nodes:
            return cache[2]
        looped = add_self_loops(remove_self_loops(edge_index), num_nodes)
        self._loops_cache = (edge_index, num_nodes, looped)
        return looped

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        num_nodes, H, C = x.size(0), self.heads, self.out_dim
        edge_index = self.edges_with_self_loops(edge_index, num_nodes)
        xw = self.q_xw(self.lin(self.q_input(x))).view(num_nodes, H, C)  # (N, H, C)
        a_src = (xw * self.q_att(self.att_src)).sum(-1)  # (N, H)
        a_dst = (xw * self.q_att(self.att_dst)).sum(-1)  # (N, H)
        src, dst = edge_index
        score = self.q_score(a_src.index_select(0, src) + a_dst.index_select(0, dst))  # (E, H)
        alpha = softmax(F.leaky_relu(score, self.negative_slope), dst, num_nodes=num_nodes)  # (E, H)
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        if AttentionAggregation.applies(edge_index):
            out = self._attention_spmm(edge_index, alpha, xw)  # (N, H*C), large graphs: one sparse product
        else:
            # Messages travel flattened as (E, H*C): 2-D scatters are much faster than 3-D ones on CPU.
            out = self.propagate(edge_index, x=xw.reshape(num_nodes, H * C), alpha=alpha)  # (N, H*C)
        out = out if self.concat else out.view(num_nodes, H, C).mean(dim=1)
        out = self.q_aggregate(out)
        return out if self.bias is None else out + self.bias

    def message(self, x_j: Tensor, alpha: Tensor) -> Tensor:
        H, C = self.heads, self.out_dim
        return (alpha.unsqueeze(-1) * x_j.view(-1, H, C)).view(-1, H * C)  # (E, H*C)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.in_dim}, {self.out_dim}, heads={self.heads})"
