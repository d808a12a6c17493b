"""On-chip SRAM buffer: capacity in bytes, access counting and an optional LRU row cache (hit rates).

``access(nbytes)`` counts SRAM traffic (for energy); ``lookup(key, nbytes)`` models a buffer used as a cache of
rows (a hit is served on chip, a miss must be fetched from DRAM by the caller, then inserted, evicting the least
recently used rows until it fits). Buffers whose use is a plain stream only count accesses and report hit rate
``served_on_chip / lookups`` as set by the scheduler.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(kw_only=True)
class BufferStats:
    capacity_bytes: int = 0
    reads_bytes: int = 0
    writes_bytes: int = 0
    lookups: int = 0
    hits: int = 0
    peak_bytes: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hits / self.lookups if self.lookups else float("nan")


class Buffer:
    def __init__(self, name: str, capacity_bytes: int) -> None:
        self.name = name
        self.capacity = capacity_bytes
        self.stats = BufferStats(capacity_bytes=capacity_bytes)
        self._lru: OrderedDict = OrderedDict()
        self._used = 0

    def read(self, nbytes: int) -> None:
        self.stats.reads_bytes += int(nbytes)

    def write(self, nbytes: int) -> None:
        self.stats.writes_bytes += int(nbytes)

    def occupy(self, nbytes: int) -> None:
        self.stats.peak_bytes = max(self.stats.peak_bytes, min(int(nbytes), self.capacity))

    def record(self, lookups: int, hits: int) -> None:
        self.stats.lookups += int(lookups)
        self.stats.hits += int(hits)

    def lookup(self, key, nbytes: int) -> bool:
        """LRU row cache: True on a hit; on a miss the row is inserted (if it fits at all)."""
        st = self.stats
        st.lookups += 1
        st.reads_bytes += nbytes
        if key in self._lru:
            self._lru.move_to_end(key)
            st.hits += 1
            return True
        if nbytes <= self.capacity:
            while self._used + nbytes > self.capacity:
                _, size = self._lru.popitem(last=False)
                self._used -= size
            self._lru[key] = nbytes
            self._used += nbytes
            st.writes_bytes += nbytes
            st.peak_bytes = max(st.peak_bytes, self._used)
        return False
