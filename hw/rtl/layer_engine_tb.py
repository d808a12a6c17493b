"""cocotb test of ``layer_engine.v`` on one tile (:mod:`hw.rtl.tile`): load constants, stream the tile, record.

Environment: ``TILE_NPZ`` (a saved :class:`hw.rtl.tile.Tile`), ``TILE_RESULT`` (JSON written here: ``out``,
``psum`` (R, L), ``cycles`` = rising edge of the last output row minus that of the first package word (or of the
first edge beat when the tile has no non-zero input), ``combination_cycles`` (first word to the last XW write),
``aggregation_output_cycles`` (first edge beat to the last output row), ``err``), ``TILE_IDLE`` / ``TILE_BACKPRESSURE``
(probabilities of idle input / output back-pressure cycles), ``TILE_SEED``. The comparison with the golden model
is done by the caller (:func:`hw.rtl.tile.check_tile`), so a mismatch is reported with its row and lane.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
from cocotb.triggers import FallingEdge

from hw.rtl.rtl_tb import TB, StreamDriver, StreamMonitor, pack_lanes, pause_pattern, unpack_lanes
from hw.rtl.tile import Tile


async def load_constants(tb: TB, tile: Tile) -> None:
    """Bitmap rows, weight columns and per-node constants, one address per cycle; then the layer configuration."""
    dut = tb.dut
    stream = tile.stream()
    n, f = tile.x_codes.shape
    rows = tile.num_rows
    await tb.cycles(1)
    for i in range(max(n, f)):
        dut.bm_we.value = int(i < n)
        dut.q_we.value = int(i < n)
        dut.o_we.value = int(i < n)
        dut.w_we.value = int(i < f)
        if i < n:
            dut.bm_addr.value = dut.q_addr.value = i
            dut.bm_row.value = int.from_bytes(stream.bitmap[i].tobytes(), "little")
            dut.q_mult.value = pack_lanes(tile.xw_mult[i], 31)
            dut.q_shift.value = pack_lanes(tile.xw_shift[i], 6)
            dut.q_bits.value = pack_lanes(tile.xw_bits[i], 4)
            r = min(i, rows - 1)  # output-stage constants of row i (rows are nodes 0..R-1)
            dut.q_agg_mult.value = pack_lanes(tile.agg_mult[r], 31)
            dut.q_agg_shift.value = pack_lanes(tile.agg_shift[r], 6)
            dut.q_agg_bits.value = int(tile.agg_bits[r])
            dut.q_bias.value = pack_lanes(tile.bias[r], 32)
            dut.q_out_mult.value = pack_lanes(tile.out_mult[r], 31)
            dut.q_out_shift.value = pack_lanes(tile.out_shift[r], 6)
            dut.q_out_bits.value = int(tile.out_bits[r])
        if i < f:
            dut.w_addr.value, dut.w_col.value = i, pack_lanes(tile.w_codes[:, i], tile.w_bits)
        await tb.cycles(1)
    dut.bm_we.value = dut.q_we.value = dut.o_we.value = dut.w_we.value = 0
    dut.xw_we.value = 0
    dut.bias_per_row.value = 1
    dut.bias_layer.value = 0
    dut.num_nodes.value = n
    dut.num_rows.value = tile.nz_rows
    dut.agg_en.value, dut.relu_en.value, dut.out_en.value = int(tile.agg_en), int(tile.relu_en), int(tile.out_en)
    await tb.cycles(1)


@cocotb.test(timeout_time=200, timeout_unit="ms")
async def run_tile(dut):
    """Stream one tile through the engine and record its outputs and cycles."""
    tile = Tile.load(os.environ["TILE_NPZ"])
    idle, bp = float(os.environ.get("TILE_IDLE", "0")), float(os.environ.get("TILE_BACKPRESSURE", "0"))
    rng = random.Random(int(os.environ.get("TILE_SEED", "1")))
    lanes, psum_bits = tile.w_codes.shape[0], tile.psum_bits
    tb = TB(dut)
    for s in ("s_pkg_valid", "s_word_valid", "s_edge_valid", "bm_we", "q_we", "o_we", "w_we", "xw_we"):
        getattr(dut, s).value = 0
    await tb.reset()
    await load_constants(tb, tile)
    stream = tile.stream()
    pkg = [{"s_pkg_first_node": int(a), "s_pkg_first_value": int(b), "s_pkg_num_values": int(c)}
           for a, b, c in zip(stream.first_node, stream.first_value, stream.num_values, strict=True)]
    edges = []
    for r in range(tile.num_rows):
        slots = range(int(tile.indptr[r]), int(tile.indptr[r + 1]))
        if len(slots) == 0:  # a zero-degree row is one beat with coefficient 0
            edges.append({"s_edge_coef": 0, "s_edge_src": 0, "s_edge_last": 1})
        for k, s in enumerate(slots):
            edges.append({"s_edge_coef": int(tile.coef[s]), "s_edge_src": int(tile.indices[s]),
                          "s_edge_last": int(k == len(slots) - 1)})
    fields = {"out": ("m_out", False), "psum": ("m_psum", False)}
    mon = StreamMonitor(tb, "m_", fields, pause_pattern(bp, rng))
    words = StreamDriver(tb, "s_word_", pause_pattern(idle, rng))
    edge_drv = StreamDriver(tb, "s_edge_", pause_pattern(idle, rng))
    if pkg:
        cocotb.start_soon(StreamDriver(tb, "s_pkg_", pause_pattern(idle, rng)).send(pkg))
        cocotb.start_soon(words.send([{"s_word": int(w)} for w in stream.words]))
    cocotb.start_soon(edge_drv.send(edges))
    xw_done: list[int] = []

    async def watch_xw() -> None:  # rising edge on which the last XW row was written
        while True:
            await FallingEdge(dut.clk)
            if int(dut.xw_rows.value) == tile.nz_rows:
                xw_done.append(tb.cycle)
                return

    if pkg:
        cocotb.start_soon(watch_xw())
    await mon.wait_for(tile.num_rows, 40 * (len(edges) + 10 * int(stream.words.shape[0]) + 64))
    first = words.handshakes[0] if pkg else edge_drv.handshakes[0]
    result = {"out": [unpack_lanes(b["out"], 32, lanes) for b in mon.beats],
              "psum": [unpack_lanes(b["psum"], psum_bits, lanes) for b in mon.beats],
              "cycles": mon.handshakes[tile.num_rows - 1] - first, "err": int(dut.err_code.value) if
              int(dut.err.value) else 0,
              "combination_cycles": xw_done[0] - first if xw_done else None,
              "aggregation_output_cycles": mon.handshakes[tile.num_rows - 1] - edge_drv.handshakes[0]}
    with open(os.environ["TILE_RESULT"], "w") as fh:
        json.dump(result, fh)
