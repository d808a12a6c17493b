"""benchmarks/gt_screen.py: variant parsing (typed overrides, clear errors) and one tiny variant run on Cora."""

import json
import sys

import pytest
import torch

from benchmarks import _common, gt_accuracy
from benchmarks.gt_accuracy import render as render_gt_accuracy
from benchmarks.gt_accuracy import store_entry
from benchmarks.gt_screen import main, merge_screens, parse_variant, run_variant


def test_variant_overrides_are_typed_like_the_config():
    assert parse_variant("base") == ("base", {})
    name, over = parse_variant("x:ema_decay=0.9,epochs=200,layer_kinds=sparse/dense,sparse_residual=true,pe=none")
    assert name == "x"
    assert over == {"ema_decay": 0.9, "epochs": 200, "layer_kinds": ("sparse", "dense"), "sparse_residual": True,
                    "pe": "none"}
    assert isinstance(over["epochs"], int)


@pytest.mark.parametrize("text, message", [("x:nonsense=1", "not field=value"), ("x:epochs", "not field=value"),
                                           (":epochs=3", "no name"), ("x:sparse_residual=yes", "true or false"),
                                           ("x:epochs=many", "epochs='many' is not of type int")])
def test_bad_variants_are_refused(text, message):
    with pytest.raises(SystemExit, match=message):
        parse_variant(text)


def test_tiny_variant_runs_and_reports_validation_and_test():
    threads = torch.get_num_threads()  # the runner pins one thread per run; give the suite its threads back
    try:
        out = run_variant("cora", {"epochs": 2, "patience": 2, "num_layers": 2, "layer_kinds": ("sparse", "dense"),
                                   "hidden_dim": 16, "num_heads": 2}, [0])
    finally:
        torch.set_num_threads(threads)
    assert out["config"]["epochs"] == 2 and out["overrides"]["layer_kinds"] == ["sparse", "dense"]
    assert 0.0 < out["val_acc"]["mean"] <= 100.0 and len(out["per_seed"]) == 1
    assert out["per_seed"][0]["epoch"] in (0, 1)


def test_side_by_side_screens_fold_into_one_file(tmp_path):
    threads = torch.get_num_threads()
    tiny = "epochs=1,patience=1,num_layers=2,layer_kinds=sparse/dense,hidden_dim=8,num_heads=2"
    try:
        main(["--seeds", "1", "--out", str(tmp_path / "a.json"), "--variant", f"a:{tiny}"])
        main(["--seeds", "1", "--out", str(tmp_path / "b.json"), "--variant", f"b:{tiny}"])
    finally:
        torch.set_num_threads(threads)
    main(["--out", str(tmp_path / "all.json"), "--merge-file", str(tmp_path / "a.json"),
          "--merge-file", str(tmp_path / "b.json")])
    merged = json.loads((tmp_path / "all.json").read_text())
    assert sorted(merged["datasets"]["cora"]) == ["a", "b"]
    a = json.loads((tmp_path / "a.json").read_text())["datasets"]["cora"]["a"]
    assert merged["datasets"]["cora"]["a"] == a and a["device"] == "cpu" and "--device" not in a["command"]


def test_merge_refuses_foreign_files_and_mixed_modes(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"cells": []}))
    with pytest.raises(SystemExit, match="not a gt_screen result"):
        main(["--out", str(tmp_path / "all.json"), "--merge-file", str(tmp_path / "x.json")])
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path / "all.json")])  # neither variants nor files
    assert merge_screens({}, {"datasets": {"cora_cuda": {"v": {"val_acc": {}, "command": "c"}}}}) == ["cora_cuda/v"]


def test_stopped_accuracy_run_keeps_its_finished_seeds(monkeypatch):
    """gt_accuracy.run_gt hands every partial row to on_seed, so a run killed at a lease's time limit keeps the seeds
    it finished; RESULTS marks such a row as stopped."""
    def fake_seed(name, seed, cfg, threads, qcfg=None, device="cpu"):
        return {"seed": seed, "test_acc": 0.5 + seed / 10, "val_acc": 0.6, "seconds": 1.0, "epoch": 3}

    monkeypatch.setattr(gt_accuracy, "gt_seed", fake_seed)
    partial = []
    full = gt_accuracy.run_gt("cora", [0, 1, 2], gt_accuracy.GT_CONFIG, 1, 1, on_seed=partial.append)
    assert [p["test_acc"]["n"] for p in partial] == [1, 2] and not any(p["complete"] for p in partial)
    assert full["complete"] and full["test_acc"]["n"] == 3 and full["test_acc"]["mean"] == pytest.approx(60.0)
    gcn = {"test_acc": {"mean": 81.0, "std": 0.5, "n": 3}}
    rows = render_gt_accuracy({"datasets": {"cora": {"gcn": gcn, "gt_interleaved": partial[-1]}}})
    assert any("| 2 of 3 (stopped) |" in r for r in rows)
    rows = render_gt_accuracy({"datasets": {"cora": {"gcn": gcn, "gt_interleaved": full}}})
    assert any("| 3 | cpu |" in r for r in rows)


def test_partial_accuracy_run_never_replaces_a_finished_row():
    done = {"complete": True, "test_acc": {"mean": 80.0}}
    old_done = {"test_acc": {"mean": 79.0}}  # rows written before the flag existed are finished runs
    part = {"complete": False, "test_acc": {"mean": 70.0}}
    assert store_entry({}, "gt_x", part) == {"gt_x": part}
    assert store_entry({"gt_x": part}, "gt_x", part) == {"gt_x": part}
    assert store_entry({"gt_x": done}, "gt_x", part) == {"partial_gt_x": part}
    assert store_entry({"gt_x": old_done}, "gt_x", part) == {"partial_gt_x": part}
    stored = {"gt_x": old_done, "partial_gt_x": part}
    assert store_entry(stored, "gt_x", done) == {"gt_x": done} and "partial_gt_x" not in stored


def test_accuracy_rows_name_config_differences_including_fields_older_rows_lack():
    """A row written before a configuration field existed ran with that field's old value (the degree embedding was
    always there, no label smoothing): against a base row that sets them otherwise the difference is named, and a
    row's --set overrides are shown."""
    gcn = {"test_acc": {"mean": 81.0, "std": 0.5, "n": 5}}
    acc = {"mean": 80.0, "std": 1.0, "n": 5}
    base = {"test_acc": acc, "config": {"epochs": 300, "degree_embedding": False, "label_smoothing": 0.1},
            "overrides": {"degree_embedding": False, "label_smoothing": 0.1}}
    old = {"test_acc": acc, "config": {"epochs": 150}, "final_avg_bits": {"mean": 4.0}}
    rows = render_gt_accuracy({"datasets": {"cora": {"gcn": gcn, "gt_interleaved": base, "gt_interleaved_a2q": old}}})
    [base_row] = [r for r in rows if r.startswith("| cora |") and "| interleaved " in r]
    [old_row] = [r for r in rows if "interleaved_a2q" in r]
    assert "(set: degree_embedding=False, label_smoothing=0.1)" in base_row and "config differs" not in base_row
    assert "(config differs: degree_embedding=True, epochs=150, label_smoothing=0.0)" in old_row
    alone = render_gt_accuracy({"datasets": {"x": {"gcn": gcn, "gt_sparse": old}}})
    assert not any("config differs" in r for r in alone)  # no base row of that dataset: nothing to compare with


def test_accuracy_run_applies_and_records_set_overrides(monkeypatch, tmp_path):
    """``gt_accuracy.py --set`` overrides any field, also one with its own option (--epochs), and the row (stored
    under ``--row-suffix``) keeps the overrides; a bad field is refused before anything runs."""
    seen = []

    def fake_seed(name, seed, cfg, threads, qcfg=None, device="cpu"):
        seen.append(cfg)
        return {"seed": seed, "test_acc": 0.8, "val_acc": 0.8, "seconds": 1.0, "epoch": 3}

    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    monkeypatch.setattr(gt_accuracy, "gt_seed", fake_seed)
    monkeypatch.setattr(gt_accuracy, "run_gcn", lambda graph, seeds, device="cpu": {"test_acc": _acc(81.0)})
    monkeypatch.setattr(sys, "argv", ["gt_accuracy.py", "--datasets", "cora", "--seeds", "2", "--epochs", "7",
                                      "--set", "epochs=300,degree_embedding=false,label_smoothing=0.1",
                                      "--row-suffix", "selected"])
    gt_accuracy.main()
    assert [(c.epochs, c.degree_embedding, c.label_smoothing) for c in seen] == [(300, False, 0.1)] * 2
    rows = json.loads((tmp_path / "gt_accuracy.json").read_text())["datasets"]["cora"]
    assert "gt_interleaved" not in rows  # the default configuration's row is left alone
    row = rows["gt_interleaved_selected"]
    assert row["overrides"] == {"epochs": 300, "degree_embedding": False, "label_smoothing": 0.1}
    assert row["config"]["epochs"] == 300
    monkeypatch.setattr(sys, "argv", ["gt_accuracy.py", "--set", "epoch=3"])
    with pytest.raises(SystemExit, match="not field=value"):
        gt_accuracy.main()


def _acc(mean):
    return {"mean": mean, "std": 0.0, "n": 2}
