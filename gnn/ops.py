"""Pure graph kernels shared by the layers, the quantizers and the accelerator model."""

from __future__ import annotations

import torch
from torch import Tensor


def add_self_loops(edge_index: Tensor, num_nodes: int) -> Tensor:
    """Append one self loop per node. edge_index: (2, E) -> (2, E + N), loops last."""
    loops = torch.arange(num_nodes, device=edge_index.device).repeat(2, 1)
    return torch.cat([edge_index, loops], dim=1)


def remove_self_loops(edge_index: Tensor) -> Tensor:
    """Drop edges i -> i. edge_index: (2, E) -> (2, E')."""
    return edge_index[:, edge_index[0] != edge_index[1]]


def in_degree(edge_index: Tensor, num_nodes: int) -> Tensor:
    """In-degree of every node (edges point source -> target = edge_index[0] -> edge_index[1]). (N,) int64."""
    return torch.bincount(edge_index[1], minlength=num_nodes)


def gcn_norm(edge_index: Tensor, num_nodes: int, dtype: torch.dtype = torch.float32) -> tuple[Tensor, Tensor]:
    """Symmetric GCN normalisation with self loops (Kipf & Welling 2017, Eq. 2).

    Returns the edge list with self loops appended and the weight of each edge,
    ``w_ji = 1 / sqrt(deg(j) deg(i))`` with ``deg`` counting the self loop.
    Existing self loops are replaced by exactly one loop per node.

    Shapes: edge_index (2, E) -> ((2, E' + N), (E' + N,)).
    """
    edge_index = add_self_loops(remove_self_loops(edge_index), num_nodes)
    deg = in_degree(edge_index, num_nodes).to(dtype)  # (N,), >= 1 thanks to the loops
    deg_inv_sqrt = deg.rsqrt()
    src, dst = edge_index
    return edge_index, deg_inv_sqrt[src] * deg_inv_sqrt[dst]
