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


def _nearest_in_slice(f: Tensor, q: Tensor, lo: int, hi: int) -> Tensor:
    """argmin_k |f_i - q_k| over k in [lo, hi), ties to the lowest k; f: (R,), q: (m,) -> (R,) int64 pool indices.

    O((R + m) log m) by binary search in the sorted slice instead of an (R, m) distance matrix: the nearest value
    is the first one >= f_i or the last one < f_i. A stable sort keeps equal values in index order, so the first
    position of a run of equal values holds the lowest pool index; an exact tie in distance between the two
    neighbours goes to the lower pool index, as ``argmin`` does.
    """
    values, order = torch.sort(q[lo:hi].contiguous(), stable=True)  # (n,), (n,)
    n = values.numel()
    right = torch.searchsorted(values, f.contiguous(), side="left")  # first position with value >= f
    has_right, has_left = right < n, right > 0
    right_c = right.clamp(max=n - 1)
    left_value = values[(right - 1).clamp(min=0)]
    left = torch.searchsorted(values, left_value, side="left")  # first position of the left neighbour's run
    d_right = (f - values[right_c]).abs()
    d_left = (f - left_value).abs()
    take_right = has_right & (~has_left | (d_right < d_left) | ((d_right == d_left) & (order[right_c] < order[left])))
    return torch.where(take_right, order[right_c], order[left]) + lo


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
        return _nearest_in_slice(f, q, 0, q.numel())
    idx = torch.empty(f.numel(), dtype=torch.long, device=f.device)
    high, mid, low = degree_pool_slices(q.numel())
    for (lo, hi), sel in ((high, in_deg >= 5), (mid, (in_deg >= 2) & (in_deg < 5)), (low, in_deg < 2)):
        if sel.any():
            idx[sel] = _nearest_in_slice(f[sel], q, lo, hi)
    return idx
