"""Requantization, saturation and integer aggregation against float64 / exact-integer references."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quant.formats.fixed_point import (
    aggregate_int,
    check_range,
    csr_from_edge_index,
    edge_coefficients,
    quantize_multiplier,
    requantize,
    rounding_shift,
    saturate,
)


def round_half_away_exact(x: Fraction) -> int:
    """Exact rational round-half-away-from-zero."""
    r = int(abs(x) + Fraction(1, 2))  # floor for non-negative
    return r if x >= 0 else -r


@settings(max_examples=60, deadline=None)
@given(scale=st.floats(1e-9, 1e4, allow_nan=False), bits=st.integers(16, 31))
def test_quantize_multiplier_precision(scale, bits):
    m, s = quantize_multiplier(scale, bits)
    assert 2 ** (bits - 1) <= m < 2**bits
    assert abs(m * 2.0**-s - scale) <= scale * 2.0**-bits


def test_quantize_multiplier_exact_for_powers_of_two_and_vectorised():
    for e in range(-40, 20):
        m, s = quantize_multiplier(2.0**e)
        assert m == 2**30 and Fraction(m, 2**s) == Fraction(2) ** e
    mult, shift = quantize_multiplier(np.array([0.25, 0.0, 0.3]))
    assert mult.tolist()[:2] == [2**30, 0] and shift.tolist()[:2] == [32, 0]
    assert (mult[2], shift[2]) == quantize_multiplier(0.3)
    with pytest.raises(ValueError, match="left shift"):
        quantize_multiplier(256.0, bits=8)


def test_requantize_matches_exact_rational_reference_for_many_scales():
    rng = np.random.default_rng(0)
    acc = rng.integers(-(2**31), 2**31, size=300)
    acc[:5] = [0, 1, -1, 2**31 - 1, -(2**31)]
    for scale in 10.0 ** rng.uniform(-9, 0, size=40):
        m, s = quantize_multiplier(scale)
        got = requantize(acc, m, s, out_bits=32)  # wide output: no saturation
        ref = [round_half_away_exact(Fraction(int(a) * m, 2**s)) for a in acc]
        assert got.tolist() == ref
        # and within one code of the float64 rounding of acc * real_scale (multiplier error < 2^-31)
        f64 = np.sign(acc * scale) * np.floor(np.abs(acc * scale) + 0.5)
        assert np.abs(got - f64).max() <= 1


def test_rounding_rule_ties():
    p = np.array([-7, -6, -5, -3, -2, -1, 1, 2, 3, 5, 6, 7])  # /2: ties at odd values
    assert rounding_shift(p, 1).tolist() == [-4, -3, -3, -2, -1, -1, 1, 1, 2, 3, 3, 4]
    assert rounding_shift(p, 1, "half_up").tolist() == [-3, -3, -2, -1, -1, 0, 1, 1, 2, 3, 3, 4]
    assert rounding_shift(np.array([5, -5]), 0).tolist() == [5, -5]
    assert rounding_shift(np.array([2**61]), 70).tolist() == [0]
    with pytest.raises(ValueError, match="valid"):
        rounding_shift(p, 1, "nearest_even")


def test_requantize_saturates_symmetric_and_can_raise():
    m, s = quantize_multiplier(1.0)
    assert requantize(np.array([-100, -7, 3, 100]), m, s, 4).tolist() == [-7, -7, 3, 7]
    assert requantize(np.array([5, -5]), m, s, 1).tolist() == [0, 0]
    with pytest.raises(OverflowError, match="4-bit"):
        requantize(np.array([8]), m, s, 4, on_overflow="raise")
    with pytest.raises(OverflowError, match="32-bit"):
        requantize(np.array([2**31]), m, s, 8)


def test_saturate_and_check_range():
    assert saturate(np.array([-40000, 5, 40000]), 16).tolist() == [-32768, 5, 32767]
    check_range(np.array([-32768, 32767]), 16)
    with pytest.raises(OverflowError, match="16-bit"):
        check_range(np.array([32768]), 16)


def sequential_aggregate(indptr, indices, x, coef, width):
    """Plain per-row loop with saturation after each add: the independent reference."""
    lo, hi = -(2 ** (width - 1)), 2 ** (width - 1) - 1
    out = np.zeros((len(indptr) - 1, x.shape[1]), dtype=np.int64)
    for i in range(len(indptr) - 1):
        for f in range(x.shape[1]):
            acc = 0
            for e in range(indptr[i], indptr[i + 1]):
                acc = min(max(acc + int(coef[e]) * int(x[indices[e], f]), lo), hi)
            out[i, f] = acc
    return out


@pytest.mark.parametrize("width", [8, 16, 32])
def test_aggregate_int_matches_sequential_saturating_loop(width):
    rng = np.random.default_rng(width)
    n, e, f = 30, 200, 5
    edge_index = rng.integers(0, n, size=(2, e))
    indptr, indices, perm = csr_from_edge_index(edge_index, n)
    assert np.array_equal(indices, edge_index[0, perm]) and np.all(np.diff(edge_index[1, perm]) >= 0)
    x = rng.integers(-127, 128, size=(n, f))
    coef = edge_coefficients(rng.random(e), frac_bits=6)
    got = aggregate_int(indptr, indices, x, coef, psum_bits=width)
    assert np.array_equal(got, sequential_aggregate(indptr, indices, x, coef, width))
    if width == 32:  # no saturation possible: equals the exact float64 weighted sum
        dst = np.repeat(np.arange(n), np.diff(indptr))
        ref = np.zeros((n, f))
        np.add.at(ref, dst, coef[:, None] * x[indices].astype(np.float64))
        assert np.array_equal(got, ref.astype(np.int64))
    if width == 8:
        with pytest.raises(OverflowError, match="8-bit"):
            aggregate_int(indptr, indices, x, coef, psum_bits=width, on_overflow="raise")


def test_edge_coefficients_round_half_up():
    assert edge_coefficients(np.array([0.5, 1.0, 0.0, 1 / 3, 0.5 / 256]), 8).tolist() == [128, 256, 0, 85, 1]
    with pytest.raises(ValueError):
        edge_coefficients(np.array([-0.1]), 8)
