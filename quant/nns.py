"""A2Q's Nearest Neighbor Strategy (NNS) for graph-level tasks: a shared pool of m (step, bits) pairs per
quantized tensor; every node, on any graph, picks the pair whose representable maximum is nearest to its own
maximum magnitude ``f_i = max_f |x_i|`` (A2Q Algorithm 1; ``quantize_function/get_scale_index.py``).

Two range definitions exist (``QuantConfig.nns_range``):

* ``"code"`` (default, the released code): ``q_k = 2^(b_k - 1) * s_k``;
* ``"paper"`` (Algorithm 1): ``q_k = s_k * (2^(b_k - 1) - 1)``.

Selection runs without gradient; the gradient of each node's (step, bits) is scatter-added onto the selected pool
entry by the gather ``pool[index]`` in autograd.
"""

from __future__ import annotations

import torch
from torch import Tensor

CHUNK_ROWS = 8192


def nns_range(step: Tensor, bits: Tensor, kind: str = "code") -> Tensor:
    """Representable maximum of each pool entry. step, bits: (m,) with integer-valued bits -> (m,)."""
    if kind == "code":
        return torch.pow(2.0, bits - 1.0) * step
    if kind == "paper":
        return (torch.pow(2.0, bits - 1.0) - 1.0) * step
    raise ValueError(f"nns_range: unknown kind {kind!r}; valid: code, paper")


def degree_pool_slices(m: int) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int]]:
    """Pool slices searched by in-degree >= 5, 2..4 and < 2: the first 1%, next 9%, remaining 90% of the pool
    (exactly A2Q's [0:10], [10:100], [100:] for m = 1000)."""
    a, b = max(1, m // 100), max(2, m // 10)
    return (0, a), (a, b), (b, m)


def _argmin_rows(f: Tensor, q: Tensor, lo: int, hi: int) -> Tensor:
    """argmin_k |f_i - q_k| over k in [lo, hi); f: (R,), q: (m,) -> (R,) int64 pool indices."""
    out = torch.empty(f.numel(), dtype=torch.long, device=f.device)
    qs = q[lo:hi]
    for start in range(0, f.numel(), CHUNK_ROWS):
        d = (f[start:start + CHUNK_ROWS, None] - qs[None, :]).abs()  # (chunk, hi - lo)
        out[start:start + CHUNK_ROWS] = d.argmin(dim=1) + lo
    return out


@torch.no_grad()
def nns_select(x: Tensor, step: Tensor, bits: Tensor, kind: str = "code", in_deg: Tensor | None = None) -> Tensor:
    """Pool index of every row of ``x``.

    Args:
        x: (N, F) node features.
        step, bits: (m,) pool step sizes (> 0) and integer-valued bitwidths.
        kind: range definition, see `nns_range`.
        in_deg: (N,) in-degrees for the degree-bucketed variant, or None for the uniform variant.

    Returns:
        (N,) int64 indices into the pool.
    """
    f = x.detach().abs().reshape(x.size(0), -1).amax(dim=1)  # (N,)
    q = nns_range(step.detach().reshape(-1), bits.detach().reshape(-1), kind)  # (m,)
    if in_deg is None:
        return _argmin_rows(f, q, 0, q.numel())
    idx = torch.empty(f.numel(), dtype=torch.long, device=f.device)
    high, mid, low = degree_pool_slices(q.numel())
    for (lo, hi), sel in ((high, in_deg >= 5), (mid, (in_deg >= 2) & (in_deg < 5)), (low, in_deg < 2)):
        if sel.any():
            idx[sel] = _argmin_rows(f[sel], q, lo, hi)
    return idx
