"""benchmarks/dist_accuracy.py's bookkeeping: the final-window statistic, per-seed merging of runs that recorded
different fields, and the paired gap over the seeds both variants hold."""

import pytest

from benchmarks import dist_accuracy as da


def test_final_window_mean_averages_only_the_last_epochs_evaluations():
    history = [{"epoch": e, **({"test_acc": e / 100} if e % 2 else {})} for e in range(300)]
    assert da.final_window_mean(history, 300) == pytest.approx(sum(range(251, 300, 2)) / 25 / 100)


def _entry(variants: dict, wall_s: float = 1.0) -> dict:
    return {"parts": 4, "epochs": 300, "eval_every": 2, "model": {"arch": "gcn"}, "wall_s": wall_s,
            "variants": variants}


def test_merge_keeps_seeds_aligned_when_older_runs_lack_a_field():
    old = _entry({"fp32": {"seed": [0, 1], "test_acc": [0.80, 0.82], "best_val_acc": [0.9, 0.9],
                           "best_epoch": [10, 20], "bytes_per_epoch": [5, 5], "synchronous_epochs": [None, None],
                           "commands": ["a"]}})
    new = _entry({"fp32": {"seed": [2], "test_acc": [0.84], "best_val_acc": [0.9], "best_epoch": [30],
                           "bytes_per_epoch": [5], "synchronous_epochs": [None], "final_test_acc": [0.83],
                           "commands": ["b"]},
                  "int1": {"seed": [1, 2], "test_acc": [0.81, 0.80], "best_val_acc": [0.9, 0.9],
                           "best_epoch": [10, 20], "bytes_per_epoch": [1, 1], "synchronous_epochs": [None, None],
                           "final_test_acc": [0.815, 0.82], "commands": ["b"]}})
    merged = da.merge_entry(old, new)
    fp32, int1 = merged["variants"]["fp32"], merged["variants"]["int1"]
    assert fp32["seed"] == [0, 1, 2] and fp32["final_test_acc"] == [None, None, 0.83]
    assert fp32["commands"] == ["a", "b"] and merged["wall_s"] == 2.0
    gap, se, n = da.paired_gap(int1, fp32)  # selected accuracy: seeds 1 and 2
    assert n == 2 and gap == pytest.approx(((0.81 - 0.82) + (0.80 - 0.84)) / 2)
    assert se == pytest.approx(abs((0.81 - 0.82) - (0.80 - 0.84)) / 2)  # stdev of two / sqrt(2)
    gap, se, n = da.paired_gap(int1, fp32, "final_test_acc")  # only seed 2 holds it on both sides
    assert n == 1 and gap == pytest.approx(0.82 - 0.83)
    assert da._gap_text("int1", int1, fp32, "final_test_acc") == "-1.00 +- n/a (1 paired)"
    assert da._gap_text("fp32", fp32, fp32) == "-"
