"""Pure quantizer math and its autograd Functions (no state): A2Q's learned symmetric quantizer and
Degree-Quant's observed-range affine quantizer.

A2Q (Zhu et al., ICLR 2023, arXiv 2302.00193), forward for step ``s > 0`` and signed bitwidth ``b >= 1``:

    qmax = 2^(b-1) - 1,   v = clamp(x / s, -qmax, qmax),   x_q = s * sign(v) * floor(|v| + 1/2)

(round half away from zero; ``b = 1`` gives all zeros). Backward (the paper's estimators), with the in-range
mask ``i = 1[|x| <= qmax s]``:

    dx_q/dx = i                                           (STE with clip mask)
    dx_q/ds = (round(x/s) - x/s) i + sign(x) qmax (1 - i)  (LSQ-style, no grad-scale factor)
    dx_q/db = (1 - i) sign(x) (qmax + 1) ln2 s              (d/db of s (2^(b-1) - 1) on clipped elements)

The incoming gradient ``g`` multiplying the step and bit derivatives is the task gradient ``dL/dx_q`` (global),
or, with the *Local Gradient* method, ``sign(x_q - x)`` = dE/dx_q of the local error ``E = |x_q - x|``; the input
gradient is always the task gradient. Reduction onto a broadcast parameter is a sum (global) or, as in the A2Q
node-level code, a mean over the broadcast elements (local).

Degree-Quant (Tailor et al., ICLR 2021): ``out = (clamp(round(x / scale + zp), qmin, qmax) - zp) * scale`` with
gradient zeroed where the rounded value hits ``qmin`` or ``qmax`` (the released code's ``gc`` estimator).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.autograd import Function

LN2 = math.log(2.0)
STEP_EPS = 1e-8


def round_half_away(v: Tensor) -> Tensor:
    """Round to nearest, ties away from zero: sign(v) * floor(|v| + 0.5).

    Floating tensors compute it as ``trunc(v + 0.5 sign(v))``: the same values (``v + 0.5`` and ``|v| + 0.5`` are
    one rounding of the same magnitude, and ``trunc`` of a negative sum is ``-floor`` of its magnitude; at v = +-0
    the sum is v itself) in fewer passes, a hot spot of quantization-aware training. ``0.5 sign(v)`` rather than
    ``copysign(0.5, v)``: the same values, and a broadcast 0-dim operand costs a CPU kernel several times more."""
    if v.is_floating_point():
        return torch.add(v, torch.sign(v), alpha=0.5).trunc_()
    return torch.sign(v) * torch.floor(v.abs() + 0.5)


def a2q_qmax(bits: Tensor) -> Tensor:
    """Largest code of the symmetric signed grid: 2^(b-1) - 1 for integer-valued ``bits``."""
    return torch.pow(2.0, bits - 1.0) - 1.0


def a2q_quantize(x: Tensor, step: Tensor, bits: Tensor) -> tuple[Tensor, Tensor]:
    """Integer codes and dequantized values. ``step`` (> 0) and ``bits`` (integer-valued) broadcast to ``x``.

    Returns ``(codes, x_q)``, both shaped like ``x``; ``codes`` are float tensors holding integers.
    """
    codes = _codes(x / step, a2q_qmax(bits))
    return codes, codes * step


def _clip(v: Tensor, qmax: Tensor) -> Tensor:
    """clamp(v, -qmax, qmax) for ``qmax >= 0`` (broadcast), as min(max(v, -qmax), qmax): the same values, and on
    CPU about 4x cheaper than ``clamp`` with tensor bounds."""
    return torch.minimum(torch.maximum(v, -qmax), qmax)


def _codes(v: Tensor, qmax: Tensor) -> Tensor:
    """round_half_away(clamp(v, -qmax, qmax)): the codes of the scaled values ``v = x / s``."""
    return round_half_away(_clip(v, qmax))


def _reduce(g: Tensor, shape: torch.Size, mean: bool) -> Tensor:
    """Sum (or mean) ``g`` over the dimensions broadcast to reach it from ``shape``."""
    out = g.sum_to_size(shape)
    if mean and out.numel() > 0:
        out = out * (out.numel() / g.numel())
    return out


class A2QFakeQuant(Function):
    """x_q = a2q_quantize(x, s, round(b)) with A2Q's gradients for x, s and b.

    Inputs: ``x`` (any shape), ``step`` (> 0, broadcastable to x), ``bits`` (continuous bits, broadcastable; rounded
    half away from zero in forward, straight-through in backward), ``local`` (bool: Local Gradient),
    ``for_backward`` (bool: keep what backward needs; `a2q_fake_quant` passes whether autograd records the call).

    Forward keeps two tensors shaped like x for backward: the step derivative ``ds`` and ``o = sign(v - clamp(v))``
    (+-1 where clipped, where it is sign(v) = sign(x) as s > 0; +0 inside). Every derivative is then float
    arithmetic on them, not ``where`` over a boolean mask (several times slower per element on CPU), and gives the
    values of the formulas above: ``g - g |o|`` is ``g`` inside and +0 outside; ``ds = (codes - clamp(v)) +
    clamp(v) |o|`` is round(v) - v inside and the code sign(v) qmax outside (where the code equals clamp(v)); ``db =
    o (qmax + 1) ln2 s``. The per-element work is a few passes, which is what the training-time overhead of A2Q over
    FP32 is made of.
    """

    @staticmethod
    def forward(ctx, x: Tensor, step: Tensor, bits: Tensor, local: bool, for_backward: bool = True) -> Tensor:
        qmax = a2q_qmax(round_half_away(bits))  # broadcast shape of bits
        v = x / step
        clipped = _clip(v, qmax)
        codes = round_half_away(clipped)
        x_q = codes * step
        ctx.local = local
        ctx.shapes = (step.shape, bits.shape)
        if for_backward:
            outside_sign = torch.sign(v - clipped)
            ds = torch.addcmul(codes - clipped, clipped, outside_sign.abs())
            ctx.save_for_backward(step, qmax, ds, outside_sign, *((x, x_q) if local else ()))
        return x_q

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        step, qmax, ds, outside_sign, *local_pair = ctx.saved_tensors
        step_shape, bits_shape = ctx.shapes
        grad_x = None
        if ctx.needs_input_grad[0]:
            grad_x = torch.addcmul(grad_out, grad_out, outside_sign.abs(), value=-1.0)  # g - g |o|
        g = torch.sign(local_pair[1] - local_pair[0]) if ctx.local else grad_out
        grad_s = grad_b = None
        if ctx.needs_input_grad[1]:
            grad_s = _reduce(g * ds, step_shape, ctx.local)
        if ctx.needs_input_grad[2]:
            db = outside_sign * ((qmax + 1.0) * LN2 * step)
            grad_b = _reduce(g * db, bits_shape, ctx.local)
        return grad_x, grad_s, grad_b, None, None


def a2q_fake_quant(x: Tensor, step: Tensor, bits: Tensor, local: bool = False) -> Tensor:
    """Differentiable A2Q fake quantization (see `A2QFakeQuant`); keeps nothing for backward when autograd does
    not record the call (evaluation under ``torch.no_grad``, or no input needing a gradient)."""
    records = torch.is_grad_enabled() and (x.requires_grad or step.requires_grad or bits.requires_grad)
    return A2QFakeQuant.apply(x, step, bits, local, records)


class _ScaleGrad(Function):
    """Identity forward; backward multiplies the gradient by ``factor``."""

    @staticmethod
    def forward(ctx, t: Tensor, factor: float) -> Tensor:
        ctx.factor = factor
        return t.view_as(t)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        return grad_out * ctx.factor, None


def a2q_fake_quant_stored(values: Tensor, rows: Tensor, step: Tensor, bits: Tensor, row_width: int,
                          local: bool = False) -> Tensor:
    """`a2q_fake_quant` of a sparse (N, F) tensor given by its stored ``values`` (nnz,) and their ``rows`` (nnz,),
    with one step and bitwidth per row (``step``, ``bits``: (N, 1)). Returns the quantized values (nnz,).

    Equal to the dense quantizer on the densified tensor, values and gradients: an unstored zero quantizes to zero
    and adds nothing to the step or bit gradient (it lies inside the range, ``round(0) - 0 = 0``, and its Local
    Gradient ``sign(0 - 0)`` is 0), so the per-row sums run over the stored values only; the Local Gradient's mean
    over a row's ``row_width`` elements is kept by scaling the parameters' gradient by ``1 / row_width``.
    """
    s, b = step.reshape(-1)[rows], bits.reshape(-1)[rows]  # (nnz,): autograd scatter-adds onto the rows
    if local:
        s, b = _ScaleGrad.apply(s, 1.0 / row_width), _ScaleGrad.apply(b, 1.0 / row_width)
    return a2q_fake_quant(values, s, b, local)


# ---------------------------------------------------------------------------------------------- Degree-Quant


def affine_qparams(lo: Tensor, hi: Tensor, num_bits: int) -> tuple[Tensor, Tensor, int, int]:
    """Asymmetric signed INT``num_bits`` parameters covering ``[min(lo, 0), max(hi, 0)]``.

    Returns ``(scale, zero_point, qmin, qmax)`` with qmin = -2^(b-1), qmax = 2^(b-1) - 1.
    """
    qmin, qmax = -(2 ** (num_bits - 1)), 2 ** (num_bits - 1) - 1
    lo, hi = torch.clamp(lo, max=0.0), torch.clamp(hi, min=0.0)
    # Divide by a tensor, not a Python number: CUDA multiplies by the number's reciprocal, one float32 ulp off the
    # CPU's quotient, and the codes of a GPU-trained model would then differ from the CPU's.
    span = hi - lo
    scale = torch.clamp(span / span.new_tensor(float(qmax - qmin)), min=1e-8)
    zp = torch.clamp(qmin - torch.round(lo / scale), qmin, qmax)
    return scale, zp, qmin, qmax


class AffineFakeQuant(Function):
    """Degree-Quant fake quantization; gradient passes where the code lies strictly inside (qmin, qmax)."""

    @staticmethod
    def forward(ctx, x: Tensor, scale: Tensor, zp: Tensor, qmin: int, qmax: int) -> Tensor:
        q = torch.clamp(torch.round(x / scale + zp), qmin, qmax)
        ctx.save_for_backward((q > qmin) & (q < qmax))
        return (q - zp) * scale

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (mask,) = ctx.saved_tensors
        return grad_out * mask.to(grad_out.dtype), None, None, None, None


def affine_fake_quant(x: Tensor, scale: Tensor, zp: Tensor, qmin: int, qmax: int) -> Tensor:
    return AffineFakeQuant.apply(x, scale, zp, qmin, qmax)


def percentile_range(x: Tensor, pct: float) -> tuple[Tensor, Tensor]:
    """(lower, upper) percentile of all elements of ``x`` (``pct`` = 0 gives min/max): order statistics
    (:func:`kth_smallest`). A sparse COO ``x`` counts its unstored elements as zeros (`percentile_range_stored`).

    Exact in both paths. When most elements are 0 (aggregated bag-of-words features, e.g. GIN's 2708 x 1433 Cora
    aggregate) the order statistics come from the non-zero elements and the count of zeros
    (:func:`kth_smallest_with_zeros`): about 2x faster than kthvalue over every element at 10 % density.
    """
    if x.is_sparse:
        x = x.detach().coalesce()
        return percentile_range_stored(x.values(), math.prod(x.shape), pct)
    flat = x.detach().reshape(-1)
    n = flat.numel()
    if pct <= 0 or n < 2:
        return flat.min(), flat.max()
    k_lo, k_hi = _percentile_ranks(n, pct)
    if 2 * int(torch.count_nonzero(flat)) < n:
        nonzero = flat[flat != 0]
        return kth_smallest_with_zeros(nonzero, n, k_lo), kth_smallest_with_zeros(nonzero, n, k_hi)
    return kth_smallest(flat, k_lo), kth_smallest(flat, k_hi)


def percentile_range_stored(values: Tensor, n: int, pct: float) -> tuple[Tensor, Tensor]:
    """`percentile_range` of ``n`` elements: the stored ``values`` (1-D) of a sparse tensor and ``n - len(values)``
    zeros, exactly as the densified tensor gives."""
    flat = values.detach().reshape(-1)
    if n == flat.numel():
        return percentile_range(flat, pct)
    nonzero = flat[flat != 0]
    if pct <= 0 or n < 2:
        zero = flat.new_zeros(())
        if nonzero.numel() == 0:
            return zero, zero
        return torch.minimum(nonzero.min(), zero), torch.maximum(nonzero.max(), zero)
    k_lo, k_hi = _percentile_ranks(n, pct)
    return kth_smallest_with_zeros(nonzero, n, k_lo), kth_smallest_with_zeros(nonzero, n, k_hi)


def _percentile_ranks(n: int, pct: float) -> tuple[int, int]:
    """1-based ranks of the lower and upper ``pct`` percentiles of ``n`` elements."""
    return max(1, int(math.ceil(pct * n))), max(1, min(n, int(math.floor((1.0 - pct) * n)) + 1))


TOPK_MAX_FRACTION = 1 / 256  # below this share of the elements, a partial top-k beats a full selection


def kth_smallest(flat: Tensor, k: int) -> Tensor:
    """k-th smallest (1-based) element of the 1-D ``flat``, exactly.

    Degree-Quant's percentiles sit in the tails (k or n - k + 1 is 0.1 % / 1 % of n): there the max of the k
    smallest (or the min of the n - k + 1 largest) from ``topk`` is the same order statistic, and a partial
    selection costs less than ``kthvalue``'s full one; elsewhere ``kthvalue``.
    """
    n = flat.numel()
    if not 1 <= k <= n:
        raise ValueError(f"kth_smallest: k={k} outside 1..{n}")
    if k <= n * TOPK_MAX_FRACTION:
        return flat.topk(k, largest=False, sorted=False).values.max()
    if n - k + 1 <= n * TOPK_MAX_FRACTION:
        return flat.topk(n - k + 1, largest=True, sorted=False).values.min()
    return flat.kthvalue(k).values


def kth_smallest_with_zeros(nonzero: Tensor, n: int, k: int) -> Tensor:
    """k-th smallest (1-based) of ``n`` elements whose non-zero ones are ``nonzero`` (1-D) and the rest are 0.

    Sorted, the n elements are [negatives, zeros, positives] and the non-zero ones [negatives, positives]: the k-th
    is the k-th non-zero while k <= #negatives, 0 while k <= #negatives + #zeros, else the (k - #zeros)-th non-zero.
    """
    num_neg = int((nonzero < 0).sum())
    num_zero = n - nonzero.numel()
    if k <= num_neg:
        return kth_smallest(nonzero, k)
    if k <= num_neg + num_zero:
        return torch.zeros((), dtype=nonzero.dtype, device=nonzero.device)
    return kth_smallest(nonzero, k - num_zero)


def dq_protect_probability(in_deg: Tensor, p_low: float, p_high: float, batch: Tensor | None = None) -> Tensor:
    """Degree-Quant protection probability p_i = p_low + (p_high - p_low) * CDF(indeg_i).

    CDF is the empirical in-degree distribution of node i's own graph: the fraction of nodes of that graph whose
    in-degree is <= indeg_i. in_deg: (N,) int64; batch: (N,) graph id or None (one graph) -> (N,) float.
    """
    n = in_deg.numel()
    if n == 0:
        return torch.zeros(0)
    if batch is None:
        batch = torch.zeros(n, dtype=torch.long, device=in_deg.device)
    width = int(in_deg.max()) + 1
    key = batch * width + in_deg  # (N,) sorts by (graph, degree)
    counts = torch.bincount(key, minlength=(int(batch.max()) + 1) * width)
    cum = counts.view(-1, width).cumsum(dim=1)  # (G, width): nodes of graph g with degree <= d
    cdf = cum[batch, in_deg].to(torch.float32) / cum[batch, -1].to(torch.float32)
    return p_low + (p_high - p_low) * cdf
