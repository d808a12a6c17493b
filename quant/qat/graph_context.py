"""`GraphContext`: what the quantizers of one model need to know about the graph of the current forward call.

`quant.qat.api.quantize_` creates one context per model and a forward pre-hook that refreshes it at every call with
the ``edge_index`` / node count / ``batch`` the model receives, so quantizers see in-degrees (degree-aware tables,
NNS degree mode, Degree-Quant masks) without any change to the layer code. For a node task the graph is fixed
and the in-degrees are computed once.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnn.ops import in_degree


class GraphContext:
    """Mutable per-model state: ``in_deg`` (N,) int64, ``batch`` (N,) or None, ``dq_mask`` (N,) bool or None."""

    def __init__(self, num_nodes: int | None = None, edge_index: Tensor | None = None) -> None:
        self.fixed_num_nodes = num_nodes  # set for node tasks (transductive parameters)
        self.num_nodes: int | None = num_nodes
        self.in_deg: Tensor | None = None
        self.batch: Tensor | None = None
        self.dq_mask: Tensor | None = None
        self._fixed_key: Tensor | None = None
        if num_nodes is not None and edge_index is not None:
            self.in_deg = in_degree(edge_index, num_nodes)
            self._fixed_key = edge_index

    def update(self, x: Tensor, edge_index: Tensor, batch: Tensor | None) -> None:
        """Called by the model's forward pre-hook. x: (N, F), edge_index: (2, E), batch: (N,) or None."""
        n = x.size(0)
        self.num_nodes, self.batch = n, batch
        if edge_index is self._fixed_key and self.in_deg is not None:
            return  # the fixed graph of a node task: in-degrees computed once
        self.in_deg = in_degree(edge_index, n)

    def require_in_deg(self, rows: int, who: str) -> Tensor:
        if self.in_deg is None or self.in_deg.numel() != rows:
            have = None if self.in_deg is None else self.in_deg.numel()
            raise RuntimeError(f"{who}: needs the in-degree of the {rows} rows it quantizes, but the model's last "
                               f"forward call saw {have} nodes; call the quantized model as model(x, edge_index, "
                               f"batch) so the quant pre-hook can capture the graph")
        return self.in_deg


def torch_bool_mask(p: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Bernoulli(p) draw as a bool tensor (True = protected, kept in full precision)."""
    return torch.bernoulli(p, generator=generator).bool()
