"""Fault tolerance: one rank raises at epoch k (once: a marker file records the crash); ``torchrun --max-restarts 1``
restarts the job, which resumes from the last checkpoint (`distributed.checkpoint`) and finishes. Checked from rank
0's per-epoch metrics log, with dropout on: the restarted attempt starts right after the last checkpointed epoch,
redoes at most one checkpoint interval, reproduces the loss and accuracies of the redone epochs bitwise (model,
optimizer, owner-sharded per-node quantizer parameters and every rank's RNG states were all restored), and reaches
the last epoch; the result holds the whole history (restored) and the best record over all epochs. Every collective
has a timeout and the launcher a wall-clock limit, so no rank waits forever.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EPOCHS, EVERY, CRASH = 8, 3, 7


@pytest.mark.slow  # two torchrun attempts of 2 ranks: ~60-150 s on the loaded 2-core machine
def test_crash_restart_resumes_from_last_checkpoint(tmp_path):
    log, marker = tmp_path / "metrics.jsonl", tmp_path / "crashed"
    env = {**os.environ, "GNN_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1",
           "--standalone", "-m", "distributed.train", "--dataset", "cora", "--hidden", "16",
           "--epochs", str(EPOCHS), "--quant", "a2q", "--log-every", "1",
           "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", str(EVERY), "--resume",
           "--metrics-log", str(log), "--crash-at-epoch", str(CRASH), "--crash-marker", str(marker),
           "--timeout-s", "60", "--out", str(tmp_path / "result.json")]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-4000:]
    assert marker.exists() and "injected crash at epoch 7" in out.stderr  # it really crashed once
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    first = [r["epoch"] for r in recs if r["attempt"] == 0]
    second = [r["epoch"] for r in recs if r["attempt"] == 1]
    assert first == list(range(CRASH))  # epochs 0..6 done before the crash
    last_ckpt = max(e for e in first if (e + 1) % EVERY == 0)  # epoch 5
    assert second == list(range(last_ckpt + 1, EPOCHS))  # resumed right after it, ran to the end
    redone = set(first) & set(second)
    assert len(redone) <= EVERY  # at most one checkpoint interval lost
    keys = ("loss", "val_acc", "test_acc", "exchange_bytes")
    rec = {(r["attempt"], r["epoch"]): tuple(r[k] for k in keys) for r in recs}
    for e in redone:  # the restored state reproduces the redone epochs bitwise, dropout included
        assert rec[(1, e)] == rec[(0, e)]
    result = json.loads((tmp_path / "result.json").read_text())
    assert [h["epoch"] for h in result["history"]] == list(range(EPOCHS))  # epochs before the checkpoint restored
    history = [tuple(h[k] for k in keys) for h in result["history"]]
    assert history == [rec[(0, e)] for e in range(last_ckpt + 1)] + [rec[(1, e)] for e in second]
    best = max(result["history"], key=lambda h: (h["val_acc"], -h["epoch"]))  # first epoch of the best val acc
    assert (result["best_val_acc"], result["test_acc_at_best_val"], result["best_epoch"]) == \
        (best["val_acc"], best["test_acc"], best["epoch"])
    assert "resumed from" in out.stdout
