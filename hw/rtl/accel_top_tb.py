"""cocotb test of ``accel_sim.v`` (``accel_top`` + ``mem_model``) on one layer image (:mod:`hw.rtl.top`).

Python is off the per-cycle path: the clock runs in the simulator (``impl="gpi"``), the memory is preloaded by
``$readmemh`` (``+MEMFILE``) and dumped by ``$writememh`` when ``done`` rises; the test resets, pulses ``start``,
awaits ``done`` (at most ``TOP_MAX_CYCLES`` cycles) and writes the counters, ``err`` and the wall time of the run
to ``TOP_RESULT`` (JSON). The caller reads the dump and compares (:func:`hw.rtl.top.check_layer`).
"""

from __future__ import annotations

import json
import os
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge, Timer, with_timeout

PERIOD_NS = 10
COUNTERS = ("cnt_total", "cnt_load", "cnt_comb", "cnt_agg", "cnt_xw", "cnt_wb", "cnt_wait", "cnt_tiles")


@cocotb.test()
async def run_layer(dut):
    """Reset, start, wait for done, record."""
    max_cycles = int(os.environ.get("TOP_MAX_CYCLES", "1000000"))
    dut.rst.value = 1
    dut.start.value = 0
    dut.layer_addr.value = 0
    cocotb.start_soon(Clock(dut.clk, PERIOD_NS, unit="ns", impl="gpi").start())
    for _ in range(3):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)
    dut.start.value = 1
    await FallingEdge(dut.clk)
    dut.start.value = 0
    t0 = time.perf_counter()
    await with_timeout(RisingEdge(dut.done), max_cycles * PERIOD_NS, "ns")
    run_s = time.perf_counter() - t0
    await Timer(3 * PERIOD_NS, "ns")  # the memory dumps its output region on the edge after done rises
    result = {k: int(getattr(dut, k).value) for k in COUNTERS}
    result["err"] = int(dut.err_code.value) if int(dut.err.value) else 0
    result["run_s"] = run_s
    with open(os.environ["TOP_RESULT"], "w") as fh:
        json.dump(result, fh)
