"""CLI and config validation; a slow torchrun run that checks checkpoint + resume equals an uninterrupted run."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distributed.halo import ExchangeConfig
from distributed.runner import DistTrainConfig
from distributed.train import build_config, parse_args

ROOT = Path(__file__).resolve().parents[2]


def test_world_size_must_equal_parts():
    with pytest.raises(ValueError, match="--nproc-per-node 4"):
        build_config(parse_args(["--parts", "4"]), world_size=2)
    cfg = build_config(parse_args(["--exchange", "int1", "--pipeline", "--sync-every", "10"]), world_size=3)
    assert cfg.num_parts == 3 and cfg.exchange == ExchangeConfig(codec="int1", pipeline=True, sync_every=10)


def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match="valid: none, a2q, degree-aware, dq-int8, dq-int4"):
        DistTrainConfig(quant="int8")
    with pytest.raises(ValueError, match="valid codecs"):
        ExchangeConfig(codec="int3")
    with pytest.raises(ValueError, match="pipeline"):
        ExchangeConfig(sync_every=5)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        DistTrainConfig(resume=True)
    with pytest.raises(SystemExit):
        parse_args(["--exchange", "int3"])
    with pytest.raises(ValueError, match="valid: cpu, cuda"):
        DistTrainConfig(device="tpu")
    with pytest.raises(ValueError, match="use device 'cpu' with --quant"):
        DistTrainConfig(device="cuda", quant="a2q")


def test_device_flag(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert build_config(parse_args([]), world_size=1).device == "cpu"  # auto without a GPU
    with pytest.raises(ValueError, match="use --device cpu"):
        build_config(parse_args(["--device", "cuda"]), world_size=1)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert build_config(parse_args([]), world_size=1).device == "cuda"  # auto with a GPU: NCCL


def torchrun(args, tmp_path, nproc=2):
    env = {**os.environ, "GNN_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc), "--standalone",
           "-m", "distributed.train", "--dataset", "cora", "--hidden", "16", "--dropout", "0",
           "--log-every", "1", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_torchrun_checkpoint_resume_matches_uninterrupted(tmp_path):
    full = torchrun(["--epochs", "6", "--out", str(tmp_path / "full.json")], tmp_path)
    assert full.returncode == 0, full.stderr[-3000:]
    ck = str(tmp_path / "ck")
    first = torchrun(["--epochs", "4", "--checkpoint-dir", ck, "--checkpoint-every", "4"], tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    second = torchrun(["--epochs", "6", "--checkpoint-dir", ck, "--resume", "--out", str(tmp_path / "r.json")],
                      tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "resumed" in second.stdout and "epoch    0" in full.stdout  # progress printed by rank 0
    a = json.loads((tmp_path / "full.json").read_text())["history"]
    b = json.loads((tmp_path / "r.json").read_text())["history"]
    assert [h["epoch"] for h in b] == [4, 5]
    assert [h["loss"] for h in b] == pytest.approx([h["loss"] for h in a[4:]], abs=1e-6)


@pytest.mark.slow  # a fresh interpreter importing torch + PyG: ~15-100 s on the loaded 2-core machine
def test_help_runs():
    out = subprocess.run([sys.executable, "-m", "distributed.train", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "--sync-every" in out.stdout and "--exchange" in out.stdout
