"""Closed-form cross-checks of the cycle model, exact where the closed form is exact.

* :func:`stream_cycles`: one sequential read of ``N`` bytes from idle DRAM = first-row activation +
  ``ceil(N / access) * access / bytes_per_cycle`` + latency (later rows open in other banks while data flows).
* :func:`bitserial_layer_cycles`: a combination-bound layer = ``sum_nz(b) * ceil(F_out / BSEs_per_CPE) / num_CPE``.
* :func:`roofline`: per layer, the maximum over engines of their total work (combination, aggregation,
  decoder, DRAM bytes / bandwidth); a lower bound of the cycle model, tight when one engine dominates.
"""

from __future__ import annotations

import numpy as np

from hw.aggregate_first import AggregateFirstLayer, pass_bit_work
from hw.config import AcceleratorConfig
from hw.layout import feature_layout


def stream_cycles(cfg: AcceleratorConfig, nbytes: int) -> float:
    accesses = -(-int(nbytes) // cfg.dram_access_bytes)
    return cfg.dram_row_miss_cycles + accesses * cfg.dram_access_bytes / cfg.bytes_per_cycle + cfg.dram_latency_cycles


def bitserial_layer_cycles(cfg: AcceleratorConfig, bit_work: int, f_out: int) -> float:
    return bit_work * -(-f_out // cfg.num_bse_per_cpe) / (cfg.num_comb_tiles * cfg.num_cpe_per_tile)


def roofline(workload, cfg: AcceleratorConfig) -> dict:
    """Per-layer engine lower bounds (cycles) and their sum of maxima; DRAM counts only compulsory traffic
    (read inputs and weights once). GIN / GraphSAGE layers: every combination pass, aggregation over ``F_in``."""
    layers, total = [], 0.0
    deg = np.diff(workload.indptr)
    for lt in workload.layers:
        n, f_in, f_out = lt.dims
        xl = feature_layout(lt.x_codes, lt.x_bits, cfg.feature_format, cfg.feature_bits_override)
        w_bits = 32 if cfg.feature_bits_override == 32 else lt.w_bits
        if isinstance(lt, AggregateFirstLayer):  # GIN / GraphSAGE: every pass, aggregation over F_in
            comb = sum(bitserial_layer_cycles(cfg, int(pass_bit_work(cp, cfg.feature_bits_override).sum()), cp.f_out)
                       if cfg.comb_bit_serial else n * cp.codes.shape[1] * cp.f_out / cfg.num_bse for cp in lt.passes)
            width, weight_bits = f_in, sum(cp.codes.shape[1] * cp.f_out for cp in lt.passes) * w_bits
        else:
            if cfg.comb_bit_serial:
                comb = bitserial_layer_cycles(cfg, int(xl.bit_work.sum()), f_out)
            else:
                comb = n * f_in * f_out / cfg.num_bse
            width = f_in if cfg.order == "aggregation_first" else f_out
            weight_bits = f_in * f_out * w_bits
        agg = np.maximum(deg, 1).sum() * -(-width // cfg.agg_lanes) / (cfg.num_agg_units // cfg.agg_lanes)
        compulsory = sum(int(v.sum()) for v in xl.stream.values()) + weight_bits / 8
        dram = compulsory / cfg.bytes_per_cycle
        bound = {"combination": comb, "aggregation": float(agg), "dram_compulsory": dram}
        layers.append(bound)
        total += max(bound.values())
    return {"layers": layers, "total_lower_bound": total}
