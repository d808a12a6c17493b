"""Aggregation engine (A . XW, or A . X aggregation-first): ``num_agg_units`` accumulate lanes.

Per-unit timing is the RTL's (:func:`hw.timing.aggregation_cycles`): one aggregation-unit group of ``agg_lanes``
features takes one edge beat per cycle, a destination row of degree ``d`` costs ``max(d, 1)`` beats (no zero
skipping) and the result leaves ``AGGREGATION_LATENCY_CYCLES`` after the last beat. The engine has
``num_agg_units / agg_lanes`` groups; a tile of rows with degrees ``d_i`` and ``F`` features needs
``B = sum_i max(d_i, 1) * ceil(F / agg_lanes)`` beats, spread evenly (MEGA's outer-product dataflow broadcasts a
source row to its destinations' partial sums; assumption: perfect balance). Saturation at ``psum_bits`` is the
golden ``quant.formats.fixed_point.aggregate_int``.
"""

from __future__ import annotations

from hw.pipeline import StageStats
from hw.timing import AGGREGATION_LATENCY_CYCLES, aggregation_row_beats


def tile_beats(degrees, num_features: int, lanes: int) -> int:
    """Edge beats of a tile: sum over rows of max(degree, 1) times the feature chunks."""
    return sum(aggregation_row_beats(d) for d in degrees) * -(-num_features // lanes)


def aggregation_cycles(beats: int, num_groups: int) -> int:
    if beats == 0:
        return 0
    return -(-int(beats) // num_groups) - 1 + AGGREGATION_LATENCY_CYCLES


class AggregationStats(StageStats):
    """Aggregation engine accounting; ``work_items`` = edge beats."""
