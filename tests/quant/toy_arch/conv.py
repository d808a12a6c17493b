"""The FP32 side of the toy architecture: its layer and how ``gnn.models.GNN`` builds it."""

from __future__ import annotations

from torch import Tensor, nn

from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint
from gnn.models import ConvSpec


class ToyConv(nn.Module):
    """``X' = q_input(X) W^T + b`` per node; ``edge_index`` is accepted and ignored. Shapes: (N, F_in) -> (N, F_out)."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.q_input = QuantPoint("input", "node")
        self.lin = Linear(in_dim, out_dim, bias=True)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.lin(self.q_input(x))


CONV = ConvSpec(name="toy", layer=ToyConv, build=lambda cfg, in_dim, out_dim, is_last: ToyConv(in_dim, out_dim))
