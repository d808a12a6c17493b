"""Off-chip memory: one HBM channel, burst-granular, with banks and open-row buffers (transaction level).

A request of ``nbytes`` at ``addr`` is cut into aligned ``dram_access_bytes`` accesses; consecutive accesses in
the same DRAM row form one segment. Per segment: the bank (``row % num_banks``) activates the row if it is not
open (``dram_row_miss_cycles``, overlapping other banks' transfers), then the shared data bus transfers the
segment at ``bytes_per_cycle``. The request completes ``dram_latency_cycles`` after its last beat.

Model assumptions: requests are served in the order the scheduler issues them (the bus time only moves forward),
an open-page policy, writes cost the same as reads, and energy is ``pj_per_bit`` for every transferred bit
(7 pJ/bit HBM, the HyGCN/MEGA methodology) — row activations are not charged separately.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from hw.config import AcceleratorConfig


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
        self.bus_free = 0.0
        self.open_row = [-1] * cfg.dram_num_banks
        self.bank_free = [0.0] * cfg.dram_num_banks
        self.stats = DRAMStats()

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
        k = first
        while k <= last:
            row = k // per_row
            seg = min(last, (row + 1) * per_row - 1) - k + 1
            bank = row % cfg.dram_num_banks
            ready = max(time, self.bank_free[bank])
            if self.open_row[bank] != row:
                ready += cfg.dram_row_miss_cycles
                self.open_row[bank] = row
                st.row_misses += 1
                st.row_hits += seg - 1
            else:
                st.row_hits += seg
            start = max(ready, self.bus_free)
            self.bus_free = start + seg * self.cycles_per_access
            self.bank_free[bank] = self.bus_free
            st.busy_cycles += seg * self.cycles_per_access
            k += seg
        return self.bus_free + cfg.dram_latency_cycles


class AddressMap:
    """Bump allocator of disjoint DRAM regions (row-aligned), one per tensor instance."""

    def __init__(self, align: int) -> None:
        self.align, self.top, self.regions = align, 0, {}

    def alloc(self, name: str, nbytes: int) -> int:
        base = self.top
        self.regions[name] = (base, nbytes)
        self.top += -(-max(nbytes, 1) // self.align) * self.align
        return base
