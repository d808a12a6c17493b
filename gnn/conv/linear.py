"""A linear map ``y = x W^T + b`` whose weight passes through a quantization point."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from gnn.conv.quant_point import QuantPoint
from gnn.ops import sparse_input_matmul


class Linear(nn.Module):
    """Like `torch.nn.Linear`, with ``q_weight`` (per-output-channel rows) applied to the weight.

    Args:
        in_dim: input width F_in.
        out_dim: output width F_out.
        bias: add a learnable bias (default: True).

    Shapes:
        x: (*, F_in) -> (*, F_out); weight: (F_out, F_in).
    """

    def __init__(self, in_dim: int, out_dim: int, bias: bool = True) -> None:
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.weight = nn.Parameter(torch.empty(out_dim, in_dim))
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.q_weight = QuantPoint("weight", "weight")
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Glorot, as PyG's layers use; the bias starts at zero.
        bound = math.sqrt(6.0 / (self.in_dim + self.out_dim))
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: Tensor) -> Tensor:
        w = self.q_weight(self.weight)
        if x.is_sparse:  # sparse bag-of-words inputs (e.g. Coauthor CS, 0.9% dense): never densified
            out = sparse_input_matmul(x, w)
            return out if self.bias is None else out + self.bias
        return F.linear(x, w, self.bias)

    def project(self, x: Tensor) -> Tensor:
        """``x W^T`` without the bias (dense or sparse ``x``): for layers that aggregate after projecting."""
        w = self.q_weight(self.weight)
        return sparse_input_matmul(x, w) if x.is_sparse else F.linear(x, w)

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, bias={self.bias is not None}"
