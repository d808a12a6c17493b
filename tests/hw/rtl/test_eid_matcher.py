"""cocotb testbench of hw/rtl/eid_matcher.v (Condense-Edge eID FIFO matcher) and hw.timing.

Reference (hardware.md section 1.2, Condense-Edge as transcribed): per destination subgraph a sorted list of unique
cross-subgraph source IDs; while XW rows are produced in node order, each row ID is compared with every FIFO head
and a hit pops it. ``reference_hits`` is that definition in a few lines; the plan comes from quant.archs.gcn.integer's
GCN graph of a small layer, split into contiguous node ranges.
"""

from __future__ import annotations

import random

import cocotb
import numpy as np
import pytest
from rtl_tb import TB, StreamDriver, StreamMonitor, check_in_order, pause_pattern

from hw import timing

TOP = "eid_matcher"
ICARUS_FAST = ("test_eid_matcher",)


def condense_plan(indptr, indices, num_parts: int, depth: int) -> list[list[int]]:
    """Sorted unique cross-part sources of each destination part (contiguous node ranges), <= depth each."""
    n = indptr.shape[0] - 1
    part = np.arange(n) * num_parts // n  # (N,)
    dst = np.repeat(np.arange(n), np.diff(indptr))  # (E,)
    plan = []
    for p in range(num_parts):
        src = indices[(part[dst] == p) & (part[indices] != p)]
        plan.append(sorted(set(int(s) for s in src))[:depth])
    return plan


def reference_hits(plan: list[list[int]], ids: list[int]) -> list[int]:
    heads = [list(q) for q in plan]
    out = []
    for i in ids:
        mask = 0
        for k, q in enumerate(heads):
            if q and q[0] == i:
                q.pop(0)
                mask |= 1 << k
        out.append(mask)
    return out


async def run_plan(dut, plan, ids, idle: float, backpressure: float, seed: int):
    tb = TB(dut)
    rng = random.Random(seed)
    dut.ld_valid.value = 0
    dut.s_valid.value = 0  # every input driven before reset (Icarus starts at X, Verilator at 0)
    dut.m_ready.value = 0
    await tb.reset()
    await StreamDriver(tb, "ld_", pause_pattern(idle, rng)).send(
        [{"ld_fifo": k, "ld_id": i} for k, q in enumerate(plan) for i in q])
    drv = StreamDriver(tb, "s_", pause_pattern(idle, rng))
    mon = StreamMonitor(tb, "m_", {"id": ("m_id", False), "hit": ("m_hit", False)}, pause_pattern(backpressure, rng))
    await drv.send([{"s_id": i} for i in ids])
    await mon.wait_for(len(ids), 20 * len(ids) + 20)
    check_in_order([{"id": i, "hit": h} for i, h in zip(ids, reference_hits(plan, ids), strict=True)],
                   mon.beats, "eID matches")
    await tb.cycles(2)
    assert int(dut.nonempty.value) == 0, "every planned cross-subgraph source must be matched exactly once"
    return drv, mon


def gcn_plan(dut):
    from workload import make_layer

    w = make_layer(seed=8, num_nodes=40, num_edges=50)
    return condense_plan(w.indptr, w.indices, int(dut.NUM_FIFOS.value), int(dut.DEPTH.value)), list(range(40))


@cocotb.test(timeout_time=300, timeout_unit="us")
@cocotb.parametrize(idle=[0.0, 0.3], backpressure=[0.0, 0.5])
async def eid_gcn_graph(dut, idle, backpressure):
    """Condense plan of a small GCN graph; rows produced in node order; idle x back-pressure."""
    plan, ids = gcn_plan(dut)
    await run_plan(dut, plan, ids, idle, backpressure, seed=1)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def eid_random_with_repeats(dut):
    """Random sorted plans, IDs with repeats and misses."""
    rng = random.Random(4)
    k, depth = int(dut.NUM_FIFOS.value), int(dut.DEPTH.value)
    plan = [sorted(rng.sample(range(60), rng.randint(0, depth))) for _ in range(k)]
    ids = sorted(rng.choices(range(60), k=50) + [i for q in plan for i in q])
    await run_plan(dut, plan, ids, 0.2, 0.2, seed=4)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def eid_cycles(dut):
    """n IDs take hw.timing.eid_match_cycles(n) without stalls."""
    plan, ids = gcn_plan(dut)
    drv, mon = await run_plan(dut, plan, ids, 0.0, 0.0, seed=2)
    assert mon.handshakes[-1] - drv.handshakes[0] == timing.eid_match_cycles(len(ids))


def test_eid_matcher_lint(lint_rtl, rtl_sources):
    lint_rtl(rtl_sources(TOP), TOP)


def test_eid_matcher(run_cocotb, rtl_sources):
    run_cocotb(TOP, rtl_sources(TOP), "test_eid_matcher", {"NUM_FIFOS": 16, "DEPTH": 8})


@pytest.mark.slow
@pytest.mark.parametrize("fifos,depth", [(4, 4), (32, 16)])
def test_eid_matcher_sizes(run_cocotb, rtl_sources, fifos, depth):
    run_cocotb(TOP, rtl_sources(TOP), "test_eid_matcher", {"NUM_FIFOS": fifos, "DEPTH": depth})
