"""Exact resume (distributed.checkpoint): a run stopped or killed and resumed equals the uninterrupted run bitwise,
with dropout on and the stateful halo exchange (stochastic int2 codec, pipelined stale halos picked by the Bounded
Staleness Adaptor and smoothed, delta references);
a checkpoint whose file is corrupt or missing is refused with an error naming the file.

The spawned runs share one module fixture: 2 gloo ranks on Cora, hidden 16, 6 epochs.
"""

import json
import shutil
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from distributed import checkpoint as ckpt
from distributed.halo import ExchangeConfig
from distributed.launch import RankFailure, spawn
from distributed.runner import DistTrainConfig, train_many
from gnn.files import write_bytes

EPOCHS = 6
METRICS = ("epoch", "loss", "val_acc", "test_acc", "exchange_bytes", "stale_halos", "drift")
BEST = ("best_val_acc", "test_acc_at_best_val", "best_epoch")
BASE = DistTrainConfig(dataset="cora", num_parts=2, hidden_dim=16, epochs=EPOCHS, log_every=0,
                       exchange=ExchangeConfig(codec="int2", pipeline=True, sync_every=4, staleness_budget=0.5,
                                               delta=True, refresh_every=3, smoothing=0.8,
                                               halo_dropout="receiver"))  # dropout 0.5 (the default)


def metrics(result: dict) -> list[tuple]:
    return [tuple(h[k] for k in METRICS) for h in result["history"]]


def assert_same_run(got: dict, want: dict) -> None:
    """Bitwise: per-epoch metrics, best record and final parameters."""
    assert metrics(got) == metrics(want)
    assert [got[k] for k in BEST] == [want[k] for k in BEST]
    assert got["state_dict"].keys() == want["state_dict"].keys()
    for k, v in want["state_dict"].items():
        assert torch.equal(got["state_dict"][k], v), k


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One spawn: uninterrupted; 4 epochs with checkpoints (a clean stop); resumed to 6 epochs."""
    tmp = tmp_path_factory.mktemp("resume")
    stop = replace(BASE, epochs=4, checkpoint_every=2, checkpoint_dir=str(tmp / "ck"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GNN_CACHE_DIR", str(tmp / "cache"))
        results = spawn(train_many, 2, [BASE, stop, replace(stop, epochs=EPOCHS, resume=True)], timeout_s=600)
    return SimpleNamespace(tmp=tmp, ckdir=tmp / "ck", results=results)


def test_stop_and_resume_equals_uninterrupted(runs):
    for full, _, resumed in runs.results:  # every rank
        assert [h["epoch"] for h in resumed["history"]] == list(range(EPOCHS))
        assert full["setup_bytes"] > 0 and full["input_codec"] == "fp32"  # Cora's row-normalised rows: no fp16
        assert resumed["setup_bytes"] == 0 and resumed["input_codec"] == "reused from the checkpoint"
        assert len({h["loss"] for h in full["history"]}) == EPOCHS  # it trains: not a constant run
        assert {h["stale_halos"] for h in full["history"][3:]} == {True, False}  # the adaptor's state matters
        assert_same_run(resumed, full)
    manifest = json.loads((runs.ckdir / ckpt.MANIFEST).read_text())
    assert manifest["step"] == "step-5" and manifest["world_size"] == 2
    assert sorted(p.name for p in runs.ckdir.iterdir()) == [ckpt.MANIFEST, "step-5"]  # older steps removed


def test_kill_inside_checkpoint_write_then_resume_equals_uninterrupted(runs, tmp_path, monkeypatch):
    """Rank 1 is killed (SIGKILL) after writing its files of step 3, before the manifest switch: the partial step is
    never loaded, the resumed run starts after step 1 and reproduces the uninterrupted run."""
    ckdir, marker = tmp_path / "ck", tmp_path / "crashed"
    cfg = replace(BASE, checkpoint_every=2, checkpoint_dir=str(ckdir), resume=True, crash_at_epoch=3,
                  crash_point="checkpoint", crash_marker=str(marker))
    monkeypatch.setenv("GNN_CACHE_DIR", str(runs.tmp / "cache"))
    with pytest.raises(RankFailure, match="rank 1: killed by SIGKILL"):
        spawn(train_many, 2, [cfg], timeout_s=600)
    assert marker.exists() and json.loads((ckdir / ckpt.MANIFEST).read_text())["step"] == "step-1"
    assert (ckdir / "step-3" / ckpt.rank_file(1)).exists()  # the partial step: rank 1 had written its files
    resumed = spawn(train_many, 2, [cfg], timeout_s=600)
    for (full, _, _), again in zip(runs.results, resumed, strict=True):
        assert_same_run(again[0], full)
    assert sorted(p.name for p in ckdir.iterdir()) == [ckpt.MANIFEST, "step-5"]


def test_corrupt_shard_is_refused_naming_the_file(runs, tmp_path, monkeypatch):
    ckdir = tmp_path / "ck"
    shutil.copytree(runs.ckdir, ckdir)
    shard = ckdir / "step-5" / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    monkeypatch.setenv("GNN_CACHE_DIR", str(runs.tmp / "cache"))
    cfg = replace(BASE, epochs=EPOCHS + 2, checkpoint_every=2, checkpoint_dir=str(ckdir), resume=True)
    with pytest.raises(RankFailure) as exc:
        spawn(train_many, 2, [cfg], timeout_s=600)
    assert "CheckpointError" in str(exc.value) and f"checkpoint file {shard} is corrupt" in str(exc.value)


# --- the file protocol, without processes --------------------------------------------------------------------------
CONFIG = {"dataset": "cora", "seed": 0}


def write_step(ckdir, epoch: int = 3) -> dict:
    step = ckdir / ckpt.step_name(epoch)
    step.mkdir(parents=True)
    ckpt.save_atomic({"x": torch.arange(4)}, step / ckpt.rank_file(0))
    write_bytes(step / "__0_0.distcp", b"shard")
    manifest = ckpt.make_manifest(ckdir, epoch, 1, CONFIG)
    ckpt.write_manifest(ckdir, manifest)
    return manifest


def test_manifest_names_the_missing_or_corrupt_file(tmp_path):
    manifest = write_step(tmp_path)
    assert ckpt.read_manifest(tmp_path) == manifest and set(manifest["files"]) == {"step-3/rank-0.pt",
                                                                                   "step-3/__0_0.distcp"}
    ckpt.check_manifest(tmp_path, manifest, 1, CONFIG)
    (tmp_path / "step-3" / "__0_0.distcp").write_bytes(b"sharD")
    with pytest.raises(ckpt.CheckpointError, match=r"step-3/__0_0.distcp is corrupt"):
        ckpt.check_manifest(tmp_path, manifest, 1, CONFIG)
    (tmp_path / "step-3" / "__0_0.distcp").write_bytes(b"shard")
    (tmp_path / "step-3" / "rank-0.pt").unlink()
    with pytest.raises(ckpt.CheckpointError, match=r"step-3/rank-0.pt is missing"):
        ckpt.check_manifest(tmp_path, manifest, 1, CONFIG)


def test_manifest_of_another_run_is_refused(tmp_path):
    manifest = write_step(tmp_path)
    with pytest.raises(ckpt.CheckpointError, match="written by 1 ranks, this run has 2"):
        ckpt.check_manifest(tmp_path, manifest, 2, CONFIG)
    with pytest.raises(ckpt.CheckpointError, match="seed: 0 -> 1"):
        ckpt.check_manifest(tmp_path, manifest, 1, {**CONFIG, "seed": 1})


def test_partial_steps_and_temp_files_are_removed(tmp_path):
    write_step(tmp_path, epoch=3)
    (tmp_path / "step-5").mkdir()  # a write cut short: not in the manifest
    (tmp_path / "step-5" / "rank-1.pt").write_bytes(b"half")
    (tmp_path / f".{ckpt.MANIFEST}.tmp-123").write_text("{")
    (tmp_path / "notes").mkdir()  # not ours: kept
    assert ckpt.remove_stale(tmp_path, keep="step-3") == [f".{ckpt.MANIFEST}.tmp-123", "step-5"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [ckpt.MANIFEST, "notes", "step-3"]


def test_unreadable_manifest_and_old_layout_are_refused(tmp_path):
    assert ckpt.read_manifest(tmp_path) is None
    (tmp_path / ".metadata").write_bytes(b"")
    with pytest.raises(ckpt.CheckpointError, match="old flat layout"):
        ckpt.read_manifest(tmp_path)
    (tmp_path / ckpt.MANIFEST).write_text('{"step": ')
    with pytest.raises(ckpt.CheckpointError, match="unreadable"):
        ckpt.read_manifest(tmp_path)


def draws() -> tuple:
    import random

    import numpy as np

    return torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)]  # noqa: NPY002


def test_rng_states_round_trip_through_a_weights_only_file(tmp_path):
    cpu = torch.device("cpu")
    ckpt.save_atomic(ckpt.rng_state(cpu), tmp_path / "rng.pt")
    first = draws()
    ckpt.set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True), cpu)
    assert draws() == first


def test_exchanger_state_resolves_transfers_in_flight(tmp_path):
    class InFlight:  # a posted Transfer: result() waits and decodes
        def __init__(self, rows):
            self.rows_, self.waited = rows, False

        def result(self):
            self.waited = True
            return self.rows_.clone()

    fwd, bwd = InFlight(torch.randn(3, 2)), InFlight(torch.randn(4, 2))
    ex = SimpleNamespace(ref_send=torch.randn(4, 2), ref_recv=torch.randn(3, 2), last_halo=None,
                         pending_fwd=(fwd, True), pending_bwd=bwd, prev_sent=torch.randn(4, 2), drift=(0.25, 4.0),
                         smooth_fwd=torch.randn(3, 2), smooth_bwd=torch.randn(4, 2))
    ckpt.save_atomic(ckpt.exchanger_state(ex), tmp_path / "ex.pt")
    assert fwd.waited and bwd.waited and isinstance(ex.pending_bwd, ckpt.ResolvedTransfer)
    fresh = SimpleNamespace()
    ckpt.load_exchanger_state(fresh, torch.load(tmp_path / "ex.pt", weights_only=True), torch.device("cpu"))
    assert torch.equal(fresh.ref_send, ex.ref_send) and torch.equal(fresh.ref_recv, ex.ref_recv)
    assert fresh.last_halo is None and fresh.pending_fwd[1] is True
    assert torch.equal(fresh.prev_sent, ex.prev_sent) and fresh.drift == (0.25, 4.0)  # the adaptor's measurement
    assert torch.equal(fresh.smooth_fwd, ex.smooth_fwd) and torch.equal(fresh.smooth_bwd, ex.smooth_bwd)
    assert torch.equal(fresh.pending_fwd[0].result(), ex.pending_fwd[0].result())
    assert torch.equal(fresh.pending_bwd.result(), ex.pending_bwd.result())
