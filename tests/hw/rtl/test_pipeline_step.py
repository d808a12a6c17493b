"""hw/rtl/pipeline_step.py: the demo's RTL step runs the export's last layer, whole, on the accelerator top and prints
the bit-exact line; output or cycle mismatches raise; no simulator is a skip line; the pipeline's rtl step needs the
export step's output. The simulator itself is faked in the fast tests (the real top runs in test_accel_top.py's
fast CLI test and, on this Cora export, in the slow test below)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import hw.rtl.sim as rtl_sim
import hw.rtl.top as rtl_top
from hw.rtl.pipeline_step import rtl_check
from hw.rtl.top import LayerMismatch


@pytest.fixture
def check(cora_export, tmp_path, rtl_build_root):
    """rtl_check on the Cora export, run directory tmp_path unless given."""
    return lambda run_dir=tmp_path: rtl_check(cora_export.path, run_dir=run_dir, build_root=rtl_build_root)


def fake_simulator(monkeypatch, *, out_delta: int = 0, cycle_delta: int = 0) -> None:
    """Replace the simulator by the models: outputs = the golden trace (+ out_delta at node 0, feature 0), counters
    = hw.timing.accel_top_layer_cycles (+ cycle_delta on the load phase and the total)."""

    def run(img, **kw):
        c = rtl_top.model_cycles(img)
        out = np.array(img.golden)
        out[0, 0] += out_delta
        c.update(total=c["total"] + cycle_delta, load=c["load"] + cycle_delta)
        return {**{counter: c[phase] for phase, counter in rtl_top.PHASE_COUNTERS.items()}, "err": 0,
                "out": out, "run_s": 0.5, "wall_s": 1.0, "cached_build": True}

    monkeypatch.setattr(rtl_sim, "locate", lambda s: ("/bin/true", ""))
    monkeypatch.setattr(rtl_top, "simulate_layer", run)


def test_rtl_check_prints_and_records_the_last_layer(check, cora_export, monkeypatch, capsys, tmp_path):
    fake_simulator(monkeypatch)
    monkeypatch.chdir(tmp_path)
    run_dir = Path("demo_run")  # relative, as `make demo` passes it: the simulator runs elsewhere
    r = check(run_dir)
    out = capsys.readouterr().out
    assert r["layer"] == len(cora_export.manifest["layers"]) - 1 == 1
    assert (f"RTL == model: layer 1 (64 -> 7 features, 2708 nodes in {r['comb_tiles']} combination + "
            f"{r['agg_tiles']} aggregation tiles) bit-exact, {r['rtl_cycles']} cycles (model: {r['model_cycles']})"
            ) in out
    assert r["rtl_cycles"] == r["model_cycles"] == r["rtl_phases"]["total"] and r["bit_exact"]
    assert r["tiles"] == r["comb_tiles"] + r["agg_tiles"] and r["comb_tiles"] > 1 and r["agg_tiles"] > 1
    assert json.loads((run_dir / "rtl" / "rtl.json").read_text())["rtl_cycles"] == r["rtl_cycles"]
    assert json.loads((run_dir / "rtl" / "layer1.json").read_text())["bit_exact"]


def test_rtl_check_raises_on_an_output_mismatch(check, monkeypatch, capsys):
    fake_simulator(monkeypatch, out_delta=1)
    with pytest.raises(LayerMismatch, match=r"layer 1, node 0, feature 0: RTL .*\(1 elements differ\)"):
        check()
    assert "bit-exact" not in capsys.readouterr().out


def test_rtl_check_raises_on_a_cycle_mismatch(check, monkeypatch, capsys):
    fake_simulator(monkeypatch, cycle_delta=3)
    with pytest.raises(LayerMismatch, match=r"layer 1: RTL cycle counters .* differ from hw.timing"):
        check()
    assert "bit-exact" not in capsys.readouterr().out


def test_rtl_check_skips_without_simulator(check, monkeypatch, capsys):
    monkeypatch.setattr(rtl_sim, "locate", lambda s: (None, f"{s} not installed"))
    r = check()
    out = capsys.readouterr().out
    assert "skipped: no RTL simulator available" in out and "verilator not installed" in out
    assert "bit-exact" not in out and "skipped" in r


@pytest.mark.slow  # one accel_top build for Cora's last layer (about 20 s at -O3) and a 2708-node run
def test_rtl_check_runs_the_real_top(check, verilator_exe, capsys):
    r = check()
    assert r["simulator"] == "verilator" and r["bit_exact"] and r["rtl_cycles"] == r["model_cycles"]
    assert f"bit-exact, {r['rtl_cycles']} cycles (model: {r['model_cycles']})" in capsys.readouterr().out


def test_pipeline_rtl_step_needs_an_export(tmp_path):
    from pipeline import PipelineConfig, PipelineContext
    from pipeline.steps import rtl

    with pytest.raises(RuntimeError, match="export"):
        rtl(PipelineContext(PipelineConfig(run_dir=tmp_path)))
