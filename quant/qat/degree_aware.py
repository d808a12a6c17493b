"""Degree-aware (MEGA, Zhu et al., HPCA 2024, arXiv 2311.09775) parameter sharing: the (step, bits) of a node
is read from a per-layer table indexed by its in-degree bucket, so the learned result is a table
``in-degree bucket -> (bits, step)`` that an accelerator can store instead of per-node parameters. Training uses
A2Q's estimators and memory penalty (the gradient of every node is scatter-added onto its bucket's entry).

MEGA released no code; indexing by in-degree follows A2Q's ``get_scale_index_naive`` (``min(deg, D - 1)``),
which is our ``"linear"`` scheme; ``"log2"`` buckets ``min(floor(log2(deg + 1)), D - 1)`` cover heavy tails.
"""

from __future__ import annotations

import torch
from torch import Tensor


def degree_bucket(in_deg: Tensor, num_buckets: int, scheme: str = "linear") -> Tensor:
    """Bucket of every node. in_deg: (N,) int64 -> (N,) int64 in [0, num_buckets)."""
    if scheme == "linear":
        b = in_deg
    elif scheme == "log2":
        b = torch.floor(torch.log2(in_deg.to(torch.float64) + 1.0)).to(torch.long)
    else:
        raise ValueError(f"degree_bucket: unknown scheme {scheme!r}; valid: linear, log2")
    return b.clamp(min=0, max=num_buckets - 1)


def bucket_degree_ranges(num_buckets: int, scheme: str = "linear") -> list[tuple[int, int | None]]:
    """Inclusive in-degree range (min, max) of each bucket; max None = unbounded (the last bucket)."""
    out = []
    for k in range(num_buckets):
        lo, hi = (k, k) if scheme == "linear" else (2**k - 1, 2 ** (k + 1) - 2)
        out.append((lo, None if k == num_buckets - 1 else hi))
    return out
