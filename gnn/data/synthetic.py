"""Seeded synthetic graphs for scale work, with class-correlated features and the `GraphData` interface.

- `sbm_graph`: a sparse stochastic block model; ``homophily`` of the edges stay inside their class block.
- `powerlaw_graph`: an R-MAT (Chakrabarti et al., SDM 2004) power-law graph; classes are contiguous id ranges,
  which R-MAT's recursive quadrant choice makes denser inside than across.

Both are vectorised NumPy, deterministic for a seed, and build graphs of 10M+ edges in seconds. Edges are
symmetrised, deduplicated and free of self loops; the returned ``num_edges`` counts directed edges.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data

from gnn.data.loaders import GraphData
from gnn.data.splits import fraction_split


def _finish(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> torch.Tensor:
    """Symmetrise, drop self loops and duplicates. Returns edge_index (2, E) int64 sorted by (src, dst)."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    both = np.concatenate([src * num_nodes + dst, dst * num_nodes + src])  # int64 keys, N^2 < 2^63
    keys = np.unique(both)
    return torch.from_numpy(np.stack([keys // num_nodes, keys % num_nodes]))


def _class_features(y: np.ndarray, num_classes: int, num_features: int, rng: np.random.Generator,
                    signal: float) -> torch.Tensor:
    """Gaussian features whose mean depends on the class: x = signal * mu[y] + N(0, 1). (N, F) float32."""
    centers = rng.standard_normal((num_classes, num_features)).astype(np.float32)
    noise = rng.standard_normal((y.size, num_features), dtype=np.float32)
    return torch.from_numpy(signal * centers[y] + noise)


def _graph_data(name: str, edge_index: torch.Tensor, x: torch.Tensor, y: np.ndarray, num_classes: int,
                seed: int) -> GraphData:
    yt = torch.from_numpy(y).long()
    data = Data(x=x, edge_index=edge_index, y=yt, num_nodes=yt.numel())
    split = fraction_split(yt, 0.6, 0.2, seed=seed)
    return GraphData(name, "node", data, None, [split], x.size(1), num_classes, info={"synthetic": True})


def sbm_graph(num_nodes: int, num_classes: int = 8, avg_degree: float = 10.0, num_features: int = 32,
              homophily: float = 0.8, feature_signal: float = 0.5, seed: int = 0) -> GraphData:
    """Stochastic block model with equal-size blocks (the classes).

    ``num_nodes * avg_degree / 2`` undirected edges are sampled: each picks a uniform source; with probability
    ``homophily`` the target is uniform in the source's block, otherwise uniform in the whole graph.
    """
    if num_nodes < num_classes or num_classes < 1:
        raise ValueError(f"sbm_graph: need num_nodes ({num_nodes}) >= num_classes ({num_classes}) >= 1")
    if not 0.0 <= homophily <= 1.0 or avg_degree <= 0:
        raise ValueError("sbm_graph: homophily must be in [0, 1] and avg_degree > 0")
    rng = np.random.default_rng(seed)
    y = (np.arange(num_nodes, dtype=np.int64) * num_classes) // num_nodes  # (N,) contiguous blocks
    block_start = (np.arange(num_classes, dtype=np.int64) * num_nodes + num_classes - 1) // num_classes
    block_size = np.diff(np.append(block_start, num_nodes))
    m = int(num_nodes * avg_degree / 2)
    src = rng.integers(0, num_nodes, m)
    inside = rng.random(m) < homophily
    c = y[src]
    dst_in = block_start[c] + (rng.random(m) * block_size[c]).astype(np.int64)
    dst_out = rng.integers(0, num_nodes, m)
    dst = np.where(inside, dst_in, dst_out)
    x = _class_features(y, num_classes, num_features, rng, feature_signal)
    return _graph_data(f"sbm-{num_nodes}", _finish(src, dst, num_nodes), x, y, num_classes, seed)


def powerlaw_graph(scale: int, edge_factor: int = 16, num_classes: int = 8, num_features: int = 32,
                   probs: tuple[float, float, float, float] = (0.57, 0.19, 0.19, 0.05),
                   feature_signal: float = 0.5, seed: int = 0) -> GraphData:
    """R-MAT graph with ``2**scale`` nodes and ``edge_factor * 2**scale`` sampled edges (Graph500 defaults).

    Each edge descends ``scale`` levels of the adjacency matrix, choosing a quadrant with ``probs``
    (a, b, c, d); the result has a power-law degree distribution.
    """
    if not 1 <= scale <= 30:
        raise ValueError(f"powerlaw_graph: scale={scale}; need 1..30")
    if abs(sum(probs) - 1.0) > 1e-9 or min(probs) < 0:
        raise ValueError(f"powerlaw_graph: probs {probs} must be non-negative and sum to 1")
    rng = np.random.default_rng(seed)
    num_nodes = 1 << scale
    m = edge_factor * num_nodes
    cum = np.cumsum(probs)
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for _level in range(scale):
        q = np.searchsorted(cum, rng.random(m), side="right")  # quadrant 0..3 per edge
        src = (src << 1) | (q >> 1)
        dst = (dst << 1) | (q & 1)
    perm = rng.permutation(num_nodes)  # hide the id/degree correlation of R-MAT, keep the classes
    y = (np.arange(num_nodes, dtype=np.int64) * num_classes) // num_nodes
    y = y[np.argsort(perm)]
    src, dst = perm[src], perm[dst]
    x = _class_features(y, num_classes, num_features, rng, feature_signal)
    return _graph_data(f"rmat-{scale}", _finish(src, dst, num_nodes), x, y, num_classes, seed)
