"""DRAM layout of a feature matrix in each format: per-node stream bytes, random-access row bytes, work.

* ``dense``: ``F`` values of ``feature_bits_override`` bits per node (FP32 baselines), no zero skipping.
* ``bitmap`` (the ablation's "degree-aware bits, plain bitmap" step): per node a ``ceil(F/8)``-byte bitmap row,
  the non-zero codes in 8-bit containers and a 4-byte row pointer (rows are variable-length).
* ``adaptive_package``: the measured :func:`quant.formats.adaptive_package.encode` stream; package bytes and the 9-byte
  boundary record of a package are attributed to its ``first_node``; bitmap rows to their node. A random row
  read (no Condense-Edge) fetches ``ceil(F/8) + ceil(nnz * b / 8) + 1`` bytes (bitmap row, values, one header
  byte): an assumption, since a node's values can straddle packages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw.decoder import package_decode_cycles
from quant.formats.adaptive_package import AdaptivePackageStream, encode

BOUNDARY_RECORD_BYTES = 9  # first_node u32 + first_value u32 + num_values u8 (quant/formats/adaptive_package.py rule 8)


@dataclass(frozen=True, kw_only=True)
class FeatureLayout:
    """Shapes (N,): row_bytes, nnz (values the engines touch), bit_work (sum of bits of those values);
    stream: part name -> (N,) bytes of the sequential stream attributed to each node."""

    fmt: str
    num_features: int
    row_bytes: np.ndarray
    nnz: np.ndarray
    bit_work: np.ndarray
    max_bits: int
    stream: dict
    decode_work: np.ndarray  # (N,) decoder cycles attributed to each node (packages at their first_node)
    packages: AdaptivePackageStream | None = None


def package_lengths(stream: AdaptivePackageStream) -> np.ndarray:
    """Bytes of every package, read from the Mode field of its header (as the decoder does). (P,) int64."""
    out = np.empty(stream.num_packages, np.int64)
    w = 0
    words = stream.words
    for p in range(stream.num_packages):
        mode = int(words[w]) & 0b11
        out[p] = 8 * (mode + 1)
        w += mode + 1
    return out


def feature_layout(codes: np.ndarray, bits: np.ndarray, fmt: str, override_bits: int = 0) -> FeatureLayout:
    """Layout of (N, F) int8 codes with (N,) per-node bitwidths in format ``fmt``."""
    n, f = codes.shape
    if fmt == "dense":
        b = override_bits or 8
        row = np.full(n, -(-f * b // 8), np.int64)
        return FeatureLayout(fmt=fmt, num_features=f, row_bytes=row, nnz=np.full(n, f, np.int64),
                             bit_work=np.full(n, f * b, np.int64), max_bits=b, stream={"dense": row},
                             decode_work=np.zeros(n, np.int64))
    nnz = np.count_nonzero(codes, axis=1).astype(np.int64)
    bits = np.asarray(bits, np.int64)
    bm = np.full(n, -(-f // 8), np.int64)
    work = nnz * bits
    if fmt == "bitmap":
        return FeatureLayout(fmt=fmt, num_features=f, row_bytes=bm + nnz, nnz=nnz, bit_work=work,
                             max_bits=int(bits.max(initial=1)),
                             stream={"bitmap": bm, "values": nnz, "pointers": np.full(n, 4, np.int64)},
                             decode_work=(bm + nnz + 4 + 7) // 8 + nnz)
    if fmt != "adaptive_package":
        raise ValueError(f"feature_layout: unknown format {fmt!r}; valid: dense, bitmap, adaptive_package")
    ap = encode(np.asarray(codes, np.int8), bits)
    first = ap.first_node.astype(np.int64)
    lengths = package_lengths(ap)
    pk = np.bincount(first, weights=lengths, minlength=n).astype(np.int64)
    dec = np.bincount(first, weights=package_decode_cycles(ap, lengths, nnz), minlength=n).astype(np.int64)
    bd = np.bincount(first, minlength=n).astype(np.int64) * BOUNDARY_RECORD_BYTES
    row = bm + (nnz * bits + 7) // 8 + 1
    return FeatureLayout(fmt=fmt, num_features=f, row_bytes=row, nnz=nnz, bit_work=work,
                         max_bits=int(bits.max(initial=1)), stream={"packages": pk, "bitmap": bm, "boundary": bd},
                         decode_work=dec, packages=ap)
