"""cocotb testbench of hw/rtl/requant.v against quant.formats.fixed_point.requantize (bit-exact) and hw.timing."""

from __future__ import annotations

import random

import cocotb
import numpy as np
import pytest
from cocotb.triggers import FallingEdge
from rtl_tb import TB, StreamDriver, StreamMonitor, check_in_order, pause_pattern

from hw import timing
from quant.formats.fixed_point import requantize

TOP = "requant"
ICARUS_FAST = ("test_requant",)


def random_elements(rng: random.Random, n: int, out_bits_max: int) -> list[dict[str, int]]:
    """Random accumulators and constants, with extremes (+-2^31, shift 0/62/63, bits 0/1) mixed in."""
    out = []
    for _ in range(n):
        acc = rng.choice([rng.randint(-(1 << 31), (1 << 31) - 1), rng.randint(-300, 300), -(1 << 31),
                          (1 << 31) - 1, 0])
        mult = rng.choice([rng.randint(1 << 30, (1 << 31) - 1), 1 << 30, rng.randint(0, (1 << 31) - 1)])
        shift = rng.choice([rng.randint(28, 45), 0, 1, 62, 63, rng.randint(0, 63)])
        out.append({"acc": acc, "mult": mult, "shift": shift, "bits": rng.randint(0, out_bits_max)})
    return out


def golden(elements: list[dict[str, int]]) -> list[int]:
    acc = np.array([e["acc"] for e in elements], dtype=np.int64)
    return [int(v) for v in requantize(acc, np.array([e["mult"] for e in elements]),
                                       np.array([e["shift"] for e in elements]),
                                       np.array([e["bits"] for e in elements]))]


def workload_elements(seed: int) -> list[dict[str, int]]:
    from workload import make_layer

    w = make_layer(seed)
    n, f = w.acc.shape
    bits = np.broadcast_to(w.xw_bits[:, None], (n, f))
    return [{"acc": int(a), "mult": int(m), "shift": int(s), "bits": int(b)}
            for a, m, s, b in zip(w.acc.ravel(), w.mult.ravel(), w.shift.ravel(), bits.ravel(), strict=True)]


def beats(elements, acc_bits: int):
    return [{"s_acc": e["acc"] & ((1 << acc_bits) - 1), "s_mult": e["mult"], "s_shift": e["shift"],
             "s_bits": e["bits"]} for e in elements]


async def run_stream(dut, elements, idle: float, backpressure: float, seed: int):
    tb = TB(dut)
    rng = random.Random(seed)
    drv = StreamDriver(tb, "s_", pause_pattern(idle, rng))
    mon = StreamMonitor(tb, "m_", {"code": ("m_code", True)}, pause_pattern(backpressure, rng))
    await tb.reset()
    await drv.send(beats(elements, int(dut.ACC_BITS.value)))
    await mon.wait_for(len(elements), 20 * len(elements) + 20)
    return tb, drv, mon


@cocotb.test(timeout_time=300, timeout_unit="us")
@cocotb.parametrize(idle=[0.0, 0.3], backpressure=[0.0, 0.4])
async def requant_random(dut, idle, backpressure):
    """Random and extreme accumulators; idle input cycles x output back-pressure."""
    rng = random.Random(int(idle * 10 + backpressure * 100))
    elements = random_elements(rng, 300, int(dut.OUT_BITS.value))
    _, _, mon = await run_stream(dut, elements, idle, backpressure, seed=7)
    check_in_order(golden(elements), [b["code"] for b in mon.beats], "requant codes")


@cocotb.test(timeout_time=300, timeout_unit="us")
async def requant_gcn_layer(dut):
    """XW requantization of a small GCN layer built by quant.archs.gcn.integer's constants."""
    elements = workload_elements(seed=3)
    for e in elements:  # a narrower OUT_BITS build only takes bitwidths it can hold
        e["bits"] = min(e["bits"], int(dut.OUT_BITS.value))
    _, _, mon = await run_stream(dut, elements, 0.2, 0.2, seed=3)
    check_in_order(golden(elements), [b["code"] for b in mon.beats], "requant codes (GCN layer)")


@cocotb.test(timeout_time=300, timeout_unit="us")
async def requant_cycles(dut):
    """Without stalls, n elements take hw.timing.requant_cycles(n) from first input to last output."""
    elements = random_elements(random.Random(5), 37, int(dut.OUT_BITS.value))
    _, drv, mon = await run_stream(dut, elements, 0.0, 0.0, seed=5)
    assert mon.handshakes[-1] - drv.handshakes[0] == timing.requant_cycles(len(elements))
    assert mon.handshakes[0] - drv.handshakes[0] == timing.REQUANT_LATENCY_CYCLES


@cocotb.test(timeout_time=300, timeout_unit="us")
async def requant_reset_mid_stream(dut):
    """A reset in the middle of a stream empties the pipeline; the next stream is processed exactly."""
    tb = TB(dut)
    rng = random.Random(11)
    drv = StreamDriver(tb, "s_")
    await tb.reset()
    first = random_elements(rng, 50, int(dut.OUT_BITS.value))
    dut.m_ready.value = 0  # fill the pipeline, then reset while it is stalled
    task = cocotb.start_soon(drv.send(beats(first, int(dut.ACC_BITS.value))))
    await tb.cycles(6)
    task.cancel()
    dut.s_valid.value = 0
    await tb.reset()
    await FallingEdge(dut.clk)
    assert int(dut.m_valid.value) == 0, "m_valid must drop on reset"
    mon = StreamMonitor(tb, "m_", {"code": ("m_code", True)})
    second = random_elements(rng, 40, int(dut.OUT_BITS.value))
    await StreamDriver(tb, "s_").send(beats(second, int(dut.ACC_BITS.value)))
    await mon.wait_for(len(second), 200)
    await tb.cycles(5)
    check_in_order(golden(second), [b["code"] for b in mon.beats], "requant codes after reset")


def test_requant_lint(lint_rtl, rtl_sources):
    lint_rtl(rtl_sources(TOP), TOP)


def test_requant(run_cocotb, rtl_sources):
    run_cocotb(TOP, rtl_sources(TOP), "test_requant", {"ACC_BITS": 32, "OUT_BITS": 8})


@pytest.mark.slow
@pytest.mark.parametrize("out_bits", [4, 6])
def test_requant_narrow_output(run_cocotb, rtl_sources, out_bits):
    run_cocotb(TOP, rtl_sources(TOP), "test_requant", {"ACC_BITS": 32, "OUT_BITS": out_bits})
