"""cocotb testbench of hw/rtl/layer_engine.v: one GCN layer tile end to end, bit-exact.

Golden: the XW codes ``requantize(sat32(x @ w^T), M, shift, xw_bits)`` and ``aggregate_int`` of
quant.integer_gnn's constants (tests/hw/rtl/workload.py); the input arrives as ``adaptive_package.encode``.
"""

from __future__ import annotations

import random

import cocotb
import pytest
from rtl_tb import TB, StreamDriver, StreamMonitor, check_in_order, pack_lanes, pause_pattern, unpack_lanes

from quant.adaptive_package import encode
from quant.fixed_point import aggregate_int

TOP = "layer_engine"
SOURCES = ["bse", "cpe", "requant", "aggregation_unit", "ap_decoder", "layer_engine"]


async def write_constants(tb: TB, wl, stream, lanes: int) -> None:
    dut = tb.dut
    n = wl.x_codes.shape[0]
    await tb.cycles(1)
    for i in range(n):
        dut.bm_we.value, dut.bm_addr.value = 1, i
        dut.bm_row.value = int.from_bytes(stream.bitmap[i].tobytes(), "little")
        dut.q_we.value, dut.q_addr.value, dut.q_bits.value = 1, i, int(wl.xw_bits[i])
        dut.q_mult.value = pack_lanes(wl.mult[i], 31)
        dut.q_shift.value = pack_lanes(wl.shift[i], 6)
        if i < wl.x_codes.shape[1]:
            dut.w_we.value, dut.w_addr.value, dut.w_col.value = 1, i, pack_lanes(wl.w_codes[:, i], 4)
        else:
            dut.w_we.value = 0
        await tb.cycles(1)
    dut.bm_we.value = dut.q_we.value = dut.w_we.value = 0
    dut.num_nodes.value = n


@cocotb.test(timeout_time=500, timeout_unit="us")
@cocotb.parametrize(idle=[0.0, 0.3], backpressure=[0.0, 0.4])
async def layer_gcn_tile(dut, idle, backpressure):
    """Adaptive-Package input -> XW -> aggregation equals quant's integer GCN layer, every element."""
    from workload import make_layer

    lanes, n, f = int(dut.LANES.value), int(dut.MAX_NODES.value), int(dut.MAX_FEATURES.value)
    psum_bits = int(dut.PSUM_BITS.value)
    wl = make_layer(seed=int(idle * 10 + backpressure * 100), num_nodes=n, f_in=f, f_out=lanes, num_edges=24)
    stream = encode(wl.x_codes, wl.x_bits)
    tb = TB(dut)
    rng = random.Random(5)
    for s in ("s_pkg_valid", "s_word_valid", "s_edge_valid", "bm_we", "q_we", "w_we"):
        getattr(dut, s).value = 0
    await tb.reset()
    await write_constants(tb, wl, stream, lanes)
    pkg = [{"s_pkg_first_node": int(a), "s_pkg_first_value": int(b), "s_pkg_num_values": int(c)}
           for a, b, c in zip(stream.first_node, stream.first_value, stream.num_values, strict=True)]
    cocotb.start_soon(StreamDriver(tb, "s_pkg_", pause_pattern(idle, rng)).send(pkg))
    await StreamDriver(tb, "s_word_", pause_pattern(idle, rng)).send([{"s_word": int(w)} for w in stream.words])
    rows = int((wl.x_codes != 0).any(axis=1).sum())
    for _ in range(5000):
        if int(dut.xw_rows.value) == rows:
            break
        await tb.cycles(1)
    assert int(dut.xw_rows.value) == rows, "combination phase did not finish"
    assert int(dut.err.value) == 0
    mon = StreamMonitor(tb, "m_", {"psum": ("m_psum", False)}, pause_pattern(backpressure, rng))
    edges = []
    for i in range(n):
        slots = range(wl.indptr[i], wl.indptr[i + 1])
        for k, s in enumerate(slots):
            edges.append({"s_edge_coef": int(wl.coef[s]), "s_edge_src": int(wl.indices[s]),
                          "s_edge_last": int(k == len(slots) - 1)})
    await StreamDriver(tb, "s_edge_", pause_pattern(idle, rng)).send(edges)
    await mon.wait_for(n, 20 * len(edges) + 50)
    expected = aggregate_int(wl.indptr, wl.indices, wl.xw, wl.coef, psum_bits)  # (N, LANES)
    check_in_order([[int(v) for v in row] for row in expected],
                   [unpack_lanes(b["psum"], psum_bits, lanes) for b in mon.beats], "layer engine rows")


def test_layer_engine_lint(lint_rtl, rtl_sources):
    lint_rtl(rtl_sources(*SOURCES), TOP)


@pytest.mark.slow
def test_layer_engine(run_cocotb, rtl_sources):
    run_cocotb(TOP, rtl_sources(*SOURCES), "test_layer_engine",
               {"LANES": 4, "MAX_NODES": 16, "NODE_BITS": 4, "MAX_FEATURES": 8, "FEAT_BITS": 3})
