"""Closed-form cross-checks of the cycle model, exact where the closed form is exact.

* :func:`stream_cycles`: one sequential read of ``N`` bytes from idle DRAM = first-row activation +
  ``ceil(N / access) * access / bytes_per_cycle`` + latency (later rows open in other banks while data flows).
* :func:`bitserial_layer_cycles`: a combination-bound layer = ``sum_nz(b) * ceil(F_out / BSEs_per_CPE) / num_CPE``.
* :func:`roofline`: per layer, the maximum over engines of their total work (combination, aggregation,
  decoder, DRAM bytes / bandwidth); a lower bound of the cycle model, tight when one engine dominates.
"""

from __future__ import annotations

import numpy as np

from hw.config import AcceleratorConfig
from hw.layout import feature_layout


def stream_cycles(cfg: AcceleratorConfig, nbytes: int) -> float:
    accesses = -(-int(nbytes) // cfg.dram_access_bytes)
    return cfg.dram_row_miss_cycles + accesses * cfg.dram_access_bytes / cfg.bytes_per_cycle + cfg.dram_latency_cycles


def bitserial_layer_cycles(cfg: AcceleratorConfig, bit_work: int, f_out: int) -> float:
    return bit_work * -(-f_out // cfg.num_bse_per_cpe) / (cfg.num_comb_tiles * cfg.num_cpe_per_tile)


def roofline(workload, cfg: AcceleratorConfig) -> dict:
    """Per-layer engine lower bounds (cycles) and their sum of maxima; DRAM counts only compulsory traffic
    (read inputs and weights once, write XW and outputs once)."""
    layers, total = [], 0.0
    deg = np.diff(workload.indptr)
    for lt in workload.layers:
        n, f_in = lt.x_codes.shape
        f_out = lt.xw_codes.shape[1]
        xl = feature_layout(lt.x_codes, lt.x_bits, cfg.feature_format, cfg.feature_bits_override)
        if cfg.comb_bit_serial:
            comb = bitserial_layer_cycles(cfg, int(xl.bit_work.sum()), f_out)
        else:
            comb = n * f_in * f_out / cfg.num_bse
        width = f_in if cfg.order == "aggregation_first" else f_out
        agg = np.maximum(deg, 1).sum() * -(-width // cfg.agg_lanes) / (cfg.num_agg_units // cfg.agg_lanes)
        w_bits = 32 if cfg.feature_bits_override == 32 else lt.w_bits
        compulsory = sum(int(v.sum()) for v in xl.stream.values()) + f_in * f_out * w_bits / 8
        dram = compulsory / cfg.bytes_per_cycle
        bound = {"combination": comb, "aggregation": float(agg), "dram_compulsory": dram}
        layers.append(bound)
        total += max(bound.values())
    return {"layers": layers, "total_lower_bound": total}
