"""MEGA-style Adaptive-Package stream: variable-length packages of same-bitwidth non-zero codes + bitmap.

MEGA (Zhu et al., HPCA 2024, arXiv 2311.09775) stores degree-aware mixed-precision features as 64/128/192-bit
packages with a 2-bit Mode + 3-bit Bitwidth header carrying the non-zero values of consecutive same-bitwidth nodes,
plus a per-node non-zero bitmap. The paper (as transcribed by third parties) leaves the details open; this module
fixes them as follows. Every item is a *model assumption* of this project, and the RTL decoder implements exactly it.

1. **Codes** follow :mod:`quant.formats.packing`: symmetric signed codes of a ``b``-bit node lie in
   ``[-(2^(b-1)-1), 2^(b-1)-1]``, stored as ``b``-bit two's complement.
2. **Bit order.** The stream is an array of little-endian uint64 words. Bit ``i`` of a package is bit ``i % 64`` of
   its word ``i // 64`` (LSB first). Packages are 1, 2 or 3 words long and follow each other with no gap.
3. **Header** (package bits 0..4): ``mode = bits[1:0]``, ``bitwidth_field = bits[4:2]``. Modes: ``0b00`` = 64-bit,
   ``0b01`` = 128-bit, ``0b10`` = 192-bit package, ``0b11`` = illegal (decode raises, naming the package index).
   The bitwidth field holds ``b - 1`` (so it encodes 1..8).
4. **Values.** Value ``j`` of a package occupies bits ``[5 + j*b, 5 + (j+1)*b)``; capacity ``(L - 5) // b``.
   Unused tail bits are zero padding. Values are the non-zero codes of nodes in ascending node-ID order, and inside
   a node in ascending feature order (the order of ``codes[bitmap]`` in row-major order).
5. **Runs and package choice.** Nodes with at least one non-zero code form runs of consecutive (in node-ID order,
   skipping all-zero nodes) nodes with equal bitwidth. A package never mixes bitwidths: a bitwidth change closes the
   package. A run's values are cut greedily: while more than a 192-bit package holds, emit a full 192-bit package;
   then emit the *shortest* length whose capacity holds the rest. So a node may **span packages** (its values
   continue in the next package of the same bitwidth), and only the last package of a run carries padding.
6. **Zero nodes.** Nodes whose codes are all zero (always the case for bitwidth 0 and 1) contribute no values, appear
   in no package and do not interrupt a run; they are visible only as an all-zero bitmap row. Their bitwidth is
   therefore not recoverable from the stream (it does not affect the decoded codes).
7. **Bitmap.** ``bitmap`` (N, ceil(F/8)) uint8: bit ``f % 8`` of byte ``f // 8`` of row ``i`` is 1 iff
   ``codes[i, f] != 0`` (``np.packbits(..., bitorder="little")``).
8. **Node-boundary stream** (explicit, one record per package, so every package can be decoded independently):
   ``first_node`` (uint32, node of value 0), ``first_value`` (uint32, rank of value 0 among that node's non-zeros:
   non-zero when the node continues from the previous package) and ``num_values`` (uint8, valid values; <= 93).
   Values of a package belong to ``first_node`` and then to the following nodes with a non-zero bitmap row.
   Cost: 9 bytes per package, stored as is (``AdaptivePackageStream.nbytes``). With short runs (bitwidths that
   alternate between neighbouring node IDs) packages are short and this record dominates; sort or relabel nodes
   by bitwidth before encoding, or compare with :mod:`quant.formats.packing` via
   :func:`quant.formats.storage.measure_adaptive_package`.

The hardware decoder emits one beat ``(node, feature, code)`` per non-zero value in stream order
(:func:`decode_beats`); zero features are implied by the bitmap and never emitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from quant.formats.packing import MAX_BITS, code_range

HEADER_BITS = 5
PACKAGE_BITS = (64, 128, 192)  # indexed by mode
ILLEGAL_MODE = 3


def capacity(length_bits: int, bits: int) -> int:
    """Number of ``bits``-wide values a package of ``length_bits`` holds after its 5-bit header."""
    return (length_bits - HEADER_BITS) // bits


@dataclass(frozen=True, kw_only=True)
class AdaptivePackageStream:
    """Encoded feature matrix.

    Shapes: words (W,) uint64; bitmap (N, ceil(F/8)) uint8; first_node, first_value (P,) uint32;
    num_values (P,) uint8.
    """

    words: np.ndarray
    bitmap: np.ndarray
    first_node: np.ndarray
    first_value: np.ndarray
    num_values: np.ndarray
    num_nodes: int
    num_features: int

    @property
    def num_packages(self) -> int:
        return int(self.num_values.shape[0])

    def package_counts(self) -> dict[int, int]:
        """Packages per length in bits, read from the headers: ``{64: n64, 128: n128, 192: n192}``."""
        modes = [_read_bits(self.words, 64 * s, 2) for s in _package_starts(self.words, self.num_packages)]
        return {length: sum(m == mode for m in modes) for mode, length in enumerate(PACKAGE_BITS)}

    @property
    def nbytes(self) -> dict[str, int]:
        """Measured bytes of each part (packages, bitmap, boundary stream)."""
        boundary = self.first_node.nbytes + self.first_value.nbytes + self.num_values.nbytes
        return {"packages": int(self.words.nbytes), "bitmap": int(self.bitmap.nbytes), "boundary": int(boundary)}


def _read_bits(words: np.ndarray, pos: int, width: int) -> int:
    """Read ``width`` (<= 64) bits at bit position ``pos`` of the LSB-first word stream (scalar, for the decoder)."""
    w, s = divmod(pos, 64)
    val = int(words[w]) >> s
    if s + width > 64:
        val |= int(words[w + 1]) << (64 - s)
    return val & ((1 << width) - 1)


def _package_starts(words: np.ndarray, num_packages: int) -> Iterator[int]:
    """Word index of every package, following the mode fields; raises on an illegal mode or truncation."""
    w = 0
    for p in range(num_packages):
        if w >= words.shape[0]:
            raise ValueError(f"Adaptive-Package: stream truncated before package {p} (word {w} of "
                             f"{words.shape[0]}); the boundary stream announces {num_packages} packages")
        mode = int(words[w]) & 0b11
        if mode == ILLEGAL_MODE:
            raise ValueError(f"Adaptive-Package: package {p} (word {w}) has the illegal mode 0b11; "
                             "legal modes are 0b00=64, 0b01=128, 0b10=192 bits")
        if w + mode + 1 > words.shape[0]:
            raise ValueError(f"Adaptive-Package: package {p} is truncated ({PACKAGE_BITS[mode]} bits announced, "
                             f"{64 * (words.shape[0] - w)} left)")
        yield w
        w += mode + 1
    if w != words.shape[0]:
        raise ValueError(f"Adaptive-Package: {words.shape[0] - w} trailing words after the last of "
                         f"{num_packages} packages; the boundary stream and the package stream disagree")


def _plan_packages(run_bits: np.ndarray, run_sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy package plan (rule 5): per run, full 192-bit packages then the shortest package for the rest.

    Shapes: run_bits, run_sizes (R,) -> (length_bits, bits, num_values) (P,) int64, in stream order.
    """
    full = (PACKAGE_BITS[-1] - HEADER_BITS) // run_bits  # (R,) values in a 192-bit package
    num_full = (run_sizes - 1) // full  # the last package holds 1..full values
    rest = run_sizes - num_full * full  # (R,)
    last_len = np.select([capacity(L, run_bits) >= rest for L in PACKAGE_BITS[:-1]], PACKAGE_BITS[:-1],
                         PACKAGE_BITS[-1])
    per_run = num_full + 1
    is_last = np.zeros(int(per_run.sum()), dtype=bool)
    is_last[np.cumsum(per_run) - 1] = True
    widths = np.repeat(run_bits, per_run)
    lengths = np.where(is_last, np.repeat(last_len, per_run), PACKAGE_BITS[-1])
    counts = np.where(is_last, np.repeat(rest, per_run), np.repeat(full, per_run))
    return lengths.astype(np.int64), widths.astype(np.int64), counts.astype(np.int64)


def _scatter_fields(num_words: int, pos: np.ndarray, values: np.ndarray, width: np.ndarray) -> np.ndarray:
    """Write non-overlapping fields (low ``width`` bits of ``values``) at ascending bit positions ``pos``.

    Fields that start in the same word are OR-reduced with ``np.bitwise_or.reduceat``; the high part of a field that
    crosses a word boundary goes to the next word (at most one such field per word). Shapes: (M,) -> (W,) uint64.
    """
    words = np.zeros(num_words, dtype=np.uint64)
    if pos.size == 0:
        return words
    field = (values & ((np.int64(1) << width) - 1)).astype(np.uint64)
    wi, sh = pos // 64, (pos % 64).astype(np.uint64)
    starts = np.flatnonzero(np.r_[True, wi[1:] != wi[:-1]])  # pos ascending -> wi non-decreasing
    words[wi[starts]] = np.bitwise_or.reduceat(field << sh, starts)
    spill = (pos % 64) + width > 64
    words[wi[spill] + 1] |= field[spill] >> (np.uint64(64) - sh[spill])
    return words


def _check_encode_inputs(codes: np.ndarray, bits: np.ndarray) -> None:
    if codes.ndim != 2 or codes.dtype != np.int8 or bits.shape != (codes.shape[0],):
        raise TypeError(f"encode: need codes (N, F) int8 and bits (N,), got {codes.dtype} {codes.shape}, "
                        f"bits {bits.shape}")
    if bits.size and (bits.min() < 0 or bits.max() > MAX_BITS):
        raise ValueError(f"encode: bitwidths must lie in 0..{MAX_BITS}")
    qmax = np.array([code_range(b)[1] for b in range(MAX_BITS + 1)])[bits]  # (N,)
    absmax = np.abs(codes.astype(np.int16)).max(axis=1) if codes.shape[1] else np.zeros(len(bits), np.int16)
    if np.any(absmax > qmax):
        i = int(np.flatnonzero(absmax > qmax)[0])
        raise ValueError(f"encode: node {i} has |code| = {absmax[i]} > {qmax[i]}, the {bits[i]}-bit limit; "
                         "clamp the codes or raise the bitwidth")


def _write_packages(values: np.ndarray, lengths: np.ndarray, widths: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Headers + values of the planned packages as an LSB-first uint64 word stream. (V,), (P,) x 3 -> (W,)."""
    num_words = lengths // 64  # (P,)
    start_word = np.cumsum(num_words) - num_words  # (P,)
    header = (num_words - 1) | ((widths - 1) << 2)  # mode | (b - 1) << 2
    pkg_of_value = np.repeat(np.arange(counts.size), counts)  # (V,)
    first_rank = np.cumsum(counts) - counts  # (P,) global rank of a package's value 0
    b = widths[pkg_of_value]
    pos = start_word[pkg_of_value] * 64 + HEADER_BITS + (np.arange(values.size) - first_rank[pkg_of_value]) * b
    # merge headers and values in stream order (package p's header precedes its values): positions ascend
    slot_of_value = np.arange(values.size) + pkg_of_value + 1
    slot_of_header = first_rank + np.arange(counts.size)
    m = values.size + counts.size
    f_pos, f_val, f_width = np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.int64)
    f_pos[slot_of_header], f_val[slot_of_header], f_width[slot_of_header] = start_word * 64, header, HEADER_BITS
    f_pos[slot_of_value], f_val[slot_of_value], f_width[slot_of_value] = pos, values, b
    return _scatter_fields(int(num_words.sum()), f_pos, f_val, f_width)


def encode(codes: np.ndarray, bits: np.ndarray) -> AdaptivePackageStream:
    """Encode (N, F) int8 codes with per-node bitwidths (N,) in 0..8 into an Adaptive-Package stream."""
    codes = np.asarray(codes)
    bits = np.asarray(bits).astype(np.int64)
    _check_encode_inputs(codes, bits)
    n, f = codes.shape
    nz = codes != 0  # (N, F)
    nnz = nz.sum(axis=1)  # (N,)
    active = np.flatnonzero(nnz)  # nodes that own values, ascending ID
    values = codes[nz].astype(np.int64)  # (V,) node-major, feature-minor
    ab = bits[active]  # runs = consecutive active nodes with equal bitwidth
    run_start = np.flatnonzero(np.r_[True, ab[1:] != ab[:-1]]) if active.size else np.zeros(0, np.int64)
    run_vals = np.add.reduceat(nnz[active], run_start) if active.size else np.zeros(0, np.int64)
    lengths, widths, counts = _plan_packages(ab[run_start], run_vals)
    # boundary stream: owner node of every package's value 0 and its rank among that node's non-zeros
    first_rank = np.cumsum(counts) - counts  # (P,)
    node_first = np.cumsum(nnz) - nnz  # (N,) global rank of a node's first value
    first_node = np.repeat(np.arange(n), nnz)[first_rank]  # (P,)
    return AdaptivePackageStream(
        words=_write_packages(values, lengths, widths, counts),
        bitmap=np.packbits(nz, axis=1, bitorder="little"),
        first_node=first_node.astype(np.uint32),
        first_value=(first_rank - node_first[first_node]).astype(np.uint32),
        num_values=counts.astype(np.uint8),
        num_nodes=n,
        num_features=f,
    )


def _nonzero_positions(stream: AdaptivePackageStream) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bitmap -> (node, feature) of every non-zero in row-major order and the per-node count. (V,), (V,), (N,)."""
    if stream.bitmap.shape != (stream.num_nodes, -(-stream.num_features // 8)):
        raise ValueError(f"Adaptive-Package: bitmap shape {stream.bitmap.shape} does not match "
                         f"({stream.num_nodes}, ceil({stream.num_features}/8)); the bitmap is truncated")
    nz = np.unpackbits(stream.bitmap, axis=1, count=stream.num_features, bitorder="little").astype(bool)
    node, feat = np.nonzero(nz)
    return node, feat, nz.sum(axis=1)


def decode(stream: AdaptivePackageStream) -> np.ndarray:
    """Vectorised decoder: stream -> (N, F) int8 codes. Checks every header and the boundary stream."""
    node, feat, nnz = _nonzero_positions(stream)
    p = stream.num_packages
    if not (stream.first_node.shape == stream.first_value.shape == (p,)):
        raise ValueError("Adaptive-Package: boundary stream arrays have different lengths; it is truncated")
    starts = np.fromiter(_package_starts(stream.words, p), dtype=np.int64, count=p)  # (P,)
    headers = stream.words[starts].astype(np.int64) if p else np.zeros(0, np.int64)
    widths = ((headers >> 2) & 0b111) + 1
    counts = stream.num_values.astype(np.int64)
    cap = ((headers & 0b11) + 1) * 64 - HEADER_BITS
    if np.any(counts * widths > cap):
        k = int(np.flatnonzero(counts * widths > cap)[0])
        raise ValueError(f"Adaptive-Package: package {k} claims {counts[k]} values of {widths[k]} bits, "
                         f"more than its {cap[k] // widths[k]}-value capacity")
    node_first = np.cumsum(nnz) - nnz  # (N,) global rank of a node's first value
    if p and np.any(stream.first_node >= stream.num_nodes):
        raise ValueError("Adaptive-Package: boundary stream names a node beyond num_nodes")
    first_rank = node_first[stream.first_node.astype(np.int64)] + stream.first_value.astype(np.int64)
    expected = np.cumsum(counts) - counts
    if p and (np.any(first_rank != expected)):
        k = int(np.flatnonzero(first_rank != expected)[0])
        raise ValueError(f"Adaptive-Package: package {k} starts at value rank {first_rank[k]}, expected "
                         f"{expected[k]}; the boundary stream is inconsistent with the bitmap")
    if counts.sum() != node.size:
        raise ValueError(f"Adaptive-Package: packages carry {counts.sum()} values but the bitmap has "
                         f"{node.size} non-zeros; the stream is truncated")
    pkg = np.repeat(np.arange(p), counts)
    b = widths[pkg]
    pos = starts[pkg] * 64 + HEADER_BITS + (np.arange(node.size) - expected[pkg]) * b
    wi, sh = pos // 64, (pos % 64).astype(np.uint64)
    raw = stream.words[wi] >> sh
    spill = (pos % 64) + b > 64
    raw[spill] |= stream.words[wi[spill] + 1] << (np.uint64(64) - sh[spill])
    vals = (raw & ((np.uint64(1) << b.astype(np.uint64)) - np.uint64(1))).astype(np.int64)
    vals -= ((vals >> (b - 1)) & 1) << b  # sign-extend
    if node.size:
        first = np.flatnonzero(np.r_[True, node[1:] != node[:-1]])  # node is ascending: first value per node
        node_b = np.repeat(b[first], np.diff(np.r_[first, node.size]))  # bitwidth of the node's first package
        if np.any(node_b != b):  # a node spanning packages must see the same bitwidth everywhere
            k = int(pkg[np.flatnonzero(node_b != b)[0]])
            raise ValueError(f"Adaptive-Package: package {k} changes the bitwidth inside a node")
        if np.any(vals == 0):
            k = int(pkg[np.flatnonzero(vals == 0)[0]])
            raise ValueError(f"Adaptive-Package: package {k} carries a zero value where the bitmap says non-zero")
    out = np.zeros((stream.num_nodes, stream.num_features), dtype=np.int8)
    out[node, feat] = vals
    return out


def decode_beats(stream: AdaptivePackageStream) -> Iterator[tuple[int, int, int]]:
    """Sequential reference decoder: yield ``(node, feature, code)`` per non-zero value in stream order.

    This is the beat sequence the RTL decoder emits: package by package, value by value; the node pointer starts at
    the package's ``first_node``/``first_value`` and advances over nodes with a non-zero bitmap row.
    """
    node_ids, feats, nnz = _nonzero_positions(stream)
    row_feats = np.split(feats, np.cumsum(nnz)[:-1]) if stream.num_nodes else []
    for k, w in enumerate(_package_starts(stream.words, stream.num_packages)):
        header = int(stream.words[w])
        b = ((header >> 2) & 0b111) + 1
        node, rank = int(stream.first_node[k]), int(stream.first_value[k])
        count = int(stream.num_values[k])
        if count > capacity(PACKAGE_BITS[header & 0b11], b):
            raise ValueError(f"Adaptive-Package: package {k} overflows its capacity")
        for j in range(count):
            while node < stream.num_nodes and rank >= nnz[node]:
                node, rank = node + 1, 0
            if node >= stream.num_nodes:
                raise ValueError(f"Adaptive-Package: package {k} has values beyond the last non-zero of the bitmap")
            raw = _read_bits(stream.words, 64 * w + HEADER_BITS + j * b, b)
            yield node, int(row_feats[node][rank]), raw - ((raw >> (b - 1)) << b)
            rank += 1
