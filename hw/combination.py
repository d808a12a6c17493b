"""Combination engine (X W): bit-serial row-product (MEGA) or a MAC array (HyGCN systolic, GCNAX).

Timing (defined here; hw/timing.py does not exist yet):

* Bit-serial row-product: every non-zero ``x[i, k]`` of a ``b``-bit node is streamed LSB->MSB (``b`` cycles)
  against weight row ``W[k, :]`` held in one C-PE's ``num_bse_per_cpe`` bit-serial engines; ``F_out`` outputs need
  ``ceil(F_out / num_bse_per_cpe)`` passes. ``num_comb_tiles * num_cpe_per_tile`` C-PEs work on different
  non-zeros in parallel. Per C-PE the RTL's :func:`hw.timing.cpe_stream_cycles` applies (load 1 + bits - 1 +
  latency 1), with ``busy = ceil(sum_nz(b) * passes / num_cpe)`` (assumption: perfect work balance).
  With ``feature_bits_override`` (the FP32 ablation step) every value, zero or not, takes that many bit cycles.
* MAC array: ``cycles = ceil(rows * F_in * F_out / num_macs) + array_dim`` (dense, no zero skipping).
"""

from __future__ import annotations

from hw.config import AcceleratorConfig
from hw.pipeline import StageStats
from hw.timing import CPE_LATENCY_CYCLES, CPE_LOAD_CYCLES


def bitserial_cycles(cfg: AcceleratorConfig, bit_work: int, f_out: int) -> int:
    """Row-product bit-serial cycles for ``bit_work = sum over streamed values of their bits``."""
    if bit_work == 0:
        return 0
    passes = -(-f_out // cfg.num_bse_per_cpe)
    num_cpe = cfg.num_comb_tiles * cfg.num_cpe_per_tile
    busy = -(-bit_work * passes // num_cpe)
    return CPE_LOAD_CYCLES + busy - 1 + CPE_LATENCY_CYCLES


def mac_cycles(cfg: AcceleratorConfig, rows: int, f_in: int, f_out: int) -> int:
    """Dense MAC-array cycles of a (rows x f_in) @ (f_in x f_out) product."""
    if rows == 0:
        return 0
    return -(-rows * f_in * f_out // cfg.num_bse) + cfg.num_bse_per_cpe


class CombinationStats(StageStats):
    """Combination engine accounting; ``work_items`` = bit-cycles (bit-serial) or MACs."""
