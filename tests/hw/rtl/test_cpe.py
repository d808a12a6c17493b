"""cocotb testbench of hw/rtl/cpe.v (+ bse.v) against the golden combination sat32(x @ w^T) and hw.timing.

The golden row is ``quant.formats.fixed_point.saturate(x_codes @ w_codes.T, ACC_BITS)``, the first step of
``quant.archs.gcn.integer.gcn_layer_int``. Beats are the non-zero codes of a node (what the Adaptive-Package decoder
emits); a node without non-zeros produces no beat and no output row.
"""

from __future__ import annotations

import random

import cocotb
import numpy as np
import pytest
from rtl_tb import TB, StreamDriver, StreamMonitor, check_in_order, pack_lanes, pause_pattern, unpack_lanes

from hw import timing
from quant.formats.fixed_point import saturate
from quant.formats.packing import code_range
from quant.integer import ACC_BITS

TOP = "cpe"


def row_beats(x_codes, x_bits, w_codes, lanes: int, w_bits: int, group: int) -> tuple[list[dict], list[int], list]:
    """Node rows -> value beats for output-channel group ``group``; returns beats, rows with output, value bits.

    Shapes: x_codes (N, F_in), x_bits (N,), w_codes (F_out, F_in); channels [group*lanes, (group+1)*lanes).
    """
    f_out = w_codes.shape[0]
    w = np.zeros((lanes, w_codes.shape[1]), np.int64)
    chans = range(group * lanes, min((group + 1) * lanes, f_out))
    w[:len(chans)] = w_codes[list(chans)]
    beats, rows, bits = [], [], []
    for i in range(x_codes.shape[0]):
        nz = np.flatnonzero(x_codes[i])
        if nz.size == 0:
            continue
        rows.append(i)
        bits.append([int(x_bits[i])] * nz.size)
        for j, k in enumerate(nz):
            beats.append({"s_code": int(x_codes[i, k]) & 0xFF, "s_bits": int(x_bits[i]),
                          "s_w": pack_lanes(w[:, k], w_bits), "s_last": int(j == nz.size - 1)})
    return beats, rows, bits


def golden_rows(x_codes, w_codes, rows, lanes: int, group: int) -> list[list[int]]:
    acc = saturate(x_codes.astype(np.int64) @ w_codes.astype(np.int64).T, ACC_BITS)  # (N, F_out)
    padded = np.zeros((acc.shape[0], (group + 1) * lanes), np.int64)
    padded[:, :acc.shape[1]] = acc[:, :padded.shape[1]]
    return [[int(v) for v in padded[i, group * lanes:(group + 1) * lanes]] for i in rows]


def random_rows(rng: np.random.Generator, n: int, f_in: int, f_out: int):
    bits = rng.integers(1, 9, n)
    lim = np.array([code_range(int(b))[1] for b in bits])
    x = (rng.integers(-128, 128, (n, f_in)) % (lim[:, None] * 2 + 1)) - lim[:, None]
    x = x * (rng.random((n, f_in)) < 0.6)
    w = rng.integers(-7, 8, (f_out, f_in))
    return x.astype(np.int8), bits, w.astype(np.int8)


async def run_rows(dut, x, bits, w, idle: float, backpressure: float, seed: int, tb=None):
    lanes, w_bits, acc_bits = int(dut.LANES.value), int(dut.W_BITS.value), int(dut.ACC_BITS.value)
    fresh = tb is None
    tb = tb or TB(dut)
    rng = random.Random(seed)
    if fresh:
        await tb.reset()
    results = []
    for group in range(-(-w.shape[0] // lanes)):
        beats, rows, vbits = row_beats(x, bits, w, lanes, w_bits, group)
        drv = StreamDriver(tb, "s_", pause_pattern(idle, rng))
        mon = StreamMonitor(tb, "m_", {"acc": ("m_acc", False)}, pause_pattern(backpressure, rng))
        await drv.send(beats)
        await mon.wait_for(len(rows), 20 * sum(map(sum, vbits)) + 50)
        mon.stop()
        actual = [unpack_lanes(b["acc"], acc_bits, lanes) for b in mon.beats]
        check_in_order(golden_rows(x, w, rows, lanes, group), actual, f"C-PE rows (channel group {group})")
        results.append((drv, mon, vbits))
    return results


@cocotb.test(timeout_time=300, timeout_unit="us")
@cocotb.parametrize(idle=[0.0, 0.3], backpressure=[0.0, 0.5])
async def cpe_random(dut, idle, backpressure):
    """Random codes of every bitwidth 1..8 (with zeros) x idle x back-pressure."""
    rng = np.random.default_rng(int(idle * 10 + backpressure * 100))
    await run_rows(dut, *random_rows(rng, 16, 10, int(dut.LANES.value)), idle, backpressure, seed=2)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def cpe_gcn_layer(dut):
    """X codes and 4-bit weights of a small GCN layer (quant.integer.fake_quant), all channel groups."""
    from workload import make_layer

    wl = make_layer(seed=5)
    await run_rows(dut, wl.x_codes, wl.x_bits, wl.w_codes, 0.2, 0.3, seed=5)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def cpe_cycles(dut):
    """Back-to-back rows take hw.timing.cpe_stream_cycles; a single row hw.timing.cpe_row_cycles."""
    rng = np.random.default_rng(21)
    x, bits, w = random_rows(rng, 10, 8, int(dut.LANES.value))
    (drv, mon, vbits), = await run_rows(dut, x, bits, w, 0.0, 0.0, seed=21)
    assert mon.handshakes[-1] - drv.handshakes[0] == timing.cpe_stream_cycles(vbits)
    assert mon.handshakes[0] - drv.handshakes[0] == timing.cpe_row_cycles(vbits[0])


@cocotb.test(timeout_time=300, timeout_unit="us")
async def cpe_reset_mid_row(dut):
    """Reset in the middle of a row (mid bit-stream) discards it; later rows are exact."""
    rng = np.random.default_rng(8)
    x, bits, w = random_rows(rng, 6, 8, int(dut.LANES.value))
    tb = TB(dut)
    await tb.reset()
    beats, _, _ = row_beats(x, bits, w, int(dut.LANES.value), int(dut.W_BITS.value), 0)
    dut.m_ready.value = 1
    task = cocotb.start_soon(StreamDriver(tb, "s_").send([{**b, "s_last": 0} for b in beats]))
    await tb.cycles(9)
    task.cancel()
    dut.s_valid.value = 0
    await tb.reset()
    assert int(dut.m_valid.value) == 0
    await run_rows(dut, x, bits, w, 0.0, 0.0, seed=8, tb=tb)


def test_cpe_lint(lint_rtl, rtl_sources):
    lint_rtl(rtl_sources("cpe", "bse"), "cpe")
    lint_rtl(rtl_sources("bse"), "bse")


def test_cpe(run_cocotb, rtl_sources):
    run_cocotb(TOP, rtl_sources("cpe", "bse"), "test_cpe", {"LANES": 4})


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [1, 8, 32])
def test_cpe_lanes(run_cocotb, rtl_sources, lanes):
    run_cocotb(TOP, rtl_sources("cpe", "bse"), "test_cpe", {"LANES": lanes})
