"""Each rank's `Partition` for full-graph training (owned nodes, 1-hop halo, per-peer send/recv maps, local
edges, global degrees), built from a node -> part assignment of `gnn.data.partition` (METIS or random).

Local node numbering on rank r: owned nodes 0..N_o-1 (ascending global id), then halo nodes N_o..N_o+N_h-1
grouped by owner rank and ascending global id inside a group. The rows owner p sends to r are p's owned nodes
that are sources of edges into r, in ascending global id, so both sides agree on the order without messages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

# re-export; hw switches to gnn.data.partition (hw/workload.py imports partition_nodes from here until then)
from gnn.data.partition import (  # noqa: F401
    METHODS,
    cached_partition_nodes,
    graph_fingerprint,
    halo_rows_total,
    partition_cache_path,
    partition_nodes,
)


@dataclass(frozen=True, kw_only=True)
class Partition:
    """One rank's view of a partitioned graph.

    Attributes:
        rank, num_parts: this part and the number of parts.
        owned: (N_o,) global ids of owned nodes, ascending.
        halo: (N_h,) global ids of halo nodes (remote sources of edges into owned nodes), grouped by owner.
        recv_counts: halo rows received from each peer (list of length num_parts; 0 for self).
        send_index: per peer, (S_p,) local indices of owned rows that peer needs (empty for self).
        edge_index: (2, E_r) local edges (src in owned+halo, dst in owned): every in-edge of every owned node.
        degree: (N_o + N_h,) global in-degree (self loops removed) of owned and halo nodes.
    """

    rank: int
    num_parts: int
    owned: Tensor
    halo: Tensor
    recv_counts: list[int]
    send_index: list[Tensor]
    edge_index: Tensor
    degree: Tensor

    @property
    def num_owned(self) -> int:
        return int(self.owned.numel())

    @property
    def num_halo(self) -> int:
        return int(self.halo.numel())

    @property
    def send_counts(self) -> list[int]:
        return [int(s.numel()) for s in self.send_index]

    def to(self, device: torch.device | str) -> Partition:
        """This partition with every index tensor on ``device`` (the GPU of an NCCL rank)."""
        return replace(self, owned=self.owned.to(device), halo=self.halo.to(device),
                       send_index=[s.to(device) for s in self.send_index], edge_index=self.edge_index.to(device),
                       degree=self.degree.to(device))


def build_partition(edge_index: Tensor, parts: Tensor, rank: int) -> Partition:
    """Rank ``rank``'s `Partition` from the global graph and the node -> part assignment.

    Shapes: edge_index (2, E) global, parts (N,) -> Partition (see the class).
    """
    num_nodes = parts.numel()
    num_parts = int(parts.max()) + 1
    if not 0 <= rank < num_parts:
        raise ValueError(f"build_partition: rank {rank} outside [0, {num_parts})")
    ei = edge_index[:, edge_index[0] != edge_index[1]]  # self loops are re-added by the layers that want them
    degree = torch.bincount(ei[1], minlength=num_nodes)  # (N,)
    src, dst = ei
    cross = parts[src] != parts[dst]
    # (owner p, requester q, node) triples: node owned by p is a source of an edge into q's nodes.
    trip = torch.unique(torch.stack([parts[src[cross]], parts[dst[cross]], src[cross]]), dim=1)  # sorted lexically
    owned = torch.nonzero(parts == rank).flatten()  # ascending global ids
    recv = trip[:, trip[1] == rank]  # sorted by (owner, node)
    halo = recv[2]
    recv_counts = torch.bincount(recv[0], minlength=num_parts).tolist()
    local = torch.full((num_nodes,), -1, dtype=torch.long)
    local[owned] = torch.arange(owned.numel())
    local[halo] = owned.numel() + torch.arange(halo.numel())
    send_index = []
    for peer in range(num_parts):
        rows = trip[2, (trip[0] == rank) & (trip[1] == peer)]  # ascending global ids
        send_index.append(local[rows])
    mine = parts[dst] == rank
    local_ei = local[ei[:, mine]]  # (2, E_r)
    return Partition(rank=rank, num_parts=num_parts, owned=owned, halo=halo, recv_counts=recv_counts,
                     send_index=send_index, edge_index=local_ei, degree=degree[torch.cat([owned, halo])])

