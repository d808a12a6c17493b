import pytest

from hw.energy import ENERGY_45NM_PJ, HBM_PJ_PER_BIT, TECH_SCALE_45_TO_28, energy_breakdown, op_pj, sram_pj_per_byte


def test_constants_cited_and_scaled():
    assert all("Horowitz" in src or "assumption" in src for _, src in ENERGY_45NM_PJ.values())
    assert op_pj("mult_int32") == pytest.approx(3.1 * TECH_SCALE_45_TO_28)
    with pytest.raises(ValueError, match="valid"):
        op_pj("mult_int4")


def test_sram_interpolation_hits_horowitz_points_and_grows():
    assert sram_pj_per_byte(8 * 1024) == pytest.approx(10.0 / 8 * TECH_SCALE_45_TO_28)
    assert sram_pj_per_byte(1024 * 1024) == pytest.approx(100.0 / 8 * TECH_SCALE_45_TO_28)
    sizes = [1024, 8192, 24 * 1024, 96 * 1024, 2**20, 2**24]
    assert [sram_pj_per_byte(s) for s in sizes] == sorted(sram_pj_per_byte(s) for s in sizes)


def test_breakdown_sums_and_dram_is_7pj_per_bit():
    e = energy_breakdown(dram_bytes=1000, buffers={"input": (65536, 800)}, comb_ops={"bse_cycle": 10},
                         agg_ops={"add_int16": 5}, codec_bytes=0)
    assert e["dram"] == 1000 * 8 * HBM_PJ_PER_BIT
    assert e["total"] == pytest.approx(sum(v for k, v in e.items() if k != "total"))
