"""Graph partitioning: node -> part assignment (METIS or random), its on-disk cache, and the cut volume.

A property of the graph alone, used by distributed training (`distributed.partition` builds each rank's shard
from it) and by the accelerator model (`hw.workload` orders nodes by METIS part).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch
from torch import Tensor

from gnn.data.metis import metis_parts

METHODS = ("metis", "random")


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
    return torch.as_tensor(metis_parts(edge_index.cpu().numpy(), num_nodes, num_parts, seed), dtype=torch.long)


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


def halo_rows_total(parts: Tensor, edge_index: Tensor) -> int:
    """H: the partition's communication volume, i.e. distinct (requester part, remote source node) pairs over all
    cut edges = halo rows moved per exchanged layer per direction in full-graph distributed training."""
    src, dst = edge_index
    cross = parts[src] != parts[dst]
    return int(torch.unique(torch.stack([parts[dst[cross]], src[cross]]), dim=1).size(1))
