"""benchmarks/make_results.a2q_headline: each A2Q run meets the FP32 run of its own training, and the headline is
chosen on validation among runs that kept the bit budget."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import make_results  # noqa: E402


def cell(method, test, val=None, hidden=None, penalty=None, within=10, bits=1.5):
    c = {"dataset": "cora", "model": "gcn", "method": method, "epochs": 1000, "dropout": 0.35,
         "test_acc": {"mean": test, "std": 0.1, "n": 10}}
    if method == "a2q":
        c.update(target_bits=1.7, penalty_weight=penalty, runs_within_bit_budget=within,
                 avg_bits={"mean": bits, "std": 0.0})
    if val is not None:
        c["val_acc"] = {"mean": val, "std": 0.1, "n": 10}
    if hidden is not None:
        c["hidden_dim"] = hidden
    return c


def test_gap_uses_the_fp32_of_the_same_training_and_selection_uses_validation():
    cells = [cell("fp32", 82.0, hidden=64), cell("fp32", 81.0),  # two trainings: hidden 64 and the preset
             cell("a2q", 81.5, val=80.0, hidden=64, penalty=1.0),  # best test, lower validation
             cell("a2q", 80.5, val=81.0, hidden=64, penalty=10.0),  # best validation among the eligible
             cell("a2q", 80.9, val=83.0, hidden=64, penalty=2.0, within=9, bits=1.8),  # broke the budget
             cell("a2q", 80.8, hidden=64, penalty=5.0),  # no validation recorded
             cell("a2q", 80.7, val=90.0, hidden=32, penalty=5.0),  # no FP32 of its training
             {**cell("a2q", 70.0, val=95.0, hidden=64, penalty=1.0), "dataset": "citeseer"}]  # not Cora
    rows, selected = make_results.a2q_headline(cells)
    assert len(rows) == 5
    gaps = {r["cell"]["penalty_weight"]: r["gap"] for r in rows if r["cell"].get("hidden_dim") == 64}
    assert gaps[1.0] == pytest.approx(-0.5) and gaps[10.0] == pytest.approx(-1.5)
    assert next(r for r in rows if r["cell"]["hidden_dim"] == 32)["gap"] is None
    assert selected["cell"]["penalty_weight"] == 10.0
    text = "\n".join(make_results.render_a2q_headline(cells))
    assert "-1.50 pt against its FP32 (target >= -1.0 pt): missed" in text
    assert text.count("**selected**") == 1


def test_headline_met_and_absent():
    cells = [cell("fp32", 82.0), cell("a2q", 81.2, val=81.0, penalty=1.0)]
    assert "): met." in "\n".join(make_results.render_a2q_headline(cells))
    assert make_results.render_a2q_headline([cell("fp32", 82.0)]) == []


def test_warm_started_run_meets_the_fp32_run_of_its_training():
    """A run quantized after an FP32 warm-up compares with the FP32 run of its training without the warm-up, and
    its row says it warmed up."""
    warm = {**cell("a2q", 80.0, val=81.0, hidden=64, penalty=10.0), "fp32_warmup_epochs": 200}
    rows, selected = make_results.a2q_headline([cell("fp32", 82.0, hidden=64), warm])
    assert rows[0]["gap"] == pytest.approx(-2.0) and selected is rows[0]
    assert "after 200 FP32 warm-up epochs" in "\n".join(make_results.render_a2q_headline([cell("fp32", 82.0), warm]))
