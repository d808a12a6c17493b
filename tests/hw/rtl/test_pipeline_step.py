"""hw/rtl/pipeline_step.py: the demo's RTL check on a real Cora export prints the bit-exact line; mismatches raise;
the pipeline's rtl step needs the export step's output."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hw.rtl.sim as rtl_sim
import hw.rtl.tile as rtl_tile
from hw.rtl.pipeline_step import rtl_check
from hw.rtl.tile import TileMismatch


@pytest.fixture
def check(cora_export, tmp_path, rtl_build_root):
    """rtl_check on the Cora export, run directory tmp_path unless given."""
    return lambda run_dir=tmp_path: rtl_check(cora_export.path, run_dir=run_dir, build_root=rtl_build_root)


def test_rtl_check_bit_exact(check, verilator_exe, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    run_dir = Path("demo_run")  # relative, as `make demo` passes it: the simulator runs elsewhere
    r = check(run_dir)
    out = capsys.readouterr().out
    assert f"RTL == model: bit-exact, {r['rtl_cycles']} cycles (model: {r['model_cycles']})" in out
    assert r["rtl_cycles"] == r["model_cycles"] and r["bit_exact"] and r["simulator"] == "verilator"
    assert json.loads((run_dir / "rtl" / "rtl.json").read_text())["rows"] == r["rows"]


def test_rtl_check_raises_on_mismatch(check, monkeypatch, capsys):
    def wrong(tile, **kw):
        out = np.array(tile.out)
        out[0, 0] += 1
        return {"psum": tile.psum.tolist(), "out": out.tolist(), "cycles": 1, "err": 0}

    monkeypatch.setattr(rtl_sim, "locate", lambda s: ("/bin/true", ""))
    monkeypatch.setattr(rtl_tile, "simulate_tile", wrong)
    with pytest.raises(TileMismatch, match=r"out\[row 0"):
        check()
    assert "bit-exact" not in capsys.readouterr().out


def test_rtl_check_skips_without_simulator(check, monkeypatch, capsys):
    monkeypatch.setattr(rtl_sim, "locate", lambda s: (None, f"{s} not installed"))
    r = check()
    out = capsys.readouterr().out
    assert "skipped: no RTL simulator available" in out and "verilator not installed" in out
    assert "bit-exact" not in out and "skipped" in r


def test_pipeline_rtl_step_needs_an_export(tmp_path):
    from pipeline import PipelineConfig, PipelineContext
    from pipeline.steps import rtl

    with pytest.raises(RuntimeError, match="export"):
        rtl(PipelineContext(PipelineConfig(run_dir=tmp_path)))
