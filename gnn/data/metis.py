"""METIS k-way partitioning of a graph given as numpy arrays (no torch): the part of each node.

``gnn.data.partition.partition_nodes`` (torch tensors, distributed training) and ``hw.workload.metis_order``
(numpy, the accelerator model's node order) both call :func:`metis_parts`.
"""

from __future__ import annotations

import numpy as np


def metis_parts(edge_index: np.ndarray, num_nodes: int, num_parts: int, seed: int = 0) -> np.ndarray:
    """pymetis k-way on the symmetrised graph without self loops: (2, E) -> (N,) int64 part ids in [0, num_parts).
    RuntimeError when METIS leaves a part empty."""
    import pymetis

    src, dst = np.asarray(edge_index)
    keep = src != dst
    src, dst = np.concatenate([src[keep], dst[keep]]), np.concatenate([dst[keep], src[keep]])
    key = np.unique(src.astype(np.int64) * num_nodes + dst)  # dedupe, sort by (src, dst)
    src, dst = key // num_nodes, key % num_nodes
    xadj = np.zeros(num_nodes + 1, dtype=np.int64)
    np.add.at(xadj, src + 1, 1)
    xadj = np.cumsum(xadj)
    _, membership = pymetis.part_graph(num_parts, pymetis.CSRAdjacency(xadj, dst),
                                       options=pymetis.Options(seed=seed))
    parts = np.asarray(membership, dtype=np.int64)
    sizes = np.bincount(parts, minlength=num_parts)
    if (sizes == 0).any():
        raise RuntimeError(f"partition: METIS left parts empty (sizes {sizes.tolist()}); use method='random' "
                           "or fewer parts")
    return parts
