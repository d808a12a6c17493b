"""Graph partitioning for full-graph training: node -> part assignment (METIS or random) and each rank's
`Partition` (owned nodes, 1-hop halo, per-peer send/recv maps, local edges, global degrees).

Local node numbering on rank r: owned nodes 0..N_o-1 (ascending global id), then halo nodes N_o..N_o+N_h-1
grouped by owner rank and ascending global id inside a group. The rows owner p sends to r are p's owned nodes
that are sources of edges into r, in ascending global id, so both sides agree on the order without messages.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

METHODS = ("metis", "random")


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


def _check(num_nodes: int, num_parts: int, method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"partition: unknown method {method!r}; valid: {', '.join(METHODS)}")
    if num_parts < 1:
        raise ValueError(f"partition: num_parts={num_parts}; need >= 1")
    if num_parts > num_nodes:
        raise ValueError(f"partition: {num_parts} parts for a graph of {num_nodes} nodes; "
                         f"use at most {num_nodes} parts (one node per part)")


def partition_nodes(edge_index: Tensor, num_nodes: int, num_parts: int, method: str = "metis",
                    seed: int = 0) -> Tensor:
    """Assign every node to a part, balanced on node count. Shapes: (2, E) -> (N,) int64 in [0, num_parts).

    ``metis``: pymetis k-way on the symmetrised graph without self loops; ``random``: a seeded permutation dealt
    round robin (exactly balanced). Every part is non-empty (checked).
    """
    _check(num_nodes, num_parts, method)
    if num_parts == 1:
        return torch.zeros(num_nodes, dtype=torch.long)
    if method == "random":
        g = torch.Generator().manual_seed(seed)
        parts = torch.empty(num_nodes, dtype=torch.long)
        parts[torch.randperm(num_nodes, generator=g)] = torch.arange(num_nodes) % num_parts
        return parts
    import pymetis

    src, dst = edge_index.cpu().numpy()
    keep = src != dst
    src, dst = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
    key = np.unique(src.astype(np.int64) * num_nodes + dst)  # dedupe, sort by (src, dst)
    src, dst = key // num_nodes, key % num_nodes
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.add.at(xadj, src + 1, 1)
    xadj = np.cumsum(xadj)
    opts = pymetis.Options(seed=seed)
    _, membership = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, dst), options=opts)
    parts = torch.as_tensor(np.asarray(membership), dtype=torch.long)
    sizes = torch.bincount(parts, minlength=num_parts)
    if (sizes == 0).any():
        raise RuntimeError(f"partition: METIS left parts empty (sizes {sizes.tolist()}); use method='random' "
                           "or fewer parts")
    return parts


def graph_fingerprint(edge_index: Tensor, num_nodes: int) -> str:
    """A short hash of the graph, stored with cached partitions so that a changed graph is never reused."""
    h = hashlib.sha256(edge_index.cpu().numpy().tobytes())
    h.update(str(num_nodes).encode())
    return h.hexdigest()[:16]


def partition_cache_path(dataset: str, num_parts: int, method: str, seed: int) -> Path:
    from gnn.data.registry import cache_dir

    return cache_dir() / "partitions" / f"{dataset}_p{num_parts}_{method}_s{seed}.pt"


def cached_partition_nodes(dataset: str, edge_index: Tensor, num_nodes: int, num_parts: int,
                           method: str = "metis", seed: int = 0) -> Tensor:
    """`partition_nodes`, cached on disk per (dataset, parts, method, seed) under the dataset cache."""
    _check(num_nodes, num_parts, method)
    path = partition_cache_path(dataset, num_parts, method, seed)
    fp = graph_fingerprint(edge_index, num_nodes)
    if path.exists():
        blob = torch.load(path, weights_only=True)
        if blob.get("fingerprint") == fp:
            return blob["parts"]
    parts = partition_nodes(edge_index, num_nodes, num_parts, method, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{torch.randint(1 << 30, ()).item()}")
    torch.save({"parts": parts, "fingerprint": fp}, tmp)
    tmp.replace(path)  # atomic: concurrent ranks never read a half-written file
    return parts


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


def halo_rows_total(parts: Tensor, edge_index: Tensor) -> int:
    """H: total halo rows over all (owner -> requester) pairs = rows moved per exchanged layer per direction."""
    src, dst = edge_index
    cross = parts[src] != parts[dst]
    return int(torch.unique(torch.stack([parts[dst[cross]], src[cross]]), dim=1).size(1))
