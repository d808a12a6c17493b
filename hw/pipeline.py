"""Tile-granular pipeline of stages with bounded buffers between them (queues and back-pressure).

A stage processes tiles in order. Stage ``s`` may start tile ``t`` when (1) it finished tile ``t-1``, (2) its
input is ready (stage ``s-1`` finished tile ``t``, or for the first stage the tile's external ready time, e.g.
the combination of every source tile it depends on), and (3) there is room in its output queue of ``depth``
tiles (stage ``s+1`` has finished tile ``t - depth``). Waiting on (2) is an *input stall* (starvation), waiting
on (3) an *output stall* (back-pressure); the rest of the time outside service is *idle*. A stage's service
returns its end cycle: an engine adds its cycle count, a DRAM stage returns the completion of its requests.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(kw_only=True)
class StageStats:
    """Cycle accounting of one engine / stage (summed over phases and layers)."""

    busy_cycles: float = 0.0
    stall_input_cycles: float = 0.0
    stall_output_cycles: float = 0.0
    tiles: int = 0
    work_items: int = 0  # engine-specific (bit-ops, accumulations, values decoded, rows compared, bytes)

    def idle_cycles(self, total: float) -> float:
        return max(0.0, total - self.busy_cycles - self.stall_input_cycles - self.stall_output_cycles)

    def to_dict(self, total: float) -> dict:
        return {"busy_cycles": self.busy_cycles, "stall_input_cycles": self.stall_input_cycles,
                "stall_output_cycles": self.stall_output_cycles, "idle_cycles": self.idle_cycles(total),
                "utilization": self.busy_cycles / total if total else 0.0, "tiles": self.tiles,
                "work_items": self.work_items}


@dataclass(kw_only=True)
class Stage:
    """One pipeline stage: ``service(tile_index, start_cycle) -> end_cycle``."""

    name: str
    stats: StageStats
    service: Callable[[int, float], float]


def run_pipeline(stages: Sequence[Stage], num_tiles: int, ready: Sequence[float], depth: int = 2
                 ) -> list[list[float]]:
    """Run ``num_tiles`` through ``stages``; returns end[s][t]. ready[t] = earliest start of stage 0 on tile t."""
    if depth < 1:
        raise ValueError("run_pipeline: depth must be >= 1 (a zero-depth queue deadlocks)")
    ns = len(stages)
    end = [[0.0] * num_tiles for _ in range(ns)]
    for t in range(num_tiles):
        for s, st in enumerate(stages):
            free = end[s][t - 1] if t else ready[0]
            inp = ready[t] if s == 0 else end[s - 1][t]
            room = end[s + 1][t - depth] if s + 1 < ns and t >= depth else float("-inf")
            start = max(free, inp, room)
            st.stats.stall_input_cycles += max(0.0, inp - free)
            st.stats.stall_output_cycles += max(0.0, start - max(free, inp))
            end[s][t] = st.service(t, start)
            st.stats.busy_cycles += end[s][t] - start
            st.stats.tiles += 1
    return end
