"""hw/rtl/pipeline_step.py: the demo step on a real Cora export prints the bit-exact line; mismatches raise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hw.rtl.sim as rtl_sim
import hw.rtl.tile as rtl_tile
from hw.rtl.pipeline_step import step_rtl
from hw.rtl.tile import TileMismatch


@pytest.fixture
def ctx(cora_export, tmp_path, rtl_build_root):
    return {"export_path": cora_export.path, "run_dir": tmp_path, "rtl_build_root": rtl_build_root}


def test_step_rtl_bit_exact(ctx, verilator_exe, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    ctx["run_dir"] = Path("demo_run")  # relative, as `make demo` passes it: the simulator runs elsewhere
    step_rtl(ctx)
    out = capsys.readouterr().out
    r = ctx["rtl"]
    assert f"RTL == model: bit-exact, {r['rtl_cycles']} cycles (model: {r['model_cycles']})" in out
    assert r["rtl_cycles"] == r["model_cycles"] and r["bit_exact"] and r["simulator"] == "verilator"
    assert json.loads((ctx["run_dir"] / "rtl" / "rtl.json").read_text())["rows"] == r["rows"]


def test_step_rtl_raises_on_mismatch(ctx, monkeypatch, capsys):
    def wrong(tile, **kw):
        out = np.array(tile.out)
        out[0, 0] += 1
        return {"psum": tile.psum.tolist(), "out": out.tolist(), "cycles": 1, "err": 0}

    monkeypatch.setattr(rtl_sim, "locate", lambda s: ("/bin/true", ""))
    monkeypatch.setattr(rtl_tile, "simulate_tile", wrong)
    with pytest.raises(TileMismatch, match=r"out\[row 0"):
        step_rtl(ctx)
    assert "bit-exact" not in capsys.readouterr().out


def test_step_rtl_skips_without_simulator(ctx, monkeypatch, capsys):
    monkeypatch.setattr(rtl_sim, "locate", lambda s: (None, f"{s} not installed"))
    step_rtl(ctx)
    out = capsys.readouterr().out
    assert "skipped: no RTL simulator available" in out and "verilator not installed" in out
    assert "bit-exact" not in out and "skipped" in ctx["rtl"]


def test_step_rtl_needs_an_export(tmp_path):
    with pytest.raises(RuntimeError, match="export"):
        step_rtl({"run_dir": tmp_path})
