"""Per-unit cycle formulas that the RTL in ``hw/rtl/`` implements exactly (checked by ``tests/hw/rtl``).

Pure functions, no state: the cycle-level model imports them so that its per-unit costs are the RTL's. Every count
assumes no idle input cycles and no output back-pressure (stalls only add cycles). "Cycles" of a stream are counted
from the rising edge that accepts the first input beat to the rising edge that hands over the last output beat, so
a single-beat unit with latency L has ``stream_cycles == L``.

Units and their formulas:

* ``requant`` (two-stage pipeline, one element per cycle): latency 2, ``n`` elements take ``n - 1 + 2`` cycles.
* ``aggregation_unit`` (one edge beat per cycle per ``LANES`` features, registered output): a destination row of
  ``d`` edges (``d >= 1``; a zero-degree row is sent as one beat with coefficient 0) is emitted 1 cycle after its
  last beat, so rows of degrees ``d_0..d_R-1`` take ``sum(d) - 1 + 1`` cycles.
* ``cpe`` (``LANES`` bit-serial engines sharing one activation bit stream, 4-bit weights in parallel): a value of a
  ``b``-bit node takes ``b`` cycles (one bit per cycle, LSB first, the MSB subtracts); a row is emitted 1 cycle after
  its last bit; the first value is loaded 1 cycle before its first bit. A node row with values of bitwidths
  ``b_v`` takes ``sum(b_v) + 1`` cycles from its first accepted value to its output.
* ``ap_decoder`` (Adaptive-Package decoder): a package of ``L`` words (``L`` = length_bits / 64) is loaded in ``L``
  cycles (one 64-bit word per cycle), then emits one beat per cycle; every all-zero bitmap row it walks over
  between two values of the package costs one extra cycle. Packages do not overlap.
* ``eid_matcher`` (Condense-Edge eID FIFO matcher): one source ID per cycle, registered output: ``n`` IDs take
  ``n - 1 + 1`` cycles.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

REQUANT_LATENCY_CYCLES = 2
AGGREGATION_LATENCY_CYCLES = 1
CPE_LOAD_CYCLES = 1
CPE_LATENCY_CYCLES = 1
EID_MATCH_LATENCY_CYCLES = 1


def requant_cycles(num_elements: int) -> int:
    """Cycles from the first accepted accumulator to the last output code (``requant``, no stalls)."""
    if num_elements < 1:
        raise ValueError("requant_cycles: need >= 1 element")
    return num_elements - 1 + REQUANT_LATENCY_CYCLES


def aggregation_row_beats(degree: int) -> int:
    """Edge beats (= busy cycles) of one destination row; a zero-degree row is one beat with coefficient 0."""
    return max(int(degree), 1)


def aggregation_cycles(degrees: Sequence[int]) -> int:
    """Cycles from the first edge beat to the last row output for rows of the given in-degrees (one lane group)."""
    beats = sum(aggregation_row_beats(d) for d in degrees)
    if beats < 1:
        raise ValueError("aggregation_cycles: need >= 1 row")
    return beats - 1 + AGGREGATION_LATENCY_CYCLES


def cpe_value_cycles(bits: int) -> int:
    """Bit-serial cycles of one activation value of a ``bits``-bit node (1..8)."""
    if not 1 <= bits <= 8:
        raise ValueError(f"cpe_value_cycles: bits={bits} must lie in 1..8")
    return int(bits)


def cpe_row_cycles(value_bits: Sequence[int]) -> int:
    """Cycles from the first accepted value of a node row to its output (values of bitwidths ``value_bits``)."""
    if len(value_bits) < 1:
        raise ValueError("cpe_row_cycles: a row needs >= 1 value")
    return CPE_LOAD_CYCLES + sum(cpe_value_cycles(b) for b in value_bits) - 1 + CPE_LATENCY_CYCLES


def cpe_stream_cycles(rows_value_bits: Sequence[Sequence[int]]) -> int:
    """Back-to-back rows: the next row's first value loads during the previous row's last bit."""
    busy = sum(cpe_value_cycles(b) for row in rows_value_bits for b in row)
    return CPE_LOAD_CYCLES + busy - 1 + CPE_LATENCY_CYCLES


def decoder_package_cycles(length_bits: int, num_values: int, skipped_rows: int = 0) -> int:
    """Cycles the ``ap_decoder`` spends on one package: load words, emit values, walk over empty bitmap rows."""
    if length_bits not in (64, 128, 192):
        raise ValueError(f"decoder_package_cycles: length_bits={length_bits}; valid: 64, 128, 192")
    return length_bits // 64 + num_values + skipped_rows


def decoder_skipped_rows(bitmap_nnz: np.ndarray, first_node: int, first_value: int, num_values: int) -> int:
    """Cycles the decoder spends walking over nodes without (remaining) non-zeros inside one package.

    Same walk as ``quant.adaptive_package.decode_beats``: stepping to the next node right after a node's last value
    is free; every node then found empty (and an empty start) costs one cycle. ``bitmap_nnz`` (N,) = non-zeros
    per node row.
    """
    node, left, skipped = int(first_node), int(bitmap_nnz[first_node]) - int(first_value), 0
    for j in range(num_values):
        while left <= 0:
            skipped += 1
            node += 1
            left = int(bitmap_nnz[node])
        left -= 1
        if left == 0 and j < num_values - 1:
            node += 1
            left = int(bitmap_nnz[node])
    return skipped


def decoder_stream_cycles(stream) -> int:
    """Cycles of a whole :class:`quant.adaptive_package.AdaptivePackageStream` (first word in to last beat out).

    The sum of :func:`decoder_package_cycles` over the packages, minus one (the last beat's edge ends the count).
    """
    nnz = np.unpackbits(stream.bitmap, axis=1, count=stream.num_features, bitorder="little").sum(axis=1)
    total, w = 0, 0
    for k in range(stream.num_packages):
        mode = int(stream.words[w]) & 0b11
        length = 64 * (mode + 1)
        skipped = decoder_skipped_rows(nnz, int(stream.first_node[k]), int(stream.first_value[k]),
                                       int(stream.num_values[k]))
        total += decoder_package_cycles(length, int(stream.num_values[k]), skipped)
        w += mode + 1
    return total - 1


def eid_match_cycles(num_ids: int) -> int:
    """Cycles from the first source ID to the last match result (``eid_matcher``)."""
    if num_ids < 1:
        raise ValueError("eid_match_cycles: need >= 1 id")
    return num_ids - 1 + EID_MATCH_LATENCY_CYCLES
