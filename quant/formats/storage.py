"""Honest byte accounting of a quantized GNN: measured buffer sizes, not ``N * F * avg_bits / 8``.

Every count is the ``nbytes`` of an array that the exporter would actually write:

* features: the :func:`quant.formats.packing.pack_rows` payload (groups byte-aligned, 0/1-bit nodes store nothing);
* feature metadata: the per-node bitwidth table packed two nibbles per byte (``ceil(N/2)`` bytes), the group table
  (``MAX_BITS + 2`` uint32 byte offsets) and the per-node steps in ``step_dtype`` (float16 by default). Per-node
  bit offsets are *not* stored: they follow from the bitwidth table by a prefix count;
* weights: ``pack_codes`` of the weight codes at ``w_bits`` bits + per-output-channel steps in ``step_dtype``;
* adjacency: destination-major CSR, ``indptr`` (N+1 entries) and ``indices`` (E entries), each in the smallest
  unsigned integer type that holds its largest value (:func:`index_dtype`);
* FP32 baseline: float32 features and weights, the same CSR adjacency (adjacency does not shrink with quantization).

:func:`measure_adaptive_package` gives the same kind of measured bytes for the MEGA-style stream (packages, bitmap,
boundary stream), so the two feature layouts can be compared on identical codes.

Ratios: ``features_only_ratio = 32 / avg_bits`` (the papers' convention, average over nodes of the declared
bitwidth), ``measured_features_ratio`` = fp32 feature bytes / packed payload bytes, and ``all_in_ratio`` = all FP32
bytes / all quantized bytes including metadata and adjacency.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from quant.formats.adaptive_package import encode as encode_adaptive_package
from quant.formats.fixed_point import csr_from_edge_index
from quant.formats.packing import MAX_BITS, pack_codes, pack_rows

INDEX_DTYPES = (np.uint8, np.uint16, np.uint32, np.uint64)


def index_dtype(max_value: int) -> np.dtype:
    """Smallest unsigned integer dtype that holds ``max_value`` (uint8 .. uint64)."""
    for dt in INDEX_DTYPES:
        if max_value <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise ValueError(f"index_dtype: {max_value} does not fit 64 bits")


def csr_arrays(edge_index: np.ndarray, num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Destination-major CSR (indptr (N+1,), indices (E,)) in their smallest dtypes."""
    indptr, indices, _ = csr_from_edge_index(edge_index, num_nodes)
    num_edges = indices.shape[0]
    return (indptr.astype(index_dtype(num_edges)),
            indices.astype(index_dtype(max(num_nodes - 1, 0))))


@dataclass(frozen=True, kw_only=True)
class StorageReport:
    """Measured bytes per buffer and the derived ratios. All ``*_bytes`` are ints."""

    feature_bytes: int
    bits_table_bytes: int
    group_table_bytes: int
    feature_step_bytes: int
    weight_bytes: int
    weight_step_bytes: int
    adjacency_bytes: int
    fp32_feature_bytes: int
    fp32_weight_bytes: int
    avg_bits: float

    @property
    def metadata_bytes(self) -> int:
        return self.bits_table_bytes + self.group_table_bytes + self.feature_step_bytes + self.weight_step_bytes

    @property
    def total_bytes(self) -> int:
        return self.feature_bytes + self.weight_bytes + self.metadata_bytes + self.adjacency_bytes

    @property
    def fp32_total_bytes(self) -> int:
        return self.fp32_feature_bytes + self.fp32_weight_bytes + self.adjacency_bytes

    @property
    def features_only_ratio(self) -> float:
        return 32.0 / self.avg_bits if self.avg_bits > 0 else float("inf")

    @property
    def measured_features_ratio(self) -> float:
        return self.fp32_feature_bytes / self.feature_bytes if self.feature_bytes else float("inf")

    @property
    def all_in_ratio(self) -> float:
        return self.fp32_total_bytes / self.total_bytes

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("metadata_bytes", "total_bytes", "fp32_total_bytes", "features_only_ratio",
                    "measured_features_ratio", "all_in_ratio"):
            d[key] = getattr(self, key)
        return d


def measure_storage(*, codes: np.ndarray, bits: np.ndarray, edge_index: np.ndarray,
                    w_codes: np.ndarray | None = None, w_bits: int = 4,
                    step_dtype: np.dtype | type = np.float16) -> StorageReport:
    """Measure the bytes of one quantized feature matrix, its layer's weights and the graph.

    Args:
        codes: (N, F) int8 feature codes; bits: (N,) per-node bitwidths 0..8.
        edge_index: (2, E) int COO edges (stored as CSR).
        w_codes: (F_out, F_in) int8 weight codes or None (no weights counted); w_bits: their bitwidth.
        step_dtype: dtype of per-node / per-channel steps (float16 or float32).
    """
    codes, bits = np.asarray(codes), np.asarray(bits)
    n, f = codes.shape
    step_size = np.dtype(step_dtype).itemsize
    packed = pack_rows(codes, bits)
    return StorageReport(
        feature_bytes=packed.payload_bytes,
        bits_table_bytes=-(-n // 2),
        group_table_bytes=(MAX_BITS + 2) * 4,
        feature_step_bytes=n * step_size,
        **_weight_and_graph_bytes(w_codes, w_bits, step_size, edge_index, n),
        fp32_feature_bytes=n * f * 4,
        avg_bits=float(bits.mean()) if n else 0.0,
    )


def _weight_and_graph_bytes(w_codes: np.ndarray | None, w_bits: int, step_size: int, edge_index: np.ndarray,
                            num_nodes: int) -> dict[str, int]:
    """The weight, weight-step, FP32-weight and CSR byte counts of :class:`StorageReport`."""
    indptr, indices = csr_arrays(np.asarray(edge_index), num_nodes)
    w_bytes = w_step_bytes = fp32_w = 0
    if w_codes is not None:
        w_codes = np.asarray(w_codes, dtype=np.int8)
        w_bytes = int(pack_codes(w_codes.reshape(-1), w_bits).nbytes)
        w_step_bytes = w_codes.shape[0] * step_size
        fp32_w = w_codes.size * 4
    return {"weight_bytes": w_bytes, "weight_step_bytes": w_step_bytes, "fp32_weight_bytes": fp32_w,
            "adjacency_bytes": int(indptr.nbytes + indices.nbytes)}


def measure_fixed_point(*, codes: np.ndarray, bits: int, edge_index: np.ndarray, w_codes: np.ndarray | None = None,
                        w_bits: int = 4, step_dtype: np.dtype | type = np.float16) -> StorageReport:
    """Bytes of a full-precision tensor carried in ``bits``-bit fixed point (one width for every node, so no
    bitwidth or group table): the (N, F) codes in the smallest signed integer type of that width, per-node steps in
    ``step_dtype``; weights and graph as :func:`measure_storage`."""
    codes = np.asarray(codes)
    n, f = codes.shape
    word = np.dtype(f"int{max(8, 1 << (int(bits) - 1).bit_length())}")  # 9..16 bits -> int16, 17..32 -> int32
    step_size = np.dtype(step_dtype).itemsize
    return StorageReport(
        feature_bytes=n * f * word.itemsize,
        bits_table_bytes=0,
        group_table_bytes=0,
        feature_step_bytes=n * step_size,
        **_weight_and_graph_bytes(w_codes, w_bits, step_size, edge_index, n),
        fp32_feature_bytes=n * f * 4,
        avg_bits=float(bits),
    )


def measure_adaptive_package(codes: np.ndarray, bits: np.ndarray) -> dict[str, float]:
    """Measured bytes of the Adaptive-Package stream of (N, F) int8 codes with (N,) bitwidths.

    Returns packages / bitmap / boundary / total bytes, the package counts per length, and ``bits_per_code``
    (total bits / (N * F)), directly comparable with :func:`quant.formats.packing.pack_rows`' payload.
    """
    stream = encode_adaptive_package(np.asarray(codes), np.asarray(bits))
    parts = stream.nbytes
    total = sum(parts.values())
    n_codes = stream.num_nodes * stream.num_features
    return {**{f"{k}_bytes": v for k, v in parts.items()}, "total_bytes": total,
            **{f"packages_{k}": v for k, v in stream.package_counts().items()},
            "bits_per_code": 8.0 * total / n_codes if n_codes else 0.0}


def tensor_storage(codes: np.ndarray, bits: np.ndarray, edge_index: np.ndarray, w_codes: np.ndarray | None = None,
                   w_bits: int = 4, **labels) -> dict:
    """One row of an export's storage table: ``labels`` (e.g. layer, tensor, x_scheme), then :func:`measure_storage`
    of the (N, F) codes with their (N,) bits and the layer's weights, and their ``adaptive_package`` bytes."""
    codes8 = np.asarray(codes, dtype=np.int8)
    rep = measure_storage(codes=codes8, bits=bits, edge_index=edge_index, w_codes=w_codes, w_bits=w_bits)
    return {**labels, **rep.to_dict(), "adaptive_package": measure_adaptive_package(codes8, bits)}


def fixed_point_storage(codes: np.ndarray, bits: np.ndarray, edge_index: np.ndarray,
                        w_codes: np.ndarray | None = None, w_bits: int = 4, **labels) -> dict:
    """:func:`tensor_storage`'s row for a fixed-point tensor (:func:`measure_fixed_point`; ``bits`` (N,) all equal).
    It has no Adaptive-Package stream (1..8-bit codes only): ``adaptive_package`` is None."""
    widths = np.unique(np.asarray(bits))
    if widths.size != 1:
        raise ValueError(f"fixed_point_storage: a fixed-point tensor has one width; got {widths.tolist()}")
    rep = measure_fixed_point(codes=codes, bits=int(widths[0]), edge_index=edge_index, w_codes=w_codes,
                              w_bits=w_bits)
    return {**labels, **rep.to_dict(), "adaptive_package": None}
