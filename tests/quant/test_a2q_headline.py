"""benchmarks/quant_headline.a2q_headline: each A2Q run meets the FP32 run of its own training, and the headline is
chosen on validation among runs that kept the bit budget."""

import pytest

from benchmarks import quant_headline


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
    rows, selected = quant_headline.a2q_headline(cells)
    assert len(rows) == 5
    gaps = {r["cell"]["penalty_weight"]: r["gap"] for r in rows if r["cell"].get("hidden_dim") == 64}
    assert gaps[1.0] == pytest.approx(-0.5) and gaps[10.0] == pytest.approx(-1.5)
    assert next(r for r in rows if r["cell"]["hidden_dim"] == 32)["gap"] is None
    assert selected["cell"]["penalty_weight"] == 10.0
    text = "\n".join(quant_headline.render_headline(cells))
    assert "-1.50 pt against its FP32 (target >= -1.0 pt): missed" in text
    assert text.count("**selected**") == 1


def test_headline_met_and_absent():
    cells = [cell("fp32", 82.0), cell("a2q", 81.2, val=81.0, penalty=1.0)]
    assert "): met." in "\n".join(quant_headline.render_headline(cells))
    assert quant_headline.render_headline([cell("fp32", 82.0)]) == []


def test_warm_started_run_meets_the_fp32_run_of_its_training():
    """A run quantized after an FP32 warm-up compares with the FP32 run of its training without the warm-up, and
    its row says it warmed up."""
    warm = {**cell("a2q", 80.0, val=81.0, hidden=64, penalty=10.0), "fp32_warmup_epochs": 200}
    rows, selected = quant_headline.a2q_headline([cell("fp32", 82.0, hidden=64), warm])
    assert rows[0]["gap"] == pytest.approx(-2.0) and selected is rows[0]
    assert "after 200 FP32 warm-up epochs" in "\n".join(quant_headline.render_headline([cell("fp32", 82.0), warm]))


def test_pareto_takes_the_selected_recipe_at_every_target():
    """The bits-accuracy curve keeps the cells trained as the selected headline run (same training and penalty),
    learned-bit methods only, and names the fewest bits within 1 pt of that training's FP32."""

    def at(method, target, test, bits, penalty=10.0, hidden=64):
        return {**cell(method if method != "degree-aware" else "a2q", test, val=81.0, hidden=hidden, penalty=penalty,
                       bits=bits), "method": method, "target_bits": target}

    cells = [cell("fp32", 82.0, hidden=64), cell("a2q", 80.5, val=81.0, hidden=64, penalty=10.0, bits=1.3),
             at("a2q", 3.0, 81.8, 2.9), at("a2q", 2.0, 81.1, 1.9), at("a2q", 1.0, 79.0, 1.0),
             at("degree-aware", 2.0, 80.5, 2.0),
             at("a2q", 3.0, 90.0, 2.9, penalty=25.0),  # another penalty weight: not this recipe
             at("a2q", 3.0, 90.0, 2.9, hidden=128)]  # another training: not this recipe
    fp32, rows = quant_headline.a2q_pareto(cells)
    assert fp32["test_acc"]["mean"] == 82.0
    assert [(r["cell"]["method"], r["cell"]["target_bits"]) for r in rows] == [
        ("a2q", 1.0), ("a2q", 1.7), ("a2q", 2.0), ("a2q", 3.0), ("degree-aware", 2.0)]
    best = quant_headline.fewest_bits_within_gap([r for r in rows if r["cell"]["method"] == "a2q"])
    assert best["cell"]["target_bits"] == 2.0 and best["gap"] == pytest.approx(-0.9)
    text = "\n".join(quant_headline.render_pareto(cells))
    assert "a2q: the fewest bits whose run tests within 1 pt of FP32 are 1.90 (target 2, -0.90 pt)." in text
    assert "degree-aware: no target of this recipe comes within 1 pt of FP32." in text
    assert quant_headline.render_pareto([cell("fp32", 82.0)]) == []


def test_run_with_wider_weights_and_xw_meets_the_fp32_of_its_training_and_says_so():
    """Weight / XW bits are quantized-only training fields: such a run compares with the FP32 run of its training,
    its row names the widths, and it forms a recipe of its own (the 4-bit run at another target is not on its
    curve)."""
    wide = {**cell("a2q", 81.0, val=82.0, hidden=64, penalty=10.0), "weight_bits": 8, "xw_bits": 8}
    narrow_other_target = {**cell("a2q", 90.0, val=81.0, hidden=64, penalty=10.0), "target_bits": 3.0}
    cells = [cell("fp32", 82.0, hidden=64), cell("a2q", 80.0, val=81.0, hidden=64, penalty=10.0), wide,
             narrow_other_target]
    rows, selected = quant_headline.a2q_headline(cells)
    assert selected["cell"] is wide and selected["gap"] == pytest.approx(-1.0)
    assert "hidden 64, weights 8-bit, XW 8-bit" in "\n".join(quant_headline.render_headline(cells))
    _, curve = quant_headline.a2q_pareto(cells)
    assert [r["cell"] for r in curve] == [wide]


def test_quant_table_refuses_fixed_bits_for_degree_quant(tmp_path):
    from benchmarks import quant_table

    with pytest.raises(SystemExit, match="dq-int4"):
        quant_table.main(["--methods", "none,dq-int4,a2q", "--weight-bits", "8", "--out", str(tmp_path / "q.json")])
