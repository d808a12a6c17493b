"""Round trips and bit layout of quant.formats.packing against an independent bit-by-bit reference."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quant.formats.packing import code_range, pack_codes, pack_rows, stored_bits, unpack_codes, unpack_node, unpack_rows


def random_codes(rng: np.random.Generator, bits: np.ndarray, f: int) -> np.ndarray:
    """(N, F) int8 codes uniformly inside every node's symmetric range."""
    qmax = np.array([code_range(int(b))[1] for b in bits], dtype=np.int64)
    return rng.integers(-qmax[:, None], qmax[:, None] + 1, size=(len(bits), f)).astype(np.int8)


def reference_stream(values: np.ndarray, width: int) -> np.ndarray:
    """Bit-by-bit LSB-first packing, written independently of the vectorised one."""
    out = bytearray(-(-len(values) * width // 8))
    for k, v in enumerate(values.tolist()):
        u = v & ((1 << width) - 1)
        for i in range(width):
            if u >> i & 1:
                pos = k * width + i
                out[pos // 8] |= 1 << (pos % 8)
    return np.frombuffer(bytes(out), dtype=np.uint8)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 30), f=st.integers(0, 17), seed=st.integers(0, 2**31 - 1))
def test_pack_unpack_rows_round_trip(n, f, seed):
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 9, size=n).astype(np.uint8)
    codes = random_codes(rng, bits, f)
    packed = pack_rows(codes, bits)
    assert np.array_equal(unpack_rows(packed), codes)
    # payload = sum over groups of ceil(n_w * F * w / 8)
    expected = sum(-(-int((stored_bits(bits) == w).sum()) * f * w // 8) for w in range(2, 9))
    assert packed.payload_bytes == expected
    for i in range(n):
        assert np.array_equal(unpack_node(packed, i), codes[i])


@pytest.mark.parametrize("width", range(1, 9))
def test_pack_codes_matches_bitwise_reference(width):
    rng = np.random.default_rng(width)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    values = rng.integers(lo, hi + 1, size=37).astype(np.int8)  # 37: not a multiple of 8
    stream = pack_codes(values, width)
    assert np.array_equal(stream, reference_stream(values, width))
    assert np.array_equal(unpack_codes(stream, width, values.size), values)


def test_layout_groups_by_bitwidth_in_node_order():
    codes = np.array([[1, -1], [0, 0], [3, -2], [-1, 1]], dtype=np.int8)
    bits = np.array([2, 1, 3, 2], dtype=np.uint8)
    p = pack_rows(codes, bits)
    # group 2: nodes 0, 3 -> 8 bits = 1 byte: codes 1,-1,-1,1 -> 01 11 11 01 (LSB first) = 0b01111101
    # group 3: node 2 -> 6 bits: 3 (011), -2 (110) -> 0b110011
    assert p.payload.tolist() == [0b01111101, 0b110011]
    assert p.group_byte_offsets.tolist() == [0, 0, 0, 1, 2, 2, 2, 2, 2, 2]
    assert p.bit_offsets.tolist() == [0, 0, 8, 4]


def test_zero_and_one_bit_nodes_store_nothing():
    codes = np.zeros((6, 50), dtype=np.int8)
    p = pack_rows(codes, np.array([0, 1, 0, 1, 1, 0]))
    assert p.payload_bytes == 0
    assert np.array_equal(unpack_rows(p), codes)


def test_out_of_range_codes_rejected():
    with pytest.raises(ValueError, match="node 1 .*3-bit range"):
        pack_rows(np.array([[1, 0], [4, 0]], dtype=np.int8), np.array([2, 3]))
    with pytest.raises(ValueError, match="outside the symmetric 1-bit"):
        pack_rows(np.array([[1]], dtype=np.int8), np.array([1]))
    with pytest.raises(ValueError, match="0..8"):
        pack_rows(np.zeros((1, 1), np.int8), np.array([9]))
    with pytest.raises(TypeError, match="int8"):
        pack_rows(np.zeros((1, 1), np.int32), np.array([2]))


def test_truncated_payload_rejected():
    rng = np.random.default_rng(0)
    bits = np.full(4, 5)
    p = pack_rows(random_codes(rng, bits, 9), bits)
    from dataclasses import replace
    with pytest.raises(ValueError, match="truncated"):
        unpack_rows(replace(p, payload=p.payload[:-1]))


def test_dequantised_packed_codes_equal_fake_quant_output():
    """Storage is lossless w.r.t. the quantizer: s * unpack(pack(q)) == fake-quant output, bit for bit."""
    from quant.integer import fake_quant

    rng = np.random.default_rng(11)
    x = rng.normal(size=(50, 13))
    bits = rng.integers(0, 9, size=50)
    step = np.abs(rng.normal(0.2, 0.1, size=50)) + 1e-3
    q = fake_quant(x, step[:, None], bits[:, None])  # float64 codes
    fq = q * step[:, None]  # A2Q fake-quant output
    restored = unpack_rows(pack_rows(q.astype(np.int8), bits)).astype(np.float64) * step[:, None]
    assert np.array_equal(restored, fq)
