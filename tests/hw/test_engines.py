"""Closed-form unit cases of the engine timing, against hw/timing.py (the RTL's formulas) and hand counts."""

import numpy as np
import pytest

from hw.aggregation import aggregation_cycles, tile_beats
from hw.combination import bitserial_cycles, mac_cycles
from hw.condense import condense_plan
from hw.config import AcceleratorConfig
from hw.decoder import package_decode_cycles
from hw.layout import BOUNDARY_RECORD_BYTES, feature_layout, package_lengths
from hw.timing import cpe_stream_cycles, decoder_package_cycles, decoder_skipped_rows, decoder_stream_cycles
from quant.formats.adaptive_package import encode
from quant.formats.fixed_point import csr_from_edge_index


def test_bitserial_single_cpe_equals_rtl_formula():
    cfg = AcceleratorConfig(num_comb_tiles=1, num_cpe_per_tile=1, num_bse_per_cpe=32)
    rows = [[3, 3, 3], [8], [2, 2]]
    work = sum(sum(r) for r in rows)
    assert bitserial_cycles(cfg, work, 32) == cpe_stream_cycles(rows)
    assert bitserial_cycles(cfg, work, 64) == cpe_stream_cycles(rows + rows)  # two passes over 32 BSEs


def test_lower_bits_never_increase_bitserial_work():
    cfg = AcceleratorConfig()
    assert [bitserial_cycles(cfg, 100 * b, 128) for b in range(1, 9)] == sorted(
        bitserial_cycles(cfg, 100 * b, 128) for b in range(1, 9))
    assert mac_cycles(cfg, 10, 64, 32) == -(-10 * 64 * 32 // 1024) + 32


def test_star_graph_aggregation():
    # star: hub 0 receives from 1..k, leaves receive only a self loop (GCN edges): hub degree k+1, leaves 1
    k, f = 40, 64
    src = np.r_[np.arange(1, k + 1), np.arange(k + 1)]
    dst = np.r_[np.zeros(k, np.int64), np.arange(k + 1)]
    indptr, _, _ = csr_from_edge_index(np.stack([src, dst]), k + 1)
    beats = tile_beats(np.diff(indptr), f, 16)
    assert beats == ((k + 1) + k) * 4  # every edge beat once per 16-feature chunk
    assert aggregation_cycles(beats, 1) == beats  # one group = hw.timing.aggregation_cycles
    assert aggregation_cycles(beats, 16) == -(-beats // 16)


def test_decoder_cycles_match_rtl_reference_stream():
    rng = np.random.default_rng(3)
    n, f = 60, 24
    bits = rng.integers(2, 9, n)
    qmax = (1 << (bits - 1)) - 1
    codes = (rng.integers(-qmax[:, None], qmax[:, None] + 1, (n, f)) * (rng.random((n, f)) < 0.3)).astype(np.int8)
    codes[5:9] = 0  # empty rows the decoder walks over
    ap = encode(codes, bits)
    nnz = np.count_nonzero(codes, axis=1)
    lengths = package_lengths(ap)
    per_pkg = package_decode_cycles(ap, lengths, nnz)
    want = [decoder_package_cycles(8 * int(lengths[k]), int(ap.num_values[k]), decoder_skipped_rows(
        nnz, int(ap.first_node[k]), int(ap.first_value[k]), int(ap.num_values[k]))) for k in range(ap.num_packages)]
    assert per_pkg.tolist() == want
    assert abs(int(per_pkg.sum()) - decoder_stream_cycles(ap)) <= 1  # the stream count ends on the last beat


def test_full_package_vs_padding_bytes():
    # one node, 37 values of 5 bits: a 192-bit package holds (192-5)//5 = 37 -> exactly one full package;
    # 38 values need a second (64-bit) package: (64-5)//5 = 11 >= 1
    for nvals, words in [(37, 3), (38, 4), (11, 1), (12, 2)]:
        codes = np.zeros((1, 40), np.int8)
        codes[0, :nvals] = 3
        lay = feature_layout(codes, np.array([5]), "adaptive_package")
        assert lay.stream["packages"].sum() == 8 * words
        assert lay.stream["boundary"].sum() == BOUNDARY_RECORD_BYTES * lay.packages.num_packages
        assert sum(int(v.sum()) for v in lay.stream.values()) == sum(lay.packages.nbytes.values())


def test_condense_plan_consumes_every_cross_pair_once():
    rng = np.random.default_rng(0)
    n, tn = 200, 32
    ei = rng.integers(0, n, (2, 1500))
    indptr, indices, _ = csr_from_edge_index(ei, n)
    plan = condense_plan(indptr, indices, tn)
    dst = np.repeat(np.arange(n), np.diff(indptr))
    want = {(int(s), int(d // tn)) for s, d in zip(indices, dst, strict=False) if s // tn != d // tn}
    pairs = set(zip(plan.pair_src.tolist(), plan.pair_dst_tile.tolist(), strict=True))
    assert pairs == want and plan.pair_src.size == len(want)
    key = plan.pair_dst_tile * n + plan.pair_src
    assert np.all(np.diff(key) > 0)  # contiguous write order: by subgraph, then ascending source ID
    groups = [range(g, min(plan.num_tiles, g + 4)) for g in range(0, plan.num_tiles, 4)]
    assert sum(plan.hits(t, g) for t in range(plan.num_tiles) for g in groups) == len(want)


@pytest.mark.parametrize("fmt", ["dense", "bitmap", "adaptive_package"])
def test_layout_bytes(fmt):
    codes = np.array([[0, 3, 0, -1], [0, 0, 0, 0], [1, 1, 1, 1]], np.int8)
    lay = feature_layout(codes, np.array([3, 2, 2]), fmt, 32 if fmt == "dense" else 0)
    if fmt == "dense":
        assert lay.row_bytes.tolist() == [16, 16, 16] and lay.nnz.tolist() == [4, 4, 4]
    else:
        assert lay.nnz.tolist() == [2, 0, 4] and lay.bit_work.tolist() == [6, 0, 8]
    if fmt == "bitmap":
        assert lay.row_bytes.tolist() == [3, 1, 5]
