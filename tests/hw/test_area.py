"""hw/area.py: the unit lines reproduce the Yosys figures they come from, and the area scales with each count."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

import hw.area as area
from hw.area import SRAM_GE_PER_KIB, UNIT_GE, area_breakdown, eid_coefficients, relative_area
from hw.config import mega

RTL_CELLS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "rtl_cells.json"


def _rel_area(module: str, **params) -> float:
    entries = json.loads(RTL_CELLS.read_text())["modules"][module]
    return next(e["rel_area"] for e in entries if all(e["params"].get(k) == v for k, v in params.items()))


def test_constants_are_the_synthesized_figures():
    for name, line in UNIT_GE.items():
        for x, ge in line.points:
            assert ge == _rel_area(name, **{line.param: x})
            assert line.ge(x) == pytest.approx(ge, abs=1e-9)
    assert area.DECODER_GE == _rel_area("ap_decoder", MAX_NODES=64, MAX_FEATURES=16)
    assert area.REQUANT_GE == _rel_area("requant", OUT_BITS=8)
    per_fifo, per_entry = eid_coefficients()
    for (fifos, depth), ge in area.EID_POINTS:
        assert ge == _rel_area("eid_matcher", NUM_FIFOS=fifos, DEPTH=depth)
        assert per_fifo * fifos + per_entry * fifos * depth == pytest.approx(ge)
    assert per_fifo > 0 and per_entry > 0


def test_mega_breakdown_sums_to_the_total():
    parts = area_breakdown(mega())
    assert set(parts) == set(area.UNITS) and all(v > 0 for v in parts.values())
    assert relative_area(mega()) == pytest.approx(sum(parts.values()))
    assert parts["sram"] == pytest.approx(392 * SRAM_GE_PER_KIB)  # MEGA's six buffers: 392 KiB


@pytest.mark.parametrize(("field", "unit"), [("num_comb_tiles", "combination"), ("num_cpe_per_tile", "combination"),
                                             ("num_decoders", "decoders"), ("num_requant_units", "requant"),
                                             ("num_eid_fifos", "condense_edge")])
def test_doubling_a_unit_count_doubles_exactly_that_unit(field, unit):
    base = mega()
    before, after = area_breakdown(base), area_breakdown(replace(base, **{field: 2 * getattr(base, field)}))
    assert after[unit] == pytest.approx(2 * before[unit])
    assert {k: v for k, v in after.items() if k != unit} == {k: v for k, v in before.items() if k != unit}


def test_lanes_and_depth_scale_along_their_lines():
    base = mega()
    wide = area_breakdown(replace(base, num_bse_per_cpe=64))["combination"]
    assert wide - area_breakdown(base)["combination"] == pytest.approx(32 * 32 * UNIT_GE["cpe"].per_ge)
    more_lanes = area_breakdown(replace(base, num_agg_units=512))["aggregation"]
    assert more_lanes == pytest.approx(2 * area_breakdown(base)["aggregation"])
    _, per_entry = eid_coefficients()
    deeper = area_breakdown(replace(base, eid_fifo_depth=16))["condense_edge"]
    assert deeper - area_breakdown(base)["condense_edge"] == pytest.approx(16 * 8 * per_entry)
    bigger = area_breakdown(replace(base, aggregation_buffer_kib=256))["sram"]
    assert bigger - area_breakdown(base)["sram"] == pytest.approx(128 * SRAM_GE_PER_KIB)
