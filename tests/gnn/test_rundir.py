"""Run directories: checkpoints load as data only, a run directory is never reused silently or by two writers,
every file is written atomically, a resumed run is the uninterrupted one, and bad settings stop before training."""

import fcntl
import json
import os
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from gnn.data.loaders import load_dataset
from gnn.data.synthetic import sbm_graph
from gnn.models import build_model
from gnn.presets import model_and_train_config
from gnn.rundir import RunDirError, config_changes, sha256_file, truncate_jsonl
from gnn.train import main
from gnn.trainer import TrainConfig, load_checkpoint, rng_state, seed_everything, set_rng_state, train_one

QUICK = ("--dataset", "cora", "--model", "gcn", "--epochs", "2", "--seeds", "1", "--no-progress")


def _main(run_dir, *extra):
    return main([*QUICK, "--run-dir", str(run_dir), *extra])


def _refused(capsys, argv) -> str:
    """Run main, expect the one-line usage error (exit 2), return it."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


@pytest.fixture(scope="module")
def sbm():
    return sbm_graph(200, num_classes=4, num_features=16, seed=0)


def _train(graph, run_dir, epochs, resume=False, **cfg):
    seed_everything(0)
    model_cfg, _ = model_and_train_config(graph, "gcn" if graph.task == "node" else "gin")
    return train_one(build_model(model_cfg), graph, graph.splits[0],
                     TrainConfig(epochs=epochs, weight_decay=0.0, **{"checkpoint_every": 2, **cfg}), seed=0,
                     run_dir=run_dir, resume=resume, progress=False)


def _epochs(run_dir):
    return [json.loads(line)["epoch"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


# ---- checkpoints hold data only -------------------------------------------------------------------------------


class _Payload:
    """Unpickling this (weights_only=False) creates a file: the stand-in for arbitrary code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_crafted_pickle_in_last_pt_is_not_executed(sbm, tmp_path, capsys):
    run = tmp_path / "run"
    _main(run)
    marker = tmp_path / "pwned"
    torch.save({"model": _Payload(marker)}, run / "seed0_fold0" / "last.pt")
    (run / "seed0_fold0" / "result.json").unlink()  # the seed is unfinished: --resume reads last.pt
    err = _refused(capsys, [*QUICK, "--run-dir", str(run), "--resume"])
    assert "last.pt is not a checkpoint of this trainer" in err and not marker.exists()
    with pytest.raises(RunDirError, match="not a checkpoint"):
        _train(sbm, run / "seed0_fold0", 2, resume=True)
    assert not marker.exists()
    torch.load(run / "seed0_fold0" / "last.pt", weights_only=False)  # the file is live: unsafe loading runs it
    assert marker.exists()


def test_checkpoint_loads_with_weights_only_and_restores_every_rng(sbm, tmp_path):
    _train(sbm, tmp_path, 2)
    ck = torch.load(tmp_path / "last.pt", weights_only=True)
    assert ck["epoch"] == 2 and set(ck["rng"]) >= {"torch", "numpy", "python", "loader"}
    gen = torch.Generator().manual_seed(5)
    state = rng_state(gen)
    torch.save(state, tmp_path / "rng.pt")

    def draws():
        return (torch.rand(3).tolist(), np.random.rand(3).tolist(), [random.random() for _ in range(3)],  # noqa: NPY002
                torch.rand(3, generator=gen).tolist())

    expected = draws()
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True), gen)
    assert draws() == expected


# ---- a run directory is used only as asked --------------------------------------------------------------------


def test_existing_run_dir_is_refused_and_left_alone(tmp_path, capsys):
    run = tmp_path / "run"
    _main(run)
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    err = _refused(capsys, [*QUICK, "--run-dir", str(run), "--lr", "0.02"])
    assert str(run) in err and "--resume" in err and "--overwrite" in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_overwrite_replaces_the_old_run(tmp_path):
    run = tmp_path / "run"
    main([*QUICK, "--run-dir", str(run), "--seeds", "2"])
    (run / "notes.txt").write_text("mine")
    _main(run, "--epochs", "3", "--overwrite")
    assert not (run / "seed1_fold0").exists()  # the old run's second seed is gone
    assert _epochs(run / "seed0_fold0") == [1, 2, 3]  # not appended to the old metrics
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 3
    assert (run / "notes.txt").read_text() == "mine"  # only the run's own files are deleted


@pytest.mark.parametrize("case", ["file", "under_a_file", "resume_nothing", "resume_and_overwrite", "read_only"])
def test_unusable_run_dir_is_one_line(tmp_path, capsys, case):
    afile = tmp_path / "afile"
    afile.write_text("x")
    run, extra, expect = {
        "file": (afile, (), "is a file"),
        "under_a_file": (afile / "run", (), "is a file"),
        "resume_nothing": (tmp_path / "empty", ("--resume",), "holds no run"),
        "resume_and_overwrite": (tmp_path / "r", ("--resume", "--overwrite"), "exclude each other"),
        "read_only": (tmp_path / "ro" / "run", (), "cannot write"),
    }[case]
    if case == "read_only":
        if os.geteuid() == 0:
            pytest.skip("root ignores directory permissions")
        run.parent.mkdir()
        run.parent.chmod(0o555)
    try:
        assert expect in _refused(capsys, [*QUICK, "--run-dir", str(run), *extra])
    finally:
        if case == "read_only":
            run.parent.chmod(0o755)


def test_second_writer_is_refused_while_the_lock_is_held(tmp_path, capsys):
    """Another process holds the run directory's lock: a second writer stops with one line naming the directory."""
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        os.makedirs({str(run)!r}, exist_ok=True)
        fd = os.open({str(run / '.lock')!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        sys.stdin.read()
    """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        err = _refused(capsys, [*QUICK, "--run-dir", str(run)])
        assert str(run) in err and "in use by another training process" in err
        assert not (run / "config.json").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    _main(run)  # released: the directory is usable
    assert (run / "results.json").is_file()


def test_lock_is_held_for_the_whole_run(sbm, tmp_path, monkeypatch):
    """While run_experiment trains, a second open of the lock file cannot take it."""
    import gnn.experiment as experiment

    seen = []

    def probe(*args, **kwargs):
        fd = os.open(tmp_path / ".lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            seen.append(True)
        finally:
            os.close(fd)
        return real(*args, **kwargs)

    real = experiment.train_one
    monkeypatch.setattr(experiment, "train_one", probe)
    model_cfg, _ = model_and_train_config(sbm, "gcn")
    experiment.run_experiment(sbm, model_cfg, TrainConfig(epochs=1), [0], run_dir=tmp_path, progress=False)
    assert seen == [True]
    fd = os.open(tmp_path / ".lock", os.O_RDWR)  # released afterwards
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(fd)


@pytest.mark.parametrize("extra,change", [
    (("--lr", "0.02"), "train.lr: 0.01 -> 0.02"),
    (("--epochs", "3"), "train.epochs: 2 -> 3"),
    (("--model", "sage"), "model.arch: \"gcn\" -> \"sage\""),
    (("--features", "raw"), "data.features"),
])
def test_resume_with_changed_config_names_the_fields(tmp_path, capsys, extra, change):
    run = tmp_path / "run"
    _main(run, "--lr", "0.01")
    config = (run / "config.json").read_text()
    err = _refused(capsys, [*QUICK, "--run-dir", str(run), "--lr", "0.01", "--resume", *extra])
    assert change in err and str(run) in err
    assert (run / "config.json").read_text() == config


@pytest.mark.parametrize("old,new,changes", [
    ({"train": {"lr": 0.01, "device": "cpu"}}, {"train": {"lr": 0.01, "device": "cuda"}}, []),
    ({"train": {"checkpoint_every": 50}}, {"train": {"checkpoint_every": 5}}, []),
    ({"train": {"lr": 0.01}}, {"train": {"lr": 0.02}}, ["train.lr: 0.01 -> 0.02"]),
    ({"seeds": [0, 1]}, {"seeds": (0, 1, 2)}, ["seeds: [0, 1] -> [0, 1, 2]"]),
    ({"model": {"arch": "gcn"}}, {"model": {"arch": "gcn", "heads": 8}}, ["model.heads: (absent) -> 8"]),
    ({"seeds": (0, 1)}, {"seeds": [0, 1]}, []),
])
def test_config_changes(old, new, changes):
    assert config_changes(old, new) == changes


def test_resume_of_a_finished_run_reads_results_back(tmp_path):
    run = tmp_path / "run"
    first = _main(run)
    again = _main(run, "--resume")
    assert again["per_run"] == first["per_run"] and first["per_run"][0]["best_sha256"]


# ---- atomic writes and exact resume ---------------------------------------------------------------------------


class _Crash(Exception):
    """Stands for the process dying mid-write."""


@pytest.mark.parametrize("where", ["mid_write", "before_rename"])
def test_crash_during_checkpoint_write_keeps_the_previous_one(sbm, tmp_path, monkeypatch, where):
    """The second last.pt write (epoch 4) dies half-way: last.pt still holds epoch 2, no temp file is left, and
    resuming gives exactly the uninterrupted run."""
    import gnn.files as files

    straight = _train(sbm, tmp_path / "a", 6)
    real_write, real_replace, count = files.atomic_write, os.replace, {"n": 0}

    def crashing_write(path, write):
        if path.name == "last.pt":
            count["n"] += 1
            if count["n"] == 2 and where == "mid_write":
                def half(f):
                    import io
                    buf = io.BytesIO()
                    write(buf)
                    f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
                    raise _Crash
                return real_write(path, half)
        return real_write(path, write)

    def crashing_replace(src, dst):
        if where == "before_rename" and os.path.basename(dst) == "last.pt" and count["n"] == 2:
            raise _Crash
        return real_replace(src, dst)

    monkeypatch.setattr(files, "atomic_write", crashing_write)
    monkeypatch.setattr(files.os, "replace", crashing_replace)
    with pytest.raises(_Crash):
        _train(sbm, tmp_path / "b", 6)
    monkeypatch.undo()
    b = tmp_path / "b"
    assert load_checkpoint(b / "last.pt")["epoch"] == 2
    assert sorted(p.name for p in b.iterdir()) == ["best.pt", "last.pt", "metrics.jsonl"]
    assert _epochs(b) == [1, 2, 3, 4]
    resumed = _train(sbm, b, 6, resume=True)
    assert (resumed.val_loss, resumed.test_acc, resumed.best_epoch) == \
        (straight.val_loss, straight.test_acc, straight.best_epoch)
    assert _epochs(b) == list(range(1, 7))
    assert resumed.best_sha256 == sha256_file(b / "best.pt")
    for name in ("best.pt", "last.pt"):
        a_state = torch.load(tmp_path / "a" / name, weights_only=True)
        b_state = torch.load(b / name, weights_only=True)
        a_model = a_state.get("model", a_state)
        b_model = b_state.get("model", b_state)
        assert all(torch.equal(a_model[k], b_model[k]) for k in a_model)


def test_resume_rewrites_best_pt_from_the_checkpoint(sbm, tmp_path):
    """A crash after the last checkpoint but before result.json, with best.pt damaged (or from an epoch past the
    checkpoint): resuming restores best.pt from the checkpoint and records its hash."""
    _train(sbm, tmp_path, 2)
    (tmp_path / "result.json").unlink()
    (tmp_path / "best.pt").write_bytes(b"torn")
    resumed = _train(sbm, tmp_path, 2, resume=True)
    assert resumed.best_sha256 == sha256_file(tmp_path / "best.pt")
    best = load_checkpoint(tmp_path / "last.pt")["best"]["state"]
    assert all(torch.equal(v, torch.load(tmp_path / "best.pt", weights_only=True)[k]) for k, v in best.items())


def test_graph_task_resume_restores_the_loader_shuffle(tmp_path):
    """Graph tasks shuffle with their own generator: a resumed run draws the same batches as an uninterrupted one."""
    g = load_dataset("mutag")
    straight = _train(g, tmp_path / "a", 4, batch_size=16)
    _train(g, tmp_path / "b", 2, batch_size=16)
    resumed = _train(g, tmp_path / "b", 4, resume=True, batch_size=16)
    a = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(line) for line in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()]
    assert [(m["train_loss"], m["val_loss"]) for m in a] == [(m["train_loss"], m["val_loss"]) for m in b]
    assert resumed.val_loss == straight.val_loss


@pytest.mark.parametrize("text,max_epoch,kept", [
    ('{"epoch": 1}\n{"epoch": 2}\n{"epoch": 3}\n', 2, [1, 2]),
    ('{"epoch": 1}\n{"epoch": 2}\n{"epo', 5, [1, 2]),  # torn last line
    ('{"epoch": 1}\n{"epoch": 2}', 5, [1]),  # a line without its newline is torn too
    ('{"epoch": 1}\ngarbage\n{"epoch": 2}\n', 5, [1]),
    ('{"epoch": 1}\n', 0, []),
])
def test_truncate_jsonl(tmp_path, text, max_epoch, kept):
    path = tmp_path / "metrics.jsonl"
    path.write_text(text)
    truncate_jsonl(path, max_epoch)
    assert [json.loads(line)["epoch"] for line in path.read_text().splitlines()] == kept


# ---- best.pt integrity ----------------------------------------------------------------------------------------


def test_load_trained_detects_a_corrupted_best_pt(tmp_path):
    from quant.convert import load_trained

    main(["--dataset", "cora", "--model", "gcn", "--quant", "a2q", "--target-bits", "4", "--epochs", "1",
          "--seeds", "1", "--run-dir", str(tmp_path), "--no-progress"])
    seed_dir = tmp_path / "seed0_fold0"
    result = json.loads((seed_dir / "result.json").read_text())
    assert result["best_sha256"] == sha256_file(seed_dir / "best.pt")
    load_trained(tmp_path)
    data = bytearray((seed_dir / "best.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (seed_dir / "best.pt").write_bytes(bytes(data))
    with pytest.raises(ValueError, match="does not match the SHA-256 recorded in .*result.json; the file is "
                                         "corrupted, retrain or restore it"):
        load_trained(tmp_path)
    data[len(data) // 2] ^= 0xFF  # restored, and an older run without a recorded hash: loaded unchecked
    (seed_dir / "best.pt").write_bytes(bytes(data))
    del result["best_sha256"]
    (seed_dir / "result.json").write_text(json.dumps(result))
    load_trained(tmp_path)


# ---- bad settings stop before training ------------------------------------------------------------------------


@pytest.mark.parametrize("extra,expect", [
    (("--seeds", "0"), "--seeds 0"),
    (("--lr", "nan"), "lr=nan"),
    (("--lr", "inf"), "lr=inf"),
    (("--lr", "-0.1"), "lr=-0.1"),
    (("--weight-decay", "nan"), "weight_decay=nan"),
    (("--penalty-weight", "nan", "--quant", "a2q", "--bits-control", "penalty"), "penalty_weight=nan"),
    (("--penalty-weight", "-1", "--quant", "a2q", "--bits-control", "penalty"), "penalty_weight=-1"),
    (("--target-bits", "nan", "--quant", "a2q"), "target_bits=nan"),
    (("--epochs", "0"), "epochs"),
    (("--epochs", "-3"), "epochs"),
])
def test_bad_settings_are_refused_before_training(tmp_path, capsys, extra, expect):
    run = tmp_path / "run"
    err = _refused(capsys, [*QUICK, "--run-dir", str(run), *extra])
    assert expect in err
    assert not run.exists()


def test_cli_bad_setting_exits_2_without_traceback(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gnn.train", *QUICK, "--lr", "nan", "--run-dir", str(tmp_path / "r")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["error: TrainConfig: lr=nan must be a finite number"]
