"""Energy constants (one table, each cited) and the energy of a simulated run.

Logic and SRAM energies are Horowitz, "Computing's energy problem", ISSCC 2014 (45 nm, 0.9 V; via secondary
copies, see the research notes, hardware.md §summary 12), scaled to 28 nm by ``TECH_SCALE_45_TO_28 = 0.45``:
the Stillmaker–Baas scaling equations give roughly 0.4-0.5x energy from 45 to 28 nm; 0.45 is our interpolation,
not a published number. DRAM energy is not scaled (off-chip, an interface + array cost): 7 pJ/bit HBM, the value
HyGCN used and MEGA adopted (methodology per Dongyunkam/DRAM_info, SECONDARY). SRAM per-access energy is
interpolated in log2(capacity) between Horowitz's 8 KB (10 pJ) / 32 KB (20 pJ) / 1 MB (100 pJ) per 64-bit access.
A bit-serial engine cycle (1 activation bit x a 4-bit weight: AND + 8-bit shift-add) is charged one 8-bit add.
"""

from __future__ import annotations

import numpy as np

TECH_SCALE_45_TO_28 = 0.45  # Stillmaker & Baas 2017 scaling, interpolated (assumption)

# name -> (pJ at 45 nm, citation)
ENERGY_45NM_PJ: dict[str, tuple[float, str]] = {
    "add_int8": (0.03, "Horowitz ISSCC'14: 8-bit add 0.03 pJ"),
    "add_int16": (0.05, "Horowitz ISSCC'14: 16-bit add ~0.05 pJ (between 8b 0.03 and 32b 0.1)"),
    "add_int32": (0.1, "Horowitz ISSCC'14: 32-bit add 0.1 pJ"),
    "mult_int8": (0.2, "Horowitz ISSCC'14: 8-bit mult 0.2 pJ"),
    "mult_int32": (3.1, "Horowitz ISSCC'14: 32-bit mult 3.1 pJ"),
    "add_fp32": (0.9, "Horowitz ISSCC'14: FP32 add 0.9 pJ"),
    "mult_fp32": (3.7, "Horowitz ISSCC'14: FP32 mult 3.7 pJ"),
    "bse_cycle": (0.03, "one bit-serial step = one 8-bit add (assumption on Horowitz's 8-bit add)"),
}
SRAM_64BIT_PJ_45NM = ((8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0))  # Horowitz ISSCC'14
HBM_PJ_PER_BIT = 7.0  # HyGCN (HPCA 2020) / MEGA methodology; not technology scaled


def op_pj(name: str) -> float:
    """Energy of one operation at 28 nm in pJ."""
    if name not in ENERGY_45NM_PJ:
        raise ValueError(f"unknown operation {name!r}; valid: {sorted(ENERGY_45NM_PJ)}")
    return ENERGY_45NM_PJ[name][0] * TECH_SCALE_45_TO_28


def sram_pj_per_byte(capacity_bytes: int) -> float:
    """28 nm SRAM energy per byte accessed, log-interpolated/extrapolated from Horowitz's 64-bit access energies."""
    caps = np.log2([c for c, _ in SRAM_64BIT_PJ_45NM])
    pj = [e for _, e in SRAM_64BIT_PJ_45NM]
    x = np.log2(max(capacity_bytes, 1))
    e64 = float(np.interp(x, caps, pj)) if x <= caps[-1] else pj[-1] * 2 ** ((x - caps[-1]) / 2)
    return e64 / 8.0 * TECH_SCALE_45_TO_28


def energy_breakdown(*, dram_bytes: int, buffers: dict, comb_ops: dict, agg_ops: dict, codec_bytes: int
                     ) -> dict[str, float]:
    """Energy in pJ by component. buffers: name -> (capacity, bytes accessed); *_ops: op name -> count."""
    out = {"dram": dram_bytes * 8 * HBM_PJ_PER_BIT}
    for name, (cap, nbytes) in buffers.items():
        out[f"sram_{name}"] = nbytes * sram_pj_per_byte(cap)
    out["combination"] = sum(op_pj(k) * v for k, v in comb_ops.items())
    out["aggregation"] = sum(op_pj(k) * v for k, v in agg_ops.items())
    out["codec"] = codec_bytes * 8 * op_pj("add_int8") / 8  # ~one 8-bit shift/add per decoded byte (assumption)
    out["total"] = sum(out.values())
    return out
