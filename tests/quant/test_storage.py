"""Byte accounting equals hand-computed formulas on tiny inputs."""

import numpy as np
import pytest

from quant.formats.storage import csr_arrays, index_dtype, measure_adaptive_package, measure_storage


def test_index_dtype_smallest_fit():
    assert index_dtype(0) == np.uint8 and index_dtype(255) == np.uint8
    assert index_dtype(256) == np.uint16 and index_dtype(65535) == np.uint16
    assert index_dtype(65536) == np.uint32 and index_dtype(2**32) == np.uint64


def test_csr_arrays_values_and_widths():
    ei = np.array([[0, 2, 1, 0], [1, 1, 2, 0]])  # dst-major: row0 {0}, row1 {0, 2}, row2 {1}
    indptr, indices = csr_arrays(ei, 3)
    assert indptr.tolist() == [0, 1, 3, 4] and indices.tolist() == [0, 0, 2, 1]
    assert indptr.dtype == np.uint8 and indices.dtype == np.uint8
    big_indptr, big_indices = csr_arrays(np.array([[299], [0]]), 300)
    assert big_indices.dtype == np.uint16 and big_indptr.dtype == np.uint8


def test_measure_storage_hand_computed():
    # 5 nodes x 3 features; bits 2, 0, 1, 3, 8
    codes = np.zeros((5, 3), np.int8)
    codes[0] = [1, -1, 0]
    codes[3] = [3, -3, 2]
    codes[4] = [100, -127, 5]
    bits = np.array([2, 0, 1, 3, 8])
    ei = np.array([[0, 1, 2, 3, 4], [1, 2, 3, 4, 0]])
    w = np.ones((2, 3), np.int8)
    r = measure_storage(codes=codes, bits=bits, edge_index=ei, w_codes=w, w_bits=4, step_dtype=np.float16)
    # features: 2-bit group 1 node * 3 * 2 = 6 bits -> 1 B; 3-bit 9 bits -> 2 B; 8-bit 24 bits -> 3 B
    assert r.feature_bytes == 1 + 2 + 3
    assert r.bits_table_bytes == 3  # ceil(5 / 2) nibbles
    assert r.group_table_bytes == 10 * 4
    assert r.feature_step_bytes == 5 * 2
    assert r.weight_bytes == 3  # 6 codes * 4 bits
    assert r.weight_step_bytes == 2 * 2
    assert r.adjacency_bytes == 6 * 1 + 5 * 1  # uint8 indptr (N+1) + uint8 indices (E)
    assert r.fp32_feature_bytes == 60 and r.fp32_weight_bytes == 24
    assert r.avg_bits == pytest.approx(14 / 5)
    assert r.features_only_ratio == pytest.approx(32 / 2.8)
    assert r.measured_features_ratio == pytest.approx(10.0)
    total = 6 + 3 + (3 + 40 + 10 + 4) + 11
    assert r.total_bytes == total and r.all_in_ratio == pytest.approx((60 + 24 + 11) / total)
    d = r.to_dict()
    assert d["metadata_bytes"] == 57 and d["total_bytes"] == total


def test_measure_storage_float32_steps_no_weights():
    codes = np.zeros((4, 8), np.int8)
    r = measure_storage(codes=codes, bits=np.full(4, 4), edge_index=np.zeros((2, 0), np.int64),
                        step_dtype=np.float32)
    assert r.feature_bytes == 4 * 8 * 4 // 8 and r.feature_step_bytes == 16
    assert r.weight_bytes == 0 and r.adjacency_bytes == 5  # indptr only, uint8
    assert r.measured_features_ratio == pytest.approx(8.0) == r.features_only_ratio


def test_measure_adaptive_package_hand_computed():
    # node 0: 3 bits, non-zeros 3, -1; node 1: zeros; node 2: 3 bits, one non-zero -> one 64-bit package (3 values)
    codes = np.array([[3, 0, -1], [0, 0, 0], [0, 2, 0]], dtype=np.int8)
    m = measure_adaptive_package(codes, np.array([3, 5, 3]))
    assert m["packages_bytes"] == 8 and m["bitmap_bytes"] == 3  # 3 nodes x ceil(3 / 8) bytes
    assert m["boundary_bytes"] == 4 + 4 + 1  # first_node u32, first_value u32, num_values u8 per package
    assert m["total_bytes"] == 20 and m["packages_64"] == 1 and m["packages_192"] == 0
    assert m["bits_per_code"] == pytest.approx(8 * 20 / 9)


def test_fixed_point_storage_counts_whole_words_and_no_bitwidth_tables():
    from quant.formats.storage import fixed_point_storage, measure_fixed_point

    codes = np.arange(-6, 6).reshape(4, 3)
    ei = np.array([[0, 1, 2], [1, 2, 3]])
    w = np.ones((2, 3), np.int8)
    r = measure_fixed_point(codes=codes, bits=16, edge_index=ei, w_codes=w, w_bits=4)
    assert r.feature_bytes == 4 * 3 * 2 and r.bits_table_bytes == r.group_table_bytes == 0
    assert r.feature_step_bytes == 4 * 2 and r.avg_bits == 16.0
    plain = measure_storage(codes=np.zeros((4, 3), np.int8), bits=np.full(4, 4), edge_index=ei, w_codes=w, w_bits=4)
    assert (r.weight_bytes, r.weight_step_bytes, r.adjacency_bytes) == (plain.weight_bytes, plain.weight_step_bytes,
                                                                        plain.adjacency_bytes)
    assert measure_fixed_point(codes=codes, bits=12, edge_index=ei).feature_bytes == 24  # 12 bits: int16 words
    assert measure_fixed_point(codes=codes, bits=17, edge_index=ei).feature_bytes == 48  # int32 words
    row = fixed_point_storage(codes, np.full(4, 16), ei, w, 4, layer=0, tensor="hidden", x_scheme="fixed")
    assert row["tensor"] == "hidden" and row["feature_bytes"] == 24 and row["adaptive_package"] is None
    with pytest.raises(ValueError, match="one width"):
        fixed_point_storage(codes, np.array([16, 16, 8, 16]), ei)
