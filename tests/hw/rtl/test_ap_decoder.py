"""cocotb testbench of hw/rtl/ap_decoder.v against quant.formats.adaptive_package.decode_beats (bit-exact) and
hw.timing."""

from __future__ import annotations

import random

import cocotb
import numpy as np
import pytest
from rtl_tb import TB, StreamDriver, StreamMonitor, check_in_order, pause_pattern

from hw import timing
from quant.formats.adaptive_package import AdaptivePackageStream, decode_beats, encode
from quant.formats.packing import code_range

TOP = "ap_decoder"
FIELDS = {"node": ("m_node", False), "feat": ("m_feat", False), "code": ("m_code", True)}


def random_stream(rng: np.random.Generator, n: int, f: int, density: float) -> AdaptivePackageStream:
    """Random per-node bitwidths 0..8 (runs of equal bitwidth, all-zero nodes) encoded by
    quant.formats.adaptive_package."""
    bits = np.repeat(rng.integers(0, 9, n), rng.integers(1, 4, n))[:n]
    lim = np.array([code_range(int(b))[1] for b in bits])
    codes = rng.integers(-127, 128, (n, f)) % (2 * lim[:, None] + 1) - lim[:, None]
    codes = codes * (rng.random((n, f)) < density) * (rng.random((n, 1)) < 0.8)
    return encode(codes.astype(np.int8), bits)


def bitmap_rows(stream: AdaptivePackageStream) -> list[int]:
    return [int.from_bytes(row.tobytes(), "little") for row in stream.bitmap]


async def load(tb: TB, stream: AdaptivePackageStream) -> None:
    dut = tb.dut
    await tb.cycles(1)
    for i, row in enumerate(bitmap_rows(stream)):
        dut.bm_we.value, dut.bm_addr.value, dut.bm_row.value = 1, i, row
        await tb.cycles(1)
    dut.bm_we.value = 0
    dut.num_nodes.value = stream.num_nodes


def package_beats(stream: AdaptivePackageStream, num_values=None) -> list[dict]:
    nv = stream.num_values if num_values is None else num_values
    return [{"s_pkg_first_node": int(a), "s_pkg_first_value": int(b), "s_pkg_num_values": int(c)}
            for a, b, c in zip(stream.first_node, stream.first_value, nv, strict=True)]


async def decode(dut, stream, idle: float, backpressure: float, seed: int, tb=None):
    fresh = tb is None
    tb = tb or TB(dut)
    rng = random.Random(seed)
    if fresh:
        dut.bm_we.value = 0
        await tb.reset()
    await load(tb, stream)
    pkg = StreamDriver(tb, "s_pkg_", pause_pattern(idle, rng))
    words = StreamDriver(tb, "s_word_", pause_pattern(idle, rng))
    mon = StreamMonitor(tb, "m_", FIELDS, pause_pattern(backpressure, rng))
    expected = [{"node": a, "feat": b, "code": c} for a, b, c in decode_beats(stream)]
    cocotb.start_soon(pkg.send(package_beats(stream)))
    await words.send([{"s_word": int(w)} for w in stream.words])
    await mon.wait_for(len(expected), 30 * (len(expected) + stream.words.size) + 50)
    await tb.cycles(3)
    mon.stop()
    check_in_order(expected, mon.beats, "decoded beats")
    assert int(dut.err.value) == 0
    return tb, words, mon


@cocotb.test(timeout_time=300, timeout_unit="us")
@cocotb.parametrize(idle=[0.0, 0.3], backpressure=[0.0, 0.5])
async def decoder_random(dut, idle, backpressure):
    """Random sparse codes of bitwidths 0..8 (all three package lengths, spanning nodes) x idle x back-pressure."""
    n, f = int(dut.MAX_NODES.value), int(dut.MAX_FEATURES.value)
    rng = np.random.default_rng(int(idle * 10 + backpressure * 100))
    stream = random_stream(rng, n, f, 0.5)
    assert set(stream.package_counts().values()) != {0}
    await decode(dut, stream, idle, backpressure, seed=3)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def decoder_gcn_features(dut):
    """Input codes of a small GCN layer (quant.integer.fake_quant) encoded by adaptive_package.encode."""
    from workload import make_layer

    wl = make_layer(seed=6, num_nodes=int(dut.MAX_NODES.value), f_in=int(dut.MAX_FEATURES.value))
    await decode(dut, encode(wl.x_codes, wl.x_bits), 0.2, 0.2, seed=6)


@cocotb.test(timeout_time=300, timeout_unit="us")
async def decoder_cycles(dut):
    """Without stalls the stream takes hw.timing.decoder_stream_cycles (load words, beats, empty-row walks)."""
    rng = np.random.default_rng(17)
    stream = random_stream(rng, int(dut.MAX_NODES.value), int(dut.MAX_FEATURES.value), 0.3)
    _, words, mon = await decode(dut, stream, 0.0, 0.0, seed=17)
    assert mon.handshakes[-1] - words.handshakes[0] == timing.decoder_stream_cycles(stream)


async def abort(tb: TB, tasks) -> None:
    """Stop the stream drivers ``tasks`` mid-stream, drop both valids and reset."""
    for t in tasks:
        t.cancel()
    await tb.cycles(1)
    tb.dut.s_pkg_valid.value = 0
    tb.dut.s_word_valid.value = 0
    await tb.reset()


async def expect_error(dut, tb, stream, code: int, num_values=None, words=None) -> None:
    tasks = [cocotb.start_soon(StreamDriver(tb, "s_pkg_").send(package_beats(stream, num_values))),
             cocotb.start_soon(StreamDriver(tb, "s_word_").send([{"s_word": int(w)} for w in (words or stream.words)]))]
    dut.m_ready.value = 1
    for _ in range(40):
        await tb.cycles(1)
        if int(dut.err.value):
            break
    assert int(dut.err.value) == 1 and int(dut.err_code.value) == code, "decoder did not flag the bad package"
    await tb.cycles(5)
    assert int(dut.err.value) == 1 and int(dut.s_word_ready.value) == 0, "the error must be sticky until reset"
    await abort(tb, tasks)
    assert int(dut.err.value) == 0, "reset must clear the error"


@cocotb.test(timeout_time=300, timeout_unit="us")
async def decoder_errors_then_recover(dut):
    """Illegal mode 0b11, capacity overflow, values beyond the bitmap: error output, then reset recovers."""
    rng = np.random.default_rng(23)
    n, f = int(dut.MAX_NODES.value), int(dut.MAX_FEATURES.value)
    stream = random_stream(rng, n, f, 0.5)
    tb = TB(dut)
    dut.bm_we.value = 0
    await tb.reset()
    await load(tb, stream)
    bad = stream.words.copy()
    bad[0] |= np.uint64(0b11)  # mode 0b11 in the first header
    await expect_error(dut, tb, stream, 1, words=list(bad))
    await load(tb, stream)
    await expect_error(dut, tb, stream, 2, num_values=np.full_like(stream.num_values, 255))
    one = np.zeros((n, f), np.int8)
    one[0, 0] = 5
    single = encode(one, np.full(n, 8))  # one 64-bit package holding node 0's single value
    await load(tb, single)
    dut.num_nodes.value = 2  # the package claims 5 values, the bitmap ends after node 1 (empty)
    await expect_error(dut, tb, single, 3, num_values=np.full_like(single.num_values, 5))
    # a reset in the middle of a stream, then a clean stream
    await load(tb, stream)
    tasks = [cocotb.start_soon(StreamDriver(tb, "s_word_").send([{"s_word": int(w)} for w in stream.words])),
             cocotb.start_soon(StreamDriver(tb, "s_pkg_").send(package_beats(stream)))]
    await tb.cycles(4)
    await abort(tb, tasks)
    await decode(dut, random_stream(rng, n, f, 0.4), 0.1, 0.1, seed=23, tb=tb)


def test_ap_decoder_lint(lint_rtl, rtl_sources):
    lint_rtl(rtl_sources(TOP), TOP)


def test_ap_decoder(run_cocotb, rtl_sources):
    run_cocotb(TOP, rtl_sources(TOP), "test_ap_decoder",
               {"MAX_NODES": 48, "NODE_BITS": 6, "MAX_FEATURES": 16, "FEAT_BITS": 4})


@pytest.mark.slow
@pytest.mark.parametrize("nodes,features", [(16, 8), (64, 40)])
def test_ap_decoder_sizes(run_cocotb, rtl_sources, nodes, features):
    run_cocotb(TOP, rtl_sources(TOP), "test_ap_decoder",
               {"MAX_NODES": nodes, "NODE_BITS": 7, "MAX_FEATURES": features, "FEAT_BITS": 6})
