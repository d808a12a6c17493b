"""Reusable cocotb 2.x verification components for the hw/rtl/ testbenches: TB, stream driver, monitor, scoreboard.

Every stream is valid/ready. All testbench activity happens at the *falling* edge: a driver/monitor writes its
outputs there, waits for ``ReadOnly`` (combinational ``ready`` settled) and decides whether the coming rising edge
is a handshake. Each handshake is stamped with the index of the rising edge on which it happens (``TB.cycle``), so
cycle counts compare exactly with ``hw/timing.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge


def pack_lanes(values: Sequence[int], width: int) -> int:
    """Lane ``i`` of a flattened vector occupies bits ``[i*width, (i+1)*width)`` (two's complement)."""
    mask = (1 << width) - 1
    return sum((int(v) & mask) << (i * width) for i, v in enumerate(values))


def unpack_lanes(word: int, width: int, count: int, signed: bool = True) -> list[int]:
    """Inverse of :func:`pack_lanes`."""
    out = []
    for i in range(count):
        v = (word >> (i * width)) & ((1 << width) - 1)
        if signed and v >> (width - 1):
            v -= 1 << width
        out.append(v)
    return out


def bit(value) -> int:
    """A 1-bit handle value as 0/1; X/Z (Icarus before reset) count as 0."""
    try:
        return int(value)
    except ValueError:
        return 0


def pause_pattern(prob: float, rng: random.Random) -> Callable[[], bool]:
    """True with probability ``prob`` each call: an idle cycle (driver) or back-pressure cycle (monitor)."""
    return lambda: prob > 0 and rng.random() < prob


class TB:
    """Owns the clock, the synchronous reset and the rising-edge counter of one DUT."""

    def __init__(self, dut, period_ns: int = 10) -> None:
        self.dut = dut
        self.cycle = 0
        cocotb.start_soon(Clock(dut.clk, period_ns, unit="ns").start())
        cocotb.start_soon(self._count())

    async def _count(self) -> None:
        while True:
            await RisingEdge(self.dut.clk)
            self.cycle += 1

    async def reset(self, cycles: int = 2) -> None:
        await FallingEdge(self.dut.clk)
        self.dut.rst.value = 1
        for _ in range(cycles):
            await FallingEdge(self.dut.clk)
        self.dut.rst.value = 0

    async def cycles(self, n: int) -> None:
        for _ in range(n):
            await FallingEdge(self.dut.clk)


class StreamDriver:
    """Drives ``<prefix>valid`` and the named data signals; a beat is a ``{signal: int}`` dict.

    ``idle`` (a zero-argument callable) inserts idle cycles between beats. ``handshakes`` lists the cycle of every
    accepted beat.
    """

    def __init__(self, tb: TB, prefix: str, idle: Callable[[], bool] | None = None) -> None:
        self.tb, self.dut = tb, tb.dut
        self.valid = getattr(self.dut, f"{prefix}valid")
        self.ready = getattr(self.dut, f"{prefix}ready")
        self.idle = idle or (lambda: False)
        self.handshakes: list[int] = []
        self.valid.value = 0

    async def send(self, beats: Sequence[dict[str, int]]) -> None:
        for beat in beats:
            await FallingEdge(self.dut.clk)
            while self.idle():
                self.valid.value = 0
                await FallingEdge(self.dut.clk)
            for name, value in beat.items():
                getattr(self.dut, name).value = int(value)
            self.valid.value = 1
            while True:
                await ReadOnly()
                if bit(self.ready.value):
                    self.handshakes.append(self.tb.cycle + 1)
                    break
                await FallingEdge(self.dut.clk)
        await FallingEdge(self.dut.clk)
        self.valid.value = 0


class StreamMonitor:
    """Drives ``<prefix>ready`` (with optional back-pressure) and records ``{field: int}`` on every handshake.

    ``fields`` maps a name to ``(signal_name, signed)``. ``beats`` and ``handshakes`` grow as the DUT emits.
    """

    def __init__(self, tb: TB, prefix: str, fields: dict[str, tuple[str, bool]],
                 backpressure: Callable[[], bool] | None = None) -> None:
        self.tb, self.dut = tb, tb.dut
        self.valid = getattr(self.dut, f"{prefix}valid")
        self.ready = getattr(self.dut, f"{prefix}ready")
        self.fields = fields
        self.backpressure = backpressure or (lambda: False)
        self.beats: list[dict[str, int]] = []
        self.handshakes: list[int] = []
        self.ready.value = 0
        self._task = cocotb.start_soon(self._run())

    async def _run(self) -> None:
        while True:
            await FallingEdge(self.dut.clk)
            ready = 0 if self.backpressure() else 1
            self.ready.value = ready
            await ReadOnly()
            if ready and bit(self.valid.value):
                beat = {}
                for name, (sig, signed) in self.fields.items():
                    v = getattr(self.dut, sig).value
                    beat[name] = v.to_signed() if signed else v.to_unsigned()
                self.beats.append(beat)
                self.handshakes.append(self.tb.cycle + 1)

    def stop(self) -> None:
        """Stop sampling (a later monitor may take over the same port)."""
        self._task.cancel()

    async def wait_for(self, count: int, timeout_cycles: int) -> None:
        """Wait until ``count`` beats arrived; fail (never hang) after ``timeout_cycles``."""
        for _ in range(timeout_cycles):
            if len(self.beats) >= count:
                return
            await FallingEdge(self.dut.clk)
        raise AssertionError(f"timeout: {len(self.beats)} of {count} output beats after {timeout_cycles} cycles")


def check_in_order(expected: Sequence, actual: Sequence, what: str) -> None:
    """Scoreboard: same count, and every element equal, reporting the first mismatch."""
    assert len(actual) == len(expected), f"{what}: {len(actual)} outputs, expected {len(expected)}"
    for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
        assert e == a, f"{what}: element {i} is {a}, expected {e}"
