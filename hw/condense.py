"""Condense-Edge: offline plan of cross-subgraph sources and the online eID-FIFO condense unit.

Plan (offline, :func:`condense_plan`): subgraphs are contiguous node-ID tiles (assumption: the transcription's
METIS partition is replaced by the graph's own order; pass a reordered graph to model a partitioner). For every
destination subgraph ``d`` the sorted unique source IDs outside ``d`` with an edge into ``d`` form its eID list.

Online: XW rows stream past the unit in node order, one row per cycle (timing: :func:`hw.timing.eid_match_cycles`).
``num_eid_fifos`` FIFOs of ``eid_fifo_depth`` entries hold the heads of the eID lists of up to
``num_eid_fifos`` active destination subgraphs; a row whose ID equals a FIFO head is copied to that subgraph's
contiguous region (Sparse Buffer, spilling to DRAM) and the FIFO pops; every ``eid_fifo_depth`` pops refill the
FIFO with ``eid_fifo_depth`` 4-byte eIDs read from DRAM. More subgraphs than FIFOs need extra passes over XW
(the first pass rides on the combination output, later passes re-read XW from DRAM).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hw.pipeline import StageStats
from hw.timing import eid_match_cycles

EID_BYTES = 4


@dataclass(frozen=True, kw_only=True)
class CondensePlan:
    """pair_src (Q,), pair_dst_tile (Q,): unique (cross source, destination subgraph) pairs, sorted by
    (dst_tile, src) = the contiguous write order of each subgraph's region."""

    tile_nodes: int
    num_tiles: int
    pair_src: np.ndarray
    pair_dst_tile: np.ndarray

    def cross_per_tile(self) -> np.ndarray:
        """(num_tiles,) number of condensed rows per destination subgraph."""
        return np.bincount(self.pair_dst_tile, minlength=self.num_tiles)

    def hits(self, src_tile: int, group: range) -> int:
        """Rows of source tile ``src_tile`` copied for destination subgraphs in ``group`` (one pass)."""
        m = (self.pair_src // self.tile_nodes == src_tile) & (self.pair_dst_tile >= group.start) & (
            self.pair_dst_tile < group.stop)
        return int(m.sum())


def condense_plan(indptr: np.ndarray, indices: np.ndarray, tile_nodes: int) -> CondensePlan:
    """Unique cross-subgraph (src, dst subgraph) pairs of a destination-major CSR graph."""
    n = indptr.shape[0] - 1
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    dtile, stile = dst // tile_nodes, indices // tile_nodes
    cross = dtile != stile
    key = np.unique(dtile[cross] * n + indices[cross])  # sorted by (dst tile, src)
    return CondensePlan(tile_nodes=tile_nodes, num_tiles=-(-n // tile_nodes), pair_src=key % n,
                        pair_dst_tile=key // n)


def condense_cycles(rows: int) -> int:
    """One pass over ``rows`` XW rows: one head comparison per row per cycle, all FIFOs in parallel (RTL
    ``eid_matcher``, :func:`hw.timing.eid_match_cycles`)."""
    return eid_match_cycles(rows) if rows else 0


class CondenseStats(StageStats):
    """Condense unit accounting; ``work_items`` = XW rows compared."""
