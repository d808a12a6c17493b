"""hw/rtl/layer_engine.v (one GCN layer tile) bit-exact with quant.archs.gcn.integer and cycle-exact with hw/timing.py.

Tiles (hw/rtl/tile.py) are cut from (a) random integer GCN layers covering every output-stage configuration and
(b) the last layer of a real Cora GCN trained, quantized (A2Q) and exported in this test session by the project's
own pipeline steps. Expected values are gcn_layer_trace's on the whole graph (and, for Cora, the export's own
``psum``/``out`` arrays); the RTL cycles must equal ``hw.timing.layer_engine_cycles`` exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from workload import random_gcn_layer

from hw.rtl.tile import SOURCES, TileMismatch, check_tile, cut_tile, pick_rows, simulate_tile
from hw.timing import OUTPUT_STAGE_LATENCY_CYCLES, combination_cycles, layer_engine_cycles
from quant.archs.gcn.integer import gcn_graph
from quant.formats.adaptive_package import encode

TOP = "layer_engine"
ICARUS_FAST = ("test_layer_engine_random",)
MAX_NODES = 32  # node memory of every build: the random tiles share one, the Cora tile (64 features, W_BITS 8) its own
CONFIGS = [  # xw_scheme, q_aggregate, bias, relu, last layer
    ("node", False, True, True, False),
    ("channel", True, True, False, True),
    ("node", True, False, True, False),
    ("channel", False, False, False, True),
]


def _random_tile(seed, config, *, n=14, f_in=16, f_out=7, psum_bits=32, frac_bits=14):
    scheme, agg, bias, relu, last = config
    layer, x, graph = random_gcn_layer(seed, n, f_in, f_out, 2 * n, psum_bits=psum_bits, frac_bits=frac_bits,
                                       xw_scheme=scheme, agg=agg, bias=bias, relu=relu, last=last)
    return cut_tile(layer, x, graph, np.arange(n))


def test_layer_engine_lint(lint_rtl, rtl_sources):
    lint_rtl(rtl_sources(*SOURCES), TOP)
    lint_rtl(rtl_sources(*SOURCES), TOP, {"LANES": 1, "PSUM_BITS": 32, "FRAC_BITS": 14})
    lint_rtl(rtl_sources("output_stage"), "output_stage")


def test_tile_golden_is_the_integer_path():
    """The tile's own arithmetic (requantize(sat32(x w^T)), aggregate_int on the local CSR) equals the trace rows."""
    from quant.formats.fixed_point import aggregate_int, requantize, saturate

    tile = _random_tile(3, CONFIGS[1])
    acc = saturate(tile.x_codes.astype(np.int64) @ tile.w_codes.astype(np.int64).T, 32)
    np.testing.assert_array_equal(requantize(acc, tile.xw_mult, tile.xw_shift, tile.xw_bits), tile.xw)
    psum = aggregate_int(tile.indptr, tile.indices, tile.xw, tile.coef, tile.psum_bits)
    np.testing.assert_array_equal(psum, tile.psum)


def test_cycle_formula_pieces():
    """Without values the tile is aggregation + output stage; a single-value tile is load + bits + 3 + 1 + tail."""
    tile = _random_tile(0, CONFIGS[0])
    deg = tile.degrees()
    assert layer_engine_cycles(None, deg) == int(deg.sum()) - 1 + 1 + OUTPUT_STAGE_LATENCY_CYCLES
    codes = np.zeros((3, 4), dtype=np.int8)
    codes[1, 2] = 5
    stream = encode(codes, np.array([4, 4, 4]))
    assert combination_cycles(stream) == 1 + 4 + 3  # first word edge 0: value at 1, 4 bits, C-PE out + requant
    assert layer_engine_cycles(stream, [1, 2, 1]) == combination_cycles(stream) + 1 + 4 + OUTPUT_STAGE_LATENCY_CYCLES


def test_check_tile_names_the_mismatch():
    tile = _random_tile(1, CONFIGS[0])
    res = {"psum": tile.psum.tolist(), "out": tile.out.tolist(), "err": 0}
    check_tile(tile, res)
    res["out"][2][3] += 1
    with pytest.raises(TileMismatch, match=r"out\[row 2 .* lane 3\]"):
        check_tile(tile, res)


def test_layer_engine_random(sim, sim_exe, rtl_build_root, tmp_path):
    """Every output-stage configuration: bit-exact; cycles equal the formula exactly; stalls keep bit-exactness."""
    for i, config in enumerate(CONFIGS):
        tile = _random_tile(10 + i, config)
        res = simulate_tile(tile, sim=sim, build_root=rtl_build_root, work_dir=tmp_path / f"t{i}", max_nodes=MAX_NODES)
        check_tile(tile, res)
        assert res["cycles"] == tile.predicted_cycles(), f"config {config}"
    scheme, agg, bias, relu, last = CONFIGS[0]  # an all-zero input tile: no packages, aggregation starts at once
    layer, x, graph = random_gcn_layer(5, 10, 16, 7, 20, psum_bits=32, frac_bits=14, xw_scheme=scheme, agg=agg,
                                       bias=bias, relu=relu, last=last)
    tile = cut_tile(layer, np.zeros_like(x), graph, np.arange(10))
    assert tile.nz_rows == 0
    res = simulate_tile(tile, sim=sim, build_root=rtl_build_root, work_dir=tmp_path / "zero", max_nodes=MAX_NODES)
    check_tile(tile, res)
    assert res["cycles"] == tile.predicted_cycles()
    tile = _random_tile(20, CONFIGS[0])
    res = simulate_tile(tile, sim=sim, build_root=rtl_build_root, work_dir=tmp_path / "stall", idle=0.3,
                        backpressure=0.4, max_nodes=MAX_NODES, seed=7)
    check_tile(tile, res)
    assert res["cycles"] > tile.predicted_cycles()


def test_layer_engine_cora(sim, sim_exe, rtl_build_root, tmp_path, cora_export):
    """A tile of the real exported Cora GCN's last layer equals the export's arrays; cycles equal the formula."""
    q = cora_export
    model = q.to_quantized_gcn()
    li = len(model.layers) - 1
    layer, x = model.layers[li], q[f"layer{li}.x_codes"]
    graph = gcn_graph(q["graph.edge_index"], x.shape[0])
    rows = pick_rows(graph, MAX_NODES, max_rows=12, start=100)
    tile = cut_tile(layer, x, graph, rows)
    np.testing.assert_array_equal(tile.psum, q[f"layer{li}.psum"][rows])
    np.testing.assert_array_equal(tile.out, q[f"layer{li}.out"][rows])
    params = tile.parameters(MAX_NODES)  # the quantized preset: hidden 64, 8-bit weights
    assert (params["LANES"], params["MAX_FEATURES"], params["W_BITS"]) == (7, q.manifest["layers"][li]["in_dim"], 8)
    res = simulate_tile(tile, sim=sim, build_root=rtl_build_root, work_dir=tmp_path, max_nodes=MAX_NODES)
    check_tile(tile, res)
    assert res["cycles"] == tile.predicted_cycles()


@pytest.mark.slow
@pytest.mark.parametrize("lanes,n", [(4, 16), (1, 12)])
def test_layer_engine_narrow_psums(sim, sim_exe, rtl_build_root, tmp_path, lanes, n):
    """16-bit saturating partial sums (MEGA's width), other lane counts and node memories."""
    for i, config in enumerate(CONFIGS):
        tile = _random_tile(30 + i, config, n=n, f_in=8, f_out=lanes, psum_bits=16, frac_bits=8)
        res = simulate_tile(tile, sim=sim, build_root=rtl_build_root, work_dir=tmp_path / f"t{i}")
        check_tile(tile, res)
        assert res["cycles"] == tile.predicted_cycles()
