"""pipeline/: the main job's command line, its typed context and the ``python -m gnn.pipeline`` alias."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import STEPS, PipelineConfig, PipelineContext, main

REPO_ROOT = Path(__file__).resolve().parents[1]
FLAGS = ("--dataset", "--model", "--seeds", "--epochs", "--data-root", "--run-dir", "--steps", "--no-progress")
ALIAS_LINE = "gnn.pipeline is now `python -m pipeline`; this alias goes in the next release"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, capture_output=True, text=True)


def test_config_is_frozen_and_defaults_to_every_step_in_order(tmp_path):
    cfg = PipelineConfig(run_dir=tmp_path)
    assert cfg.steps == tuple(s.name for s in STEPS) == ("train", "quantize", "export", "simulate", "rtl")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seeds = 1
    ctx = PipelineContext(cfg)
    assert ctx.fp32 is ctx.quant is ctx.export_path is ctx.simulation is ctx.rtl is None


def test_unknown_step_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["--steps", "train,bogus", "--run-dir", str(tmp_path)])
    assert e.value.code == 2 and "unknown step(s) ['bogus']" in capsys.readouterr().err


def test_help_lists_the_flags_and_the_alias_warns_once_then_runs_it():
    new, old = _run("pipeline", "--help"), _run("gnn.pipeline", "--help")
    assert new.returncode == old.returncode == 0, (new.stderr, old.stderr)
    assert all(f in new.stdout for f in FLAGS) and old.stdout == new.stdout
    assert new.stderr == "" and old.stderr.strip() == ALIAS_LINE
