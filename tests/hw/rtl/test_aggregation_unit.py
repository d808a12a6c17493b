"""cocotb testbench of hw/rtl/aggregation_unit.v against quant.formats.fixed_point.aggregate_int (bit-exact) and
hw.timing."""

from __future__ import annotations

import random

import cocotb
import numpy as np
import pytest
from rtl_tb import TB, StreamDriver, StreamMonitor, check_in_order, pack_lanes, pause_pattern, unpack_lanes

from hw import timing
from quant.formats.fixed_point import aggregate_int

TOP = "aggregation_unit"


def edge_beats(indptr, indices, codes, coef, lanes: int, code_bits: int) -> tuple[list[dict], list[int]]:
    """CSR -> edge beats, lane group by lane group, rows in order; returns beats and the row order of outputs.

    Shapes: codes (N_src, F) with F padded to a multiple of ``lanes`` by zeros.
    """
    n, f = indptr.shape[0] - 1, codes.shape[1]
    groups = -(-f // lanes)
    x = np.zeros((codes.shape[0], groups * lanes), np.int64)
    x[:, :f] = codes
    beats = []
    for g in range(groups):
        for i in range(n):
            slots = range(indptr[i], indptr[i + 1])
            if len(slots) == 0:  # zero-degree row: one beat with coefficient 0
                beats.append({"s_coef": 0, "s_x": 0, "s_last": 1})
            for k, s in enumerate(slots):
                beats.append({"s_coef": int(coef[s]), "s_last": int(k == len(slots) - 1),
                              "s_x": pack_lanes(x[indices[s], g * lanes:(g + 1) * lanes], code_bits)})
    return beats, groups


def expected_rows(indptr, indices, codes, coef, lanes: int, psum_bits: int) -> list[list[int]]:
    out = aggregate_int(indptr, indices, codes, coef, psum_bits)  # (N, F)
    groups = -(-out.shape[1] // lanes)
    padded = np.zeros((out.shape[0], groups * lanes), np.int64)
    padded[:, :out.shape[1]] = out
    return [[int(v) for v in padded[i, g * lanes:(g + 1) * lanes]] for g in range(groups) for i in range(out.shape[0])]


def random_csr(rng: np.random.Generator, n: int, f: int, code_bits: int, coef_bits: int):
    deg = rng.integers(0, 6, n)
    indptr = np.r_[0, np.cumsum(deg)]
    indices = rng.integers(0, n, int(deg.sum()))
    lim = (1 << (code_bits - 1)) - 1
    codes = rng.integers(-lim, lim + 1, (n, f))
    coef = rng.integers(0, 1 << min(coef_bits, 10), indices.shape[0])  # large enough to saturate 16-bit sums
    return indptr, indices, codes, coef


async def run_rows(dut, indptr, indices, codes, coef, idle: float, backpressure: float, seed: int, tb=None):
    lanes, code_bits = int(dut.LANES.value), int(dut.CODE_BITS.value)
    psum_bits = int(dut.PSUM_BITS.value)
    fresh = tb is None
    tb = tb or TB(dut)
    rng = random.Random(seed)
    drv = StreamDriver(tb, "s_", pause_pattern(idle, rng))
    mon = StreamMonitor(tb, "m_", {"psum": ("m_psum", False)}, pause_pattern(backpressure, rng))
    if fresh:
        await tb.reset()
    beats, _ = edge_beats(indptr, indices, codes, coef, lanes, code_bits)
    expected = expected_rows(indptr, indices, codes, coef, lanes, psum_bits)
    await drv.send(beats)
    await mon.wait_for(len(expected), 20 * len(beats) + 20)
    actual = [unpack_lanes(b["psum"], psum_bits, lanes) for b in mon.beats]
    check_in_order(expected, actual, "aggregation rows")
    return drv, mon


@cocotb.test(timeout_time=300, timeout_unit="us")
@cocotb.parametrize(idle=[0.0, 0.3], backpressure=[0.0, 0.5])
async def aggregation_random(dut, idle, backpressure):
    """Random CSR (zero-degree rows, saturating sums) x idle input cycles x output back-pressure."""
    rng = np.random.default_rng(int(idle * 10 + backpressure * 100))
    csr = random_csr(rng, 30, 2 * int(dut.LANES.value) + 1, int(dut.CODE_BITS.value), int(dut.COEF_BITS.value))
    await run_rows(dut, *csr, idle, backpressure, seed=1)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def aggregation_gcn_layer(dut):
    """XW codes and GCN edge coefficients of a small layer built with quant.archs.gcn.integer's constants."""
    from workload import make_layer

    w = make_layer(seed=4)
    await run_rows(dut, w.indptr, w.indices, w.xw, w.coef, 0.2, 0.2, seed=4)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def aggregation_cycles(dut):
    """Without stalls the row stream takes hw.timing.aggregation_cycles(degrees) per lane group."""
    rng = np.random.default_rng(9)
    indptr, indices, codes, coef = random_csr(rng, 12, int(dut.LANES.value), int(dut.CODE_BITS.value), 8)
    drv, mon = await run_rows(dut, indptr, indices, codes, coef, 0.0, 0.0, seed=9)
    assert mon.handshakes[-1] - drv.handshakes[0] == timing.aggregation_cycles(np.diff(indptr).tolist())


@cocotb.test(timeout_time=300, timeout_unit="us")
async def aggregation_reset_mid_row(dut):
    """A reset inside a row discards the partial row; the next rows start from zero."""
    lanes, code_bits = int(dut.LANES.value), int(dut.CODE_BITS.value)
    tb = TB(dut)
    await tb.reset()
    rng = np.random.default_rng(13)
    indptr, indices, codes, coef = random_csr(rng, 10, lanes, code_bits, 8)
    beats, _ = edge_beats(indptr, indices, codes, coef, lanes, code_bits)
    drv = StreamDriver(tb, "s_")
    dut.m_ready.value = 1
    task = cocotb.start_soon(drv.send([{**b, "s_last": 0} for b in beats]))  # an endless row
    await tb.cycles(5)
    task.cancel()
    dut.s_valid.value = 0
    await tb.reset()
    assert int(dut.m_valid.value) == 0
    await run_rows(dut, indptr, indices, codes, coef, 0.0, 0.0, seed=13, tb=tb)


def test_aggregation_unit_lint(lint_rtl, rtl_sources):
    lint_rtl(rtl_sources(TOP), TOP)


def test_aggregation_unit(run_cocotb, rtl_sources):
    run_cocotb(TOP, rtl_sources(TOP), "test_aggregation_unit", {"LANES": 4, "PSUM_BITS": 16})


@pytest.mark.slow
@pytest.mark.parametrize("lanes,psum_bits", [(1, 16), (8, 12), (4, 32)])
def test_aggregation_unit_sweep(run_cocotb, rtl_sources, lanes, psum_bits):
    run_cocotb(TOP, rtl_sources(TOP), "test_aggregation_unit", {"LANES": lanes, "PSUM_BITS": psum_bits})
