"""Off-chip memory: one HBM channel, burst-granular, with banks and open-row buffers (transaction level).

A request of ``nbytes`` at ``addr`` is cut into aligned ``dram_access_bytes`` accesses; consecutive accesses in
the same DRAM row form one segment. Per segment: the bank (``row % num_banks``) activates the row if it is not
open (``dram_row_miss_cycles`` before its data can move), then the shared data bus transfers the segment at
``bytes_per_cycle``. The request completes ``dram_latency_cycles`` after its last beat.

The bus is a calendar of ``SLOT_CYCLES``-cycle slots, each filled front to back (its frontier = the first free
cycle in it): a transfer takes the earliest free bus time at or after its ready time, so requests issued out of
time order (the
scheduler walks tiles, not time) still share the bandwidth correctly (queueing = waiting for free slots).

Model assumptions: an open-page policy per bank (hit/miss depends on issue order), bank conflicts cost only the
activation delay, writes cost the same as reads, and energy is 7 pJ/bit for every transferred bit (HBM, the
HyGCN/MEGA methodology; see hw/energy.py) — row activations are not charged separately.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hw.config import AcceleratorConfig

SLOT_CYCLES = 32  # bus calendar granularity (cycles)


@dataclass(kw_only=True)
class DRAMStats:
    busy_cycles: float = 0.0  # data-bus transfer cycles
    accesses: int = 0
    row_hits: int = 0
    row_misses: int = 0
    requests: int = 0
    bytes_by_tensor: dict = field(default_factory=lambda: defaultdict(int))  # tensor -> bytes moved (incl. waste)
    useful_bytes_by_tensor: dict = field(default_factory=lambda: defaultdict(int))
    bytes_read: int = 0
    bytes_written: int = 0

    @property
    def total_bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def row_hit_rate(self) -> float:
        return self.row_hits / max(1, self.row_hits + self.row_misses)


class DRAMChannel:
    """Transaction-level HBM channel. ``request`` returns the completion cycle of one request."""

    def __init__(self, cfg: AcceleratorConfig) -> None:
        self.cfg = cfg
        self.access = cfg.dram_access_bytes
        self.cycles_per_access = cfg.dram_access_bytes / cfg.bytes_per_cycle
        self.bpc = cfg.bytes_per_cycle
        self.fill: list[float] = []  # slot index -> bytes already scheduled in it (its frontier)
        self.next_open: list[int] = []  # slot index -> a slot at or after it with room (i itself when it has room)
        self.open_row = [-1] * cfg.dram_num_banks
        self.stats = DRAMStats()

    def _grow(self, k: int) -> None:
        """Make slots 0..k exist (empty)."""
        n = len(self.fill)
        if k >= n:
            extra = max(k + 1 - n, n)  # doubling
            self.fill.extend([0.0] * extra)
            self.next_open.extend(range(n, n + extra))

    def _first_open(self, k: int) -> int:
        """The first slot at or after ``k`` that is not full (union-find with path compression), so that a request
        issued far behind a saturated bus skips the full slots in near-constant time instead of walking them."""
        self._grow(k)
        nxt = self.next_open
        root = k
        while nxt[root] != root:  # a full slot i points at i + 1 or beyond, which always exists
            root = nxt[root]
        while nxt[k] != root:
            nxt[k], k = root, nxt[k]
        return root

    def _transfer(self, ready: float, nbytes: float) -> float:
        """Put ``nbytes`` on the bus at the earliest free capacity from ``ready``; returns the last-beat cycle."""
        bpc, size = self.bpc, SLOT_CYCLES
        k, t, left, end = int(ready // size), ready, float(nbytes), ready
        while left > 0:
            first = self._first_open(k)
            if first != k:  # slots k..first-1 are full
                k, t = first, float(first * size)
            fill = self.fill
            start = max(t, k * size + fill[k] / bpc)  # the slot is filled front to back
            room = ((k + 1) * size - start) * bpc
            if room > 1e-9:
                take = min(room, left)
                end = start + take / bpc
                fill[k] = (end - k * size) * bpc
                left -= take
            if ((k + 1) * size - (k * size + fill[k] / bpc)) * bpc <= 1e-9:  # full for any later request
                self._grow(k + 1)
                self.next_open[k] = k + 1
            k += 1
            t = float(k * size)
        return end

    def request(self, time: float, addr: int, nbytes: int, *, write: bool, tensor: str) -> float:
        """Issue ``nbytes`` at byte ``addr`` at cycle ``time``; returns the cycle its data is complete."""
        if nbytes <= 0:
            return time
        cfg, a = self.cfg, self.access
        first, last = addr // a, (addr + nbytes - 1) // a  # access indices
        per_row = cfg.dram_row_bytes // a
        st = self.stats
        st.requests += 1
        n_acc = last - first + 1
        st.accesses += n_acc
        moved = n_acc * a
        st.bytes_by_tensor[tensor] += moved
        st.useful_bytes_by_tensor[tensor] += nbytes
        if write:
            st.bytes_written += moved
        else:
            st.bytes_read += moved
        k, last_beat = first, time
        while k <= last:
            row = k // per_row
            seg = min(last, (row + 1) * per_row - 1) - k + 1
            bank = row % cfg.dram_num_banks
            ready = time
            if self.open_row[bank] != row:
                ready += cfg.dram_row_miss_cycles
                self.open_row[bank] = row
                st.row_misses += 1
                st.row_hits += seg - 1
            else:
                st.row_hits += seg
            last_beat = max(last_beat, self._transfer(ready, seg * a))
            st.busy_cycles += seg * self.cycles_per_access
            k += seg
        return last_beat + cfg.dram_latency_cycles


class AddressMap:
    """Bump allocator of disjoint DRAM regions (row-aligned), one per tensor instance."""

    def __init__(self, align: int) -> None:
        self.align, self.top, self.regions = align, 0, {}

    def alloc(self, name: str, nbytes: int) -> int:
        base = self.top
        self.regions[name] = (base, nbytes)
        self.top += -(-max(nbytes, 1) // self.align) * self.align
        return base
