"""Relative area of an `AcceleratorConfig`: Yosys cell counts of the ``hw/rtl`` units scaled by the configured counts.

Not a technology's area: every figure is in gate equivalents (GE, NAND2 = 1) of Yosys's *generic* cells, as
``python -m hw.rtl.synth`` measures them (``synth -flatten; stat`` with its rough ``GATE_EQUIVALENTS``, Yosys 0.23,
``benchmarks/results/rtl_cells.json``). Use it to compare designs of this suite with each other, never as mm^2.

How a config becomes an area (:func:`area_breakdown`), unit by unit; each unit's GE is a straight line through
its two synthesized parameter points (:data:`UNIT_GE`; ``tests/hw/test_area.py`` checks the lines against the JSON):

* combination: ``num_comb_tiles * num_cpe_per_tile`` C-PEs of ``num_bse_per_cpe`` lanes each;
  ``cpe.v`` at LANES 4 / 8 gives ``fixed + per_lane * LANES`` (a lane is one ``bse.v`` plus its share of the PE).
* aggregation: ``num_agg_units / agg_lanes`` aggregation units of ``agg_lanes`` lanes (``aggregation_unit.v`` at
  LANES 4 / 8; its fixed part is -65 GE, i.e. zero within synthesis noise, so area ~ total lanes).
* decoders: ``num_decoders`` Adaptive-Package decoders at the larger synthesized tile (64 nodes x 16 features).
* requantization: ``num_requant_units`` ``requant.v`` at OUT_BITS 8.
* Condense-Edge: ``eid_matcher.v`` as ``per_fifo * num_eid_fifos + per_entry * num_eid_fifos * eid_fifo_depth``
  (solved exactly from its (4 FIFOs x 4) and (16 x 8) points).
* SRAM: the six buffers' KiB x :data:`SRAM_GE_PER_KIB`, an ASSUMPTION (no CACTI table is checked in): a 6T bit
  cell with periphery at ~0.4 NAND2 per bit (28 nm-class ratio of bit-cell to NAND2 area, array efficiency ~70%).
  Yosys would map memories to flip-flops (4.67 GE per bit, ~12x this), which is why SRAM is not taken from it.

Not counted: the output stage, the DRAM controller, the NoC and control (not configurable counts, or not in RTL).
Non-bit-serial designs (``comb_bit_serial=False``, the FP32 baselines) are charged as BSEs, an underestimate: no MAC
unit is synthesized.
"""

from __future__ import annotations

from dataclasses import dataclass

from hw.config import AcceleratorConfig

RTL_CELLS_SOURCE = "benchmarks/results/rtl_cells.json (python -m hw.rtl.synth, Yosys 0.23 generic cells)"


@dataclass(frozen=True)
class UnitLine:
    """GE of one RTL unit as ``fixed_ge + per_ge * x`` in its scaling parameter ``x`` (``param``), fitted exactly
    through the two synthesized points ``points`` = ((x0, ge0), (x1, ge1)) of ``module``."""

    module: str
    param: str
    points: tuple[tuple[int, float], tuple[int, float]]

    @property
    def per_ge(self) -> float:
        (x0, a0), (x1, a1) = self.points
        return (a1 - a0) / (x1 - x0)

    @property
    def fixed_ge(self) -> float:
        (x0, a0), _ = self.points
        return a0 - self.per_ge * x0

    def ge(self, x: float) -> float:
        return self.fixed_ge + self.per_ge * x


# rel_area (GE) of the rtl_cells.json entries; module -> scaling line
UNIT_GE: dict[str, UnitLine] = {
    "cpe": UnitLine("cpe", "LANES", ((4, 3907.2), (8, 7651.8))),  # MAX_ROW_VALUES 64
    "aggregation_unit": UnitLine("aggregation_unit", "LANES", ((4, 7342.9), (8, 14651.0))),  # PSUM_BITS 16
}
DECODER_GE = 12778.0  # ap_decoder MAX_NODES 64, NODE_BITS 6, MAX_FEATURES 16, FEAT_BITS 4
REQUANT_GE = 14102.0  # requant OUT_BITS 8
EID_POINTS = (((4, 4), 2379.5), ((16, 8), 17165.8))  # eid_matcher ((NUM_FIFOS, DEPTH), GE)
SRAM_GE_PER_KIB = 0.4 * 8 * 1024  # ASSUMPTION: 0.4 GE per SRAM bit including periphery (see the module docstring)
UNITS = ("combination", "aggregation", "decoders", "requant", "condense_edge", "sram")


def eid_coefficients() -> tuple[float, float]:
    """(per-FIFO GE, per-entry GE) solving ``per_fifo * F + per_entry * F * D = GE`` at both synthesized points."""
    ((f0, d0), a0), ((f1, d1), a1) = EID_POINTS
    det = f0 * f1 * d1 - f1 * f0 * d0
    per_fifo = (a0 * f1 * d1 - a1 * f0 * d0) / det
    per_entry = (f0 * a1 - f1 * a0) / det
    return per_fifo, per_entry


def area_breakdown(cfg: AcceleratorConfig) -> dict[str, float]:
    """Relative area (GE) per unit group of :data:`UNITS` for ``cfg`` (see the module docstring for each formula)."""
    per_fifo, per_entry = eid_coefficients()
    num_cpe = cfg.num_comb_tiles * cfg.num_cpe_per_tile
    buffers_kib = sum(cfg.buffer_bytes.values()) / 1024
    return {
        "combination": num_cpe * UNIT_GE["cpe"].ge(cfg.num_bse_per_cpe),
        "aggregation": cfg.num_agg_units // cfg.agg_lanes * UNIT_GE["aggregation_unit"].ge(cfg.agg_lanes),
        "decoders": cfg.num_decoders * DECODER_GE,
        "requant": cfg.num_requant_units * REQUANT_GE,
        "condense_edge": (cfg.num_eid_fifos * (per_fifo + per_entry * cfg.eid_fifo_depth)
                          if cfg.condense_edge else 0.0),
        "sram": buffers_kib * SRAM_GE_PER_KIB,
    }


def relative_area(cfg: AcceleratorConfig) -> float:
    """Total relative area of ``cfg`` in GE (generic-cell gate equivalents; compare designs, not technologies)."""
    return float(sum(area_breakdown(cfg).values()))
