"""Graph-transformer checkpoints (graphtransformer/checkpointing.py): a run that crashes and resumes from its last
checkpoint equals the uninterrupted run (every seed's record: epoch, accuracies, losses), losing at most one
checkpoint interval; single-process by hand, and two ranks (FSDP2 or DDP) restarted by ``torchrun --max-restarts 1``."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EPOCHS, EVERY, CRASH = 5, 2, 3  # checkpoints after epochs 1 and 3; the crash comes before epoch 3
COMPARED = ("epoch", "val_acc", "val_loss", "test_acc", "train_loss", "epochs_run", "seed")


def run(args: list[str], tmp: Path, launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    # One intra-op thread: with two, PyTorch 2.13's CPU kernels now and then round one worker's chunk differently
    # on a process's first call (torch.exp of 26K floats: half the values 1 ULP apart in about 1 process in 20),
    # so two processes of the same seed can differ in the last bits and the bitwise comparison below would flake.
    env = {**os.environ, "GNN_CACHE_DIR": str(tmp / "cache"), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, *(launcher or []), "-m", "graphtransformer.train", "--dataset", "cora", "--hidden", "16",
           "--heads", "2", "--epochs", str(EPOCHS), *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def records(path: Path) -> list[tuple]:
    return [tuple(r[k] for k in COMPARED) for r in json.loads(path.read_text())["seeds"]]


def crash_and_resume_args(tmp: Path) -> list[str]:
    return ["--checkpoint-dir", str(tmp / "ck"), "--checkpoint-every", str(EVERY), "--resume",
            "--crash-at-epoch", str(CRASH), "--crash-marker", str(tmp / "crashed"), "--out", str(tmp / "resumed.json")]


def test_single_process_crash_then_resume_equals_uninterrupted(tmp_path):
    full = run(["--seeds", "2", "--out", str(tmp_path / "full.json")], tmp_path)
    assert full.returncode == 0, full.stderr[-3000:]
    crashed = run(["--seeds", "2", *crash_and_resume_args(tmp_path)], tmp_path)
    assert crashed.returncode != 0 and "injected crash at epoch 3" in crashed.stderr
    assert json.loads((tmp_path / "ck" / "seed0" / "latest.json").read_text())["step"] == "step-1"
    resumed = run(["--seeds", "2", *crash_and_resume_args(tmp_path)], tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "seed 0: resumed from" in resumed.stdout and "at epoch 2" in resumed.stdout
    assert records(tmp_path / "resumed.json") == records(tmp_path / "full.json")
    assert all((tmp_path / "ck" / f"seed{s}" / "done.json").is_file() for s in (0, 1))
    again = run(["--seeds", "2", "--checkpoint-dir", str(tmp_path / "ck"), "--out", str(tmp_path / "x.json")],
                tmp_path)  # without --resume a folder that holds a checkpoint is refused, naming what to do
    assert again.returncode == 2 and "pass --resume" in again.stderr and len(again.stderr.splitlines()) == 1


def test_checkpointing_refuses_quantized_training(tmp_path, monkeypatch, refusal):
    from graphtransformer import train

    monkeypatch.setattr(sys, "argv", ["graphtransformer.train", "--quant", "a2q", "--checkpoint-dir",
                                      str(tmp_path / "ck")])
    assert "--checkpoint-dir covers the unquantized training loop" in refusal(train.main)


@pytest.mark.slow  # two torchrun jobs of 2 ranks: ~60 s on the 2-core machine
@pytest.mark.parametrize("sharding", [["--fsdp"], []], ids=["fsdp2", "ddp"])
def test_ranks_restarted_by_torchrun_resume_and_equal_uninterrupted(tmp_path, sharding):
    """FSDP2-sharded, and replicated under DDP (whose checkpoints keep the unwrapped parameter names)."""
    launcher = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--standalone"]
    full = run(["--cp", "2", *sharding, "--out", str(tmp_path / "full.json")], tmp_path, launcher)
    assert full.returncode == 0, full.stderr[-3000:]
    restarted = run(["--cp", "2", *sharding, *crash_and_resume_args(tmp_path)], tmp_path,
                    [*launcher[:4], "--max-restarts", "1", "--standalone"])
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert "injected crash at epoch 3 on rank 1" in restarted.stderr  # it really crashed once
    assert "seed 0: resumed from" in restarted.stdout and "at epoch 2" in restarted.stdout  # one epoch redone
    assert records(tmp_path / "resumed.json") == records(tmp_path / "full.json")
