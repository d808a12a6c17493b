"""Fixed-point arithmetic of the integer inference path: requantization, saturation, integer aggregation.

This is the bit-exact golden model that ``hw/`` (cycle model, RTL testbenches) must reproduce; the formats, widths,
rounding rule and overflow policy are written up in ``quant/FIXED_POINT.md``. Summary:

* **Real scale -> multiplier + shift.** ``real_scale ~= multiplier * 2^-shift`` with a ``bits``-bit (default 31)
  normalised unsigned multiplier ``2^(bits-1) <= multiplier < 2^bits`` (:func:`quantize_multiplier`).
* **Requantization** (:func:`requantize`): ``out = sat_sym(round(acc * multiplier / 2^shift), out_bits)`` computed
  exactly in int64. ``acc`` must be a 32-bit accumulator and ``multiplier < 2^31`` so the product fits int64.
* **One rounding rule:** round half away from zero, ``sign(p) * ((|p| + 2^(shift-1)) >> shift)``; it equals the
  A2Q quantizer's ``floor(|v| + 0.5) * sign(v)``, so power-of-two scales reproduce the fake-quant codes exactly.
  (``rounding="half_up"``, ``(p + 2^(shift-1)) >> shift``, exists only to measure the difference; it is not the
  golden rule.)
* **Overflow policy: saturate.** Requantized codes clamp to the symmetric range ``[-(2^(b-1)-1), 2^(b-1)-1]``;
  accumulators/partial sums clamp to the full two's-complement range of their width. :func:`check_range` raises
  ``OverflowError`` instead, for callers that must prove no saturation happens.
* **Aggregation** (:func:`aggregate_int`): ``psum[i] = sat_W(... sat_W(sat_W(c_0 x_j0) + c_1 x_j1) ...)`` over the CSR
  row of destination ``i`` in stored order, saturating after every addition at ``psum_bits`` (16 in MEGA's
  aggregation units). ``c_e`` are unsigned fixed-point per-edge coefficients with ``frac_bits`` fractional bits
  (:func:`edge_coefficients`), which is how the GCN normalisation ``1/sqrt(d_i d_j)`` becomes integer.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Rounding = Literal["half_away_from_zero", "half_up"]
ROUNDINGS = ("half_away_from_zero", "half_up")
MAX_SHIFT = 62


def int_range(width: int) -> tuple[int, int]:
    """Two's-complement range of a ``width``-bit signed register: ``(-2^(w-1), 2^(w-1) - 1)``."""
    return -(1 << (width - 1)), (1 << (width - 1)) - 1


def code_limit(bits: np.ndarray | int) -> np.ndarray:
    """Symmetric code limit ``qmax = 2^(b-1) - 1`` (0 for b <= 1), elementwise. int64."""
    b = np.asarray(bits, dtype=np.int64)
    return np.where(b >= 1, (np.int64(1) << np.maximum(b - 1, 0)) - 1, 0)


def saturate(x: np.ndarray, width: int) -> np.ndarray:
    """Clamp int64 values to the signed ``width``-bit range (the overflow policy of every register)."""
    lo, hi = int_range(width)
    return np.clip(np.asarray(x, dtype=np.int64), lo, hi)


def check_range(x: np.ndarray, width: int, name: str = "value") -> None:
    """Raise ``OverflowError`` if any value does not fit a signed ``width``-bit register."""
    lo, hi = int_range(width)
    x = np.asarray(x)
    if x.size and (x.min() < lo or x.max() > hi):
        raise OverflowError(f"{name}: values span [{x.min()}, {x.max()}], outside the signed {width}-bit range "
                            f"[{lo}, {hi}]; widen the register or lower the scales")


def quantize_multiplier(real_scale: float | np.ndarray, bits: int = 31) -> tuple:
    """Represent ``real_scale`` (>= 0) as ``multiplier * 2^-shift`` with a normalised ``bits``-bit multiplier.

    ``multiplier = round(m * 2^bits)`` where ``real_scale = m * 2^e``, ``0.5 <= m < 1`` (frexp), and
    ``shift = bits - e``; a zero scale gives ``(0, 0)``. Scalars give Python ints, arrays give int64 arrays.
    The relative error is at most ``2^-bits``; powers of two are exact (``multiplier = 2^(bits-1)``).
    """
    if not 2 <= bits <= 31:
        raise ValueError(f"quantize_multiplier: bits={bits} must lie in 2..31 so that a 32-bit accumulator "
                         "times the multiplier fits int64")
    scale = np.asarray(real_scale, dtype=np.float64)
    if np.any(~np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError("quantize_multiplier: real_scale must be finite and >= 0")
    m, e = np.frexp(scale)  # scale = m * 2^e, 0.5 <= m < 1
    mult = np.floor(m * 2.0**bits + 0.5).astype(np.int64)
    shift = bits - e.astype(np.int64)
    carry = mult == (1 << bits)  # rounding reached 2^bits: renormalise
    mult = np.where(carry, mult >> 1, mult)
    shift = np.where(carry, shift - 1, shift)
    zero = scale == 0
    mult, shift = np.where(zero, 0, mult), np.where(zero, 0, shift)
    if np.any(shift < 0):
        raise ValueError(f"quantize_multiplier: a scale of {scale.max():.3g} needs a left shift; scales >= "
                         f"2^{bits - 1} are not supported")
    if scale.ndim == 0:
        return int(mult), int(shift)
    return mult, shift


def rounding_shift(p: np.ndarray, shift: np.ndarray | int, rounding: Rounding = "half_away_from_zero"
                   ) -> np.ndarray:
    """Divide int64 ``p`` by ``2^shift`` with the golden rounding rule (shift 0 = identity, > 62 gives 0)."""
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding={rounding!r} is unknown; valid: {ROUNDINGS}")
    p = np.asarray(p, dtype=np.int64)
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), p.shape)
    if np.any(shift < 0):
        raise ValueError("rounding_shift: negative shifts are not supported")
    big = shift > MAX_SHIFT  # |p| < 2^62 so the quotient rounds to 0
    s = np.where(big, 1, shift)
    half = np.where(s > 0, np.int64(1) << np.maximum(s - 1, 0), 0)
    if rounding == "half_up":
        out = (p + half) >> s
    else:
        out = np.sign(p) * ((np.abs(p) + half) >> s)
    return np.where(big, 0, out)


def requantize(acc: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int, out_bits: np.ndarray | int,
               rounding: Rounding = "half_away_from_zero", on_overflow: str = "saturate") -> np.ndarray:
    """``sat_sym(round(acc * multiplier / 2^shift), out_bits)`` elementwise (all arguments broadcast).

    Args:
        acc: int64 accumulator values; must fit a signed 32-bit register (checked).
        multiplier, shift: from :func:`quantize_multiplier` (scalars or arrays broadcastable to ``acc``).
        out_bits: bitwidth of the output codes (symmetric range, 0 for b <= 1).
        on_overflow: ``"saturate"`` (default, the hardware policy) or ``"raise"`` (``OverflowError``).
    Returns: int64 codes with ``|code| <= 2^(out_bits-1) - 1``.
    """
    acc = np.asarray(acc, dtype=np.int64)
    check_range(acc, 32, "requantize: accumulator")
    mult = np.asarray(multiplier, dtype=np.int64)
    if np.any(mult < 0) or np.any(mult >= 1 << 31):
        raise ValueError("requantize: multiplier must lie in [0, 2^31)")
    q = rounding_shift(acc * mult, shift, rounding)
    qmax = code_limit(out_bits)
    if on_overflow == "raise":
        over = np.abs(q) > qmax
        if np.any(over):
            raise OverflowError(f"requantize: {int(over.sum())} codes exceed the {out_bits}-bit symmetric range")
    elif on_overflow != "saturate":
        raise ValueError(f"on_overflow={on_overflow!r} is unknown; valid: ('saturate', 'raise')")
    return np.clip(q, -qmax, qmax)


def edge_coefficients(weight: np.ndarray, frac_bits: int) -> np.ndarray:
    """Unsigned fixed-point per-edge coefficients ``c_e = floor(w_e * 2^frac_bits + 0.5)`` for ``w_e >= 0``.

    Shapes: weight (E,) float64 -> (E,) int64. ``c_e * 2^-frac_bits`` is the value the integer path uses.
    """
    w = np.asarray(weight, dtype=np.float64)
    if np.any(w < 0) or not 0 <= frac_bits <= 30:
        raise ValueError("edge_coefficients: weights must be >= 0 and frac_bits in 0..30")
    return np.floor(w * 2.0**frac_bits + 0.5).astype(np.int64)


def csr_from_edge_index(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Destination-major CSR of a COO edge list (src = row 0, dst = row 1), stable in edge order.

    Returns (indptr (N+1,), indices (E,) = source of each slot, perm (E,) = original edge id of each slot), int64.
    """
    src, dst = np.asarray(edge_index, dtype=np.int64)
    perm = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, src[perm], perm


def aggregate_int(indptr: np.ndarray, indices: np.ndarray, codes: np.ndarray, coef: np.ndarray,
                  psum_bits: int = 16, on_overflow: str = "saturate") -> np.ndarray:
    """Integer weighted-sum aggregation with saturating ``psum_bits``-wide partial sums.

    ``psum[i, f] = sat(... sat(sat(c_0 * x[j_0, f]) + c_1 * x[j_1, f]) ...)`` over the slots of CSR row ``i`` in
    stored order (the order the aggregation unit consumes edges). Products are exact (int64) before the add.

    Shapes: indptr (N+1,), indices (E,), codes (N_src, F) int, coef (E,) int -> (N, F) int64.
    """
    if on_overflow not in ("saturate", "raise"):
        raise ValueError(f"on_overflow={on_overflow!r} is unknown; valid: ('saturate', 'raise')")
    indptr = np.asarray(indptr, dtype=np.int64)
    x = np.asarray(codes, dtype=np.int64)
    coef = np.asarray(coef, dtype=np.int64)
    n = indptr.shape[0] - 1
    lo, hi = int_range(psum_bits)
    deg = np.diff(indptr)  # (N,)
    out = np.zeros((n, x.shape[1]), dtype=np.int64)
    # process the k-th slot of every row together: vectorised, same order as a sequential per-row loop
    for k in range(int(deg.max()) if n else 0):
        rows = np.flatnonzero(deg > k)
        slot = indptr[rows] + k
        acc = out[rows] + coef[slot, None] * x[indices[slot]]  # (R, F)
        if on_overflow == "raise" and (acc.min() < lo or acc.max() > hi):
            raise OverflowError(f"aggregate_int: a partial sum leaves the signed {psum_bits}-bit range at slot {k}; "
                                "widen psum_bits or lower frac_bits")
        out[rows] = np.clip(acc, lo, hi)
    return out
