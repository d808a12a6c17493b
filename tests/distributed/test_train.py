"""CLI and config validation; a slow torchrun run that checks checkpoint + resume equals an uninterrupted run
(bitwise, with dropout on)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distributed.halo import ExchangeConfig
from distributed.train import build_config, parse_args

ROOT = Path(__file__).resolve().parents[2]


def test_world_size_must_equal_parts():
    with pytest.raises(ValueError, match="--nproc-per-node 4"):
        build_config(parse_args(["--parts", "4"]), world_size=2)
    cfg = build_config(parse_args(["--exchange", "int1", "--pipeline", "--sync-every", "10"]), world_size=3)
    assert cfg.num_parts == 3 and cfg.exchange == ExchangeConfig(codec="int1", pipeline=True, sync_every=10)
    cfg = build_config(parse_args(["--pipeline", "--sync-every", "50", "--staleness-budget", "2"]), world_size=2)
    assert cfg.exchange.adaptive and (cfg.exchange.staleness_budget, cfg.exchange.sync_every) == (2.0, 50)
    cfg = build_config(parse_args(["--pipeline", "--smoothing", "0.95", "--halo-dropout", "receiver",
                                   "--fresh-gradients"]), world_size=2)
    assert (cfg.exchange.smoothing, cfg.exchange.halo_dropout, cfg.exchange.stale_gradients) == (0.95, "receiver",
                                                                                                 False)


def test_parser_refuses_an_unknown_codec():
    """The config errors themselves: test_errors.py (test_config_errors_name_the_fix)."""
    with pytest.raises(SystemExit):
        parse_args(["--exchange", "int3"])


@pytest.mark.parametrize("flags, match", [
    (["--epochs", "0"], "epochs=0; must be >= 1"),
    (["--checkpoint-every", "-1", "--checkpoint-dir", "ck"], "checkpoint_every=-1"),
    (["--checkpoint-dir", "ck"], "does nothing"),
    (["--lr", "nan"], "lr=nan"),
    (["--lr", "0"], "lr=0.0"),
    (["--dropout", "1"], "dropout=1.0"),
    (["--smoothing", "0.9"], "needs pipeline=True"),
    (["--hidden", "0"], "hidden_dim=0"),
    (["--timeout-s", "inf"], "--timeout-s inf"),
    (["--parts", "-2"], "--parts -2"),
    (["--pipeline", "--staleness-budget", "1"], "sync_every=K as its bound"),
])
def test_nonsense_values_are_refused(flags, match):
    with pytest.raises(ValueError, match=match):
        build_config(parse_args(flags), world_size=2)


def test_refusal_is_one_line_and_exit_status_2(capsys):
    from distributed.train import main

    with pytest.raises(SystemExit) as exc:
        main(["--epochs", "0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1


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
           "-m", "distributed.train", "--dataset", "cora", "--hidden", "16", "--log-every", "1", *args]
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
    a = json.loads((tmp_path / "full.json").read_text())
    b = json.loads((tmp_path / "r.json").read_text())
    assert [h["epoch"] for h in b["history"]] == list(range(6))  # epochs 0-3 restored from the checkpoint
    keys = ("epoch", "loss", "val_acc", "test_acc", "exchange_bytes")
    assert [[h[k] for k in keys] for h in b["history"]] == [[h[k] for k in keys] for h in a["history"]]
    best = ("best_val_acc", "test_acc_at_best_val", "best_epoch")
    assert [b[k] for k in best] == [a[k] for k in best]


@pytest.mark.slow  # a fresh interpreter importing torch + PyG: ~15-100 s on the loaded 2-core machine
def test_help_runs():
    out = subprocess.run([sys.executable, "-m", "distributed.train", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "--sync-every" in out.stdout and "--exchange" in out.stdout
