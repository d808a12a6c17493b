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
* ``output_stage`` (optional q_aggregate requant, bias, ReLU, next-layer requant): a rigid 5-stage pipeline, one
  row per cycle: ``n`` rows take ``n - 1 + 5`` cycles.
* ``layer_engine`` (one tile: decoder -> C-PE -> requant -> XW buffer, then aggregation -> output stage): the
  combination phase is a max-plus recurrence over the decoder's value beats (:func:`combination_cycles`), the
  edge stream starts the cycle after the last XW row is written, then one edge beat per cycle
  (:func:`layer_engine_cycles`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

REQUANT_LATENCY_CYCLES = 2
AGGREGATION_LATENCY_CYCLES = 1
CPE_LOAD_CYCLES = 1
CPE_LATENCY_CYCLES = 1
EID_MATCH_LATENCY_CYCLES = 1
OUTPUT_STAGE_LATENCY_CYCLES = 5
# C-PE row output -> requant input (1) + requant latency (2): XW write after the last value's last bit
XW_WRITE_AFTER_LAST_BIT_CYCLES = CPE_LATENCY_CYCLES + REQUANT_LATENCY_CYCLES


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

    Same walk as ``quant.formats.adaptive_package.decode_beats``: stepping to the next node right after a node's last
    value
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
    """Cycles of a whole :class:`quant.formats.adaptive_package.AdaptivePackageStream` (first word in to last beat out).

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


def output_stage_cycles(num_rows: int) -> int:
    """Cycles from the first accepted row to the last output row (``output_stage``, no stalls)."""
    if num_rows < 1:
        raise ValueError("output_stage_cycles: need >= 1 row")
    return num_rows - 1 + OUTPUT_STAGE_LATENCY_CYCLES


def _package_beats(stream):
    """Per package: (words L, bitwidth b, per-value (skipped rows before it, is the node's last value))."""
    nnz = np.unpackbits(stream.bitmap, axis=1, count=stream.num_features, bitorder="little").sum(axis=1)
    w = 0
    for k in range(stream.num_packages):
        header = int(stream.words[w])
        words, bits = (header & 0b11) + 1, ((header >> 2) & 0b111) + 1
        node, left = int(stream.first_node[k]), int(nnz[stream.first_node[k]]) - int(stream.first_value[k])
        values, skip = [], 0
        for j in range(int(stream.num_values[k])):
            while left <= 0:  # walk over rows without (remaining) non-zeros: one cycle each
                skip += 1
                node += 1
                left = int(nnz[node])
            left -= 1
            values.append((skip, left == 0))
            skip = 0
            if left == 0 and j < int(stream.num_values[k]) - 1:  # stepping after a node's last value is free
                node += 1
                left = int(nnz[node])
        yield words, bits, values
        w += words


def combination_cycles(stream) -> int:
    """Cycle (rising edge, the first package word's = 0) on which the tile's last XW row is written.

    Max-plus recurrence of the ``layer_engine`` combination phase, no idle input cycles: package ``k``'s first word
    is taken the cycle after the previous package's last value (packages do not overlap); its first value can go
    out ``L`` cycles after its first word, the next ones one cycle after the previous handshake, plus one cycle per
    skipped bitmap row; the C-PE takes a value ``b`` cycles after the previous one (``cpe_value_cycles``); a node's
    row is written to the XW buffer 3 cycles after its last bit (C-PE output register, 2-stage requant:
    ``XW_WRITE_AFTER_LAST_BIT_CYCLES``). Raises on a stream without values (no combination phase).
    """
    start, cpe_free, last_write = 0, None, None
    for words, bits, values in _package_beats(stream):
        prev = None
        for skip, node_last in values:
            ready = (start + words if prev is None else prev + 1) + skip
            h = ready if cpe_free is None else max(ready, cpe_free)
            cpe_free = h + cpe_value_cycles(bits)
            if node_last:
                last_write = cpe_free + XW_WRITE_AFTER_LAST_BIT_CYCLES
            prev = h
        start = prev + 1 if prev is not None else start + words
    if last_write is None:
        raise ValueError("combination_cycles: the stream carries no values")
    return last_write


def layer_engine_cycles(stream, degrees: Sequence[int]) -> int:
    """Cycles of one ``layer_engine`` tile: first package word (or first edge beat) to the last output row.

    ``stream``: the tile's :class:`quant.formats.adaptive_package.AdaptivePackageStream`; ``degrees``: in-degree of each
    destination row (in output order, zero-degree rows count one beat). No idle input cycles, no back-pressure.
    """
    beats = sum(aggregation_row_beats(d) for d in degrees)
    if beats < 1:
        raise ValueError("layer_engine_cycles: need >= 1 destination row")
    tail = aggregation_cycles(degrees) + OUTPUT_STAGE_LATENCY_CYCLES  # first edge beat -> last output row
    if stream is None or int(np.sum(stream.num_values)) == 0:
        return tail
    return combination_cycles(stream) + 1 + tail


def accel_top_read_cycles(beats: int, latency: int) -> int:
    """Cycles ``accel_top`` spends on one read command of ``beats`` words (``hw/rtl/mem_model.v`` rule: the first
    beat ``latency`` cycles after the command, then one beat per cycle; bursts are issued ahead so that they
    stream back to back while ``MAX_OUTSTANDING * BURST_BEATS`` exceeds the latency)."""
    if beats < 1:
        raise ValueError("accel_top_read_cycles: need >= 1 beat")
    return int(latency) + int(beats)


def accel_top_layer_cycles(prologue_beats: int, comb_tiles: Sequence[tuple], agg_tiles: Sequence[tuple],
                           latency: int) -> dict[str, int]:
    """Per-phase and total cycles of one layer on ``hw/rtl/accel_top.v`` (one engine; a tile's writes overlap the
    next tile's load).

    ``prologue_beats``: weight-column beats + bias beats + 2 (the first tile's header); ``comb_tiles``: per
    combination tile ``(body_beats, stream, xw_write_beats)`` with its Adaptive-Package ``stream`` (None without
    values); ``agg_tiles``: per aggregation tile ``(body_beats, degrees, out_beats)`` with its rows' in-degrees.
    The layer header and the prologue are read first (:func:`accel_top_read_cycles` each). Tile ``k``'s load
    (``latency + body_beats``) starts the cycle after tile ``k-1``'s run ends (the first aggregation tile's: after
    the last combination tile's writes, whose XW rows it reads); its run starts once the load is done
    and the writer has finished tile ``k-1`` (the cycles between are ``wait``) and lasts ``combination_cycles + 2``
    (1 without values) for a combination tile, ``layer_engine_cycles + 1`` for an aggregation tile; the writer then
    sends the tile's words, one per cycle. The layer ends with the last write. Returns ``{"total", "load",
    "combination", "xw_writes", "aggregation", "writeback", "wait"}``: the total and the busy cycles of each phase
    (writes overlap loads, so the phases add up to more than the total).
    """
    head = accel_top_read_cycles(1, latency) + accel_top_read_cycles(prologue_beats, latency)
    busy = dict.fromkeys(("load", "combination", "xw_writes", "aggregation", "writeback", "wait"), 0)
    busy["load"] = head
    start, writer_end = head, head - 1  # first cycle of the next load; last cycle of the writer so far
    tiles = [("combination", "xw_writes", body, stream, None, w) for body, stream, w in comb_tiles]
    tiles += [("aggregation", "writeback", body, None, degrees, w) for body, degrees, w in agg_tiles]
    for k, (run_phase, write_phase, body, stream, degrees, write) in enumerate(tiles):
        if k == len(comb_tiles) and k > 0:
            start = writer_end + 1
        load = accel_top_read_cycles(body, latency)
        if degrees is None:
            has_values = stream is not None and int(np.sum(stream.num_values)) > 0
            run = combination_cycles(stream) + 2 if has_values else 1
        else:
            run = layer_engine_cycles(None, degrees) + 1
        run_start = max(start + load, writer_end + 1)
        busy["wait"] += run_start - (start + load)
        start = run_start + run
        writer_end = start + int(write) - 1
        busy["load"] += load
        busy[run_phase] += run
        busy[write_phase] += int(write)
    return {"total": writer_end + 1, **busy}
