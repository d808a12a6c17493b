"""Adaptive-Package codec: round trips, beat order, the documented layout, and corrupted streams."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quant.formats.adaptive_package import HEADER_BITS, capacity, decode, decode_beats, encode
from quant.formats.packing import code_range


def random_codes(rng, bits, f, density):
    qmax = np.array([code_range(int(b))[1] for b in bits], dtype=np.int64)
    codes = rng.integers(-qmax[:, None], qmax[:, None] + 1, size=(len(bits), f))
    return (codes * (rng.random((len(bits), f)) < density)).astype(np.int8)


def beats_to_codes(stream):
    out = np.zeros((stream.num_nodes, stream.num_features), dtype=np.int8)
    beats = list(decode_beats(stream))
    for node, feat, code in beats:
        out[node, feat] = code
    return out, beats


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 25), f=st.integers(0, 70), seed=st.integers(0, 2**31 - 1),
       density=st.sampled_from([0.0, 0.1, 0.5, 1.0]), runs=st.booleans())
def test_round_trip_and_beats(n, f, seed, density, runs):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 9, size=n)
    if runs:  # long same-bitwidth runs -> nodes spanning several packages
        bits = np.sort(bits)
    codes = random_codes(rng, bits, f, density)
    stream = encode(codes, bits)
    assert np.array_equal(decode(stream), codes)
    out, beats = beats_to_codes(stream)
    assert np.array_equal(out, codes)
    # beats = non-zeros in node-major, feature-minor order (the hardware order)
    node, feat = np.nonzero(codes)
    assert [(b[0], b[1]) for b in beats] == list(zip(node.tolist(), feat.tolist(), strict=True))
    # accounting: packages are exactly the announced lengths, each value slot within capacity
    assert stream.num_values.sum() == np.count_nonzero(codes)
    counts = stream.package_counts()
    assert 64 * counts[64] + 128 * counts[128] + 192 * counts[192] == 64 * stream.words.size


def test_hand_built_stream():
    # node 0: 3 bits, values 3, -1 (features 0, 2); node 1 all zero (bit 5); node 2: 3 bits, value 2 (feature 1)
    codes = np.array([[3, 0, -1], [0, 0, 0], [0, 2, 0]], dtype=np.int8)
    stream = encode(codes, np.array([3, 5, 3]))
    assert stream.num_packages == 1
    header = 0b00 | ((3 - 1) << 2)  # 64-bit package, bitwidth field b - 1 = 2
    vals = (3 | (0b111 << 3) | (2 << 6)) << HEADER_BITS  # 3-bit two's complement, LSB first
    assert stream.words.tolist() == [header | vals]
    assert stream.bitmap[:, 0].tolist() == [0b101, 0, 0b010]
    assert (stream.first_node.tolist(), stream.first_value.tolist(), stream.num_values.tolist()) == ([0], [0], [3])


def test_package_length_choice_and_spanning():
    # one 2-bit node with 150 non-zeros: capacity 29/61/93 -> 192 (93) + 128 (57)
    f = 150
    codes = np.ones((1, f), dtype=np.int8)
    stream = encode(codes, np.array([2]))
    assert capacity(192, 2) == 93 and capacity(128, 2) == 61
    assert stream.package_counts() == {64: 0, 128: 1, 192: 1}
    assert stream.num_values.tolist() == [93, 57]
    assert stream.first_node.tolist() == [0, 0] and stream.first_value.tolist() == [0, 93]
    assert np.array_equal(decode(stream), codes)


def test_bitwidth_change_closes_package():
    codes = np.array([[1], [1], [1]], dtype=np.int8)
    stream = encode(codes, np.array([2, 3, 2]))
    assert stream.num_packages == 3 and stream.num_values.tolist() == [1, 1, 1]
    same = encode(codes, np.array([2, 2, 2]))
    assert same.num_packages == 1


def test_illegal_mode_names_package():
    rng = np.random.default_rng(3)
    bits = np.array([2, 4, 6, 8] * 3)
    stream = encode(random_codes(rng, bits, 40, 0.8), bits)
    words = stream.words.copy()
    # the third package starts after the first two; find its word by walking the modes
    w = 0
    for _ in range(2):
        w += int(words[w] & np.uint64(3)) + 1
    words[w] |= np.uint64(0b11)
    bad = replace(stream, words=words)
    with pytest.raises(ValueError, match="package 2 .*illegal mode"):
        decode(bad)
    with pytest.raises(ValueError, match="package 2 .*illegal mode"):
        list(decode_beats(bad))


def test_truncated_streams_rejected():
    rng = np.random.default_rng(4)
    bits = np.full(6, 5)
    stream = encode(random_codes(rng, bits, 60, 0.9), bits)
    with pytest.raises(ValueError, match="truncated|trailing"):
        decode(replace(stream, words=stream.words[:-1]))
    with pytest.raises(ValueError, match="truncated|lengths"):
        decode(replace(stream, num_values=stream.num_values[:-1]))
    with pytest.raises(ValueError, match="bitmap"):
        decode(replace(stream, bitmap=stream.bitmap[:-1]))


def test_out_of_range_rejected():
    with pytest.raises(ValueError, match="node 0"):
        encode(np.array([[2]], dtype=np.int8), np.array([2]))


def test_corrupted_boundary_and_header_rejected():
    codes = np.ones((1, 100), dtype=np.int8)  # one 2-bit node spanning a 192-bit (93) and a 64-bit (7) package
    stream = encode(codes, np.array([2]))
    assert stream.num_values.tolist() == [93, 7] and stream.words.size == 4
    with pytest.raises(ValueError, match="package 1 starts at value rank 90"):
        decode(replace(stream, first_value=np.array([0, 90], dtype=np.uint32)))
    words = stream.words.copy()
    words[3] = (words[3] & ~np.uint64(0b11100)) | np.uint64((3 - 1) << 2)  # package 1 claims 3 bits
    with pytest.raises(ValueError, match="package 1 changes the bitwidth inside a node"):
        decode(replace(stream, words=words))
    with pytest.raises(ValueError, match="truncated"):
        list(decode_beats(replace(stream, words=stream.words[:-1])))
