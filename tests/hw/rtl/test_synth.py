"""hw/rtl/synth.py: the Yosys `stat` parser and the relative-area weights (a real Yosys run when it is installed)."""

from __future__ import annotations

import shutil

import pytest

from hw.rtl.synth import GATE_EQUIVALENTS, MODULES, gate_equivalents, parse_stat, synth_one

STAT = """
=== bse ===

   Number of wires:                 40
   Number of cells:                 7
     $_AND_                          3
     $_DFF_P_                        2
     $_XOR_                          2

2. Printing statistics.

=== bse ===

   Number of wires:                 40
   Number of cells:                 5
     $_ANDNOT_                       1
     $_SDFFE_PP0P_                   2
     $_XNOR_                         2
"""


def test_parse_stat_takes_the_last_report():
    cells = parse_stat(STAT)
    assert cells == {"$_ANDNOT_": 1, "$_SDFFE_PP0P_": 2, "$_XNOR_": 2, "total": 5}
    assert gate_equivalents(cells) == pytest.approx(1.33 + 2 * GATE_EQUIVALENTS["DFF"] + 2 * 2.33, abs=0.05)


def test_parse_stat_rejects_garbage():
    with pytest.raises(RuntimeError, match="no cell statistics"):
        parse_stat("ERROR: syntax error")
    with pytest.raises(RuntimeError, match="sums to"):
        parse_stat(STAT.replace("Number of cells:                 5", "Number of cells:                 9"))


@pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys is not on PATH (apt install yosys)")
def test_synth_bse_with_yosys():
    files, configs = MODULES["bse"]
    r = synth_one(shutil.which("yosys"), "bse", files, configs[0], timeout=300)
    assert "error" not in r, r.get("error")
    assert r["cells"] == sum(r["cell_types"].values()) > 0
    assert any("DFF" in k for k in r["cell_types"]), "a registered unit must have flip-flops"
    assert r["rel_area"] > r["cells"] * 0.6


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys is not on PATH (apt install yosys)")
def test_synth_accel_top_with_yosys():
    """The whole-layer top synthesizes (smallest configuration of MODULES)."""
    files, configs = MODULES["accel_top"]
    r = synth_one(shutil.which("yosys"), "accel_top", files, configs[0], timeout=1800)
    assert "error" not in r, r.get("error")
    assert r["cells"] > 1000 and any("DFF" in k for k in r["cell_types"])
