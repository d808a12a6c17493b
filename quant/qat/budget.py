"""Exact bit budget: shift every learned feature bitwidth by one common amount so that the *stored* average bits
meet the target (the largest achievable average not above it).

Why not only A2Q's penalty ``a * relu(M - M_target)^2``: its gradient is the same for every node of a layer, and
Adam moves every parameter by about its learning rate per step whatever the gradient's size, so all nodes' bits
fall together and keep falling after M meets the target (momentum carries them about ``lr / (1 - beta1)`` = one
bit further at A2Q's settings); nothing raises them again, because the local gradient pushes a bitwidth up only
where its row clips. Measured in this suite: A2Q at a 1.7-bit target ended at 1.00 bits on every node of Amazon
Computers, CiteSeer GraphSAGE and GIN, and at 1.19 to 1.36 on Cora GCN.

The projection keeps what the optimiser learned about *which* rows need more bits (the differences between
bitwidths) and sets only their common level, after every optimiser step (`project_bits_`). Bitwidths are stored
rounded (half away from zero), so the stored average as a function of the shift ``d`` is a step function; `budget_shift`
finds its steps exactly (no bisection) and returns a shift in the middle of the chosen step, so no row sits on a
rounding boundary. Rows with equal bitwidths drop together; `spread_ties` separates them once at the start (by
in-degree: A2Q's analysis finds high in-degree nodes need more bits), so the average can approach the target in
steps of one row.
"""

from __future__ import annotations

import torch
from torch import Tensor

TIE_SPREAD = 0.1  # initial bitwidths are spread over [b, b + TIE_SPREAD) by rank: < 1/2 bit, and above float32 ulps


def stored_average(bits: Tensor, weight: Tensor, unsigned: Tensor, max_bits: int, shift: float = 0.0) -> float:
    """Element-weighted average of the stored bits without the sign bit after subtracting ``shift``.

    Shapes: bits, weight, unsigned: (R,) (one entry per parameter row; weight = tensor elements it covers)."""
    stored = torch.floor((bits.double() - shift).clamp(1.0, float(max_bits)) + 0.5)  # round half away (>= 1 > 0)
    return float(((stored - unsigned.double()) * weight.double()).sum() / weight.double().sum())


def budget_shift(bits: Tensor, weight: Tensor, unsigned: Tensor, target: float, max_bits: int) -> float:
    """The common shift ``d`` whose stored average ``stored_average(bits - d)`` is the largest one not above
    ``target`` (negative ``d`` raises the bits). The shifted bits are clamped to [1, max_bits] before rounding.

    The stored bits of row i fall by one at each ``d = b_i - (k + 1/2)``, k = 1 .. max_bits - 1 (a rounded value
    of k + 1 needs b_i - d >= k + 1/2); sorting those breakpoints gives every achievable average. Shapes: (R,)."""
    b = bits.detach().double()
    w = weight.detach().double()
    sign = unsigned.detach().double()
    total = w.sum()
    top = float(((max_bits - sign) * w).sum() / total)  # every row at max_bits
    if top <= target + 1e-9:
        return float(b.min()) - max_bits  # raising to the top meets the budget: every row at max_bits
    k = torch.arange(1, max_bits, dtype=torch.float64)  # (K,)
    points = (b[:, None] - (k[None, :] + 0.5)).reshape(-1)  # (R * K,) where a row loses one bit
    drop = w[:, None].expand(-1, k.numel()).reshape(-1)
    order = torch.argsort(points)
    points, drop = points[order], drop[order]
    avg = top - torch.cumsum(drop, 0) / total  # average after passing each breakpoint
    limit = torch.tensor([-(target + 1e-9)], dtype=torch.float64)  # an average equal to the target qualifies
    j = int(torch.searchsorted(-avg, limit, right=False))
    j = min(j, points.numel() - 1)  # every row at 1 bit is the floor: the lowest achievable average
    lo = float(points[j])
    nxt = points[j + 1:][points[j + 1:] > lo]
    hi = float(nxt[0]) if nxt.numel() else lo + 1.0
    return (lo + hi) / 2  # strictly past breakpoint j, before the next one


def spread_ties(bits: Tensor, priority: Tensor) -> Tensor:
    """``bits`` plus an offset in [0, TIE_SPREAD) increasing with ``priority`` (rank order), so that no two rows
    share a rounding boundary. Shapes: (R,) -> (R,)."""
    rank = torch.argsort(torch.argsort(priority.double(), stable=True), stable=True).to(bits.dtype)
    return bits + TIE_SPREAD * rank / max(rank.numel(), 1)


def _bit_rows(model) -> list[tuple[object, Tensor, Tensor]]:
    """(quantizer, weight (R,), tie priority (R,)) of every learned-bit quantizer whose rows are fixed: per-node
    (``node``) and degree-table (``degree``) schemes on a node task's graph. Raises for other schemes."""
    from quant.qat.a2q import A2QQuantizer
    from quant.qat.degree_aware import degree_bucket

    rows = []
    for _, q in model.named_modules():
        if not (isinstance(q, A2QQuantizer) and q.learn_bits):
            continue
        ctx = q.ctx
        if q.scheme not in ("node", "degree") or ctx.fixed_num_nodes is None or ctx.in_deg is None:
            raise ValueError(f"project_bits_: quantizer {q.role!r} (scheme {q.scheme!r}) has no fixed rows (graph "
                             "tasks: Nearest Neighbor pool); use QuantConfig(bits_control='penalty') there")
        elems = float(max(q._last_row_elems, 1))
        deg = ctx.in_deg.to(q.bits.device)
        if q.scheme == "node":
            rows.append((q, torch.full((deg.numel(),), elems, device=deg.device), deg))
        else:
            idx = degree_bucket(deg, q.num_buckets, q.bucket_scheme)
            count = torch.bincount(idx, minlength=q.num_buckets).to(torch.float64)
            rows.append((q, count * elems, torch.arange(q.num_buckets, device=deg.device)))
    return rows


@torch.no_grad()
def spread_model_ties_(model) -> None:
    """Apply `spread_ties` to every learned bitwidth of ``model`` (once, after calibration)."""
    for q, _, priority in _bit_rows(model):
        q.bits.copy_(spread_ties(q.bits.view(-1), priority).view_as(q.bits))


@torch.no_grad()
def project_bits_(model, target: float) -> float:
    """Shift every learned feature bitwidth of ``model`` by one amount so that the stored average (without sign
    bits, element-weighted over all learned tensors) is the largest achievable one not above ``target``. Returns
    that average. Parameters keep their rank order; they are clamped to [1/2, max_bits + 1/2) (the same stored
    values, with some order kept past the clamp)."""
    rows = _bit_rows(model)
    if not rows:
        return float("nan")
    bits = torch.cat([q.bits.detach().abs().view(-1) for q, _, _ in rows])
    weight = torch.cat([w.to(bits.device) for _, w, _ in rows])
    unsigned = torch.cat([torch.full_like(w, float(q.unsigned)) for q, w, _ in rows]).to(bits.device)
    max_bits = max(q.max_bits for q, _, _ in rows)
    if any(q.max_bits != max_bits for q, _, _ in rows):
        raise ValueError("project_bits_: learned quantizers with different max_bits; give them one max_bits")
    d = budget_shift(bits, weight, unsigned, target, max_bits)
    for q, _, _ in rows:
        q.bits.copy_((q.bits.abs() - d).clamp(0.5 + 1e-3, max_bits + 0.5 - 1e-3))
    return stored_average(bits, weight, unsigned, max_bits, d)
