"""benchmarks/integer_accuracy: the per-cell summary (deltas per seed, the 0.3-pt target on the mean) and its
RESULTS.md table; the integer logits dispatch on the model's architecture."""


import pytest
import torch

from benchmarks import integer_accuracy


def run(seed, fake, integer, agree=1.0):
    return {"seed": seed, "test_acc_fake_quant": fake, "test_acc_integer": integer,
            "delta_pt": 100 * (integer - fake), "avg_bits": 1.5, "prediction_agreement": agree}


def test_summary_and_table():
    runs = [run(0, 0.800, 0.800), run(1, 0.810, 0.806, agree=0.99), run(2, 0.790, 0.792)]
    c = integer_accuracy.summarize_cell("cora", "sage", "a2q", 1.7, 25.0, runs)
    assert c["delta_pt"]["mean"] == pytest.approx((0.0 - 0.4 + 0.2) / 3)
    assert c["max_abs_delta_pt"] == pytest.approx(0.4) and c["prediction_agreement_min"] == 0.99
    assert c["within_target"] and c["test_acc_integer"]["mean"] == pytest.approx(79.93333, abs=1e-4)
    off = integer_accuracy.summarize_cell("cora", "gcn", "a2q", 1.7, 25.0, [run(0, 0.8, 0.79), run(1, 0.8, 0.795)])
    assert not off["within_target"]
    lines = integer_accuracy.render({"cells": [{**c, "command": "cmd"}], "target_gap_pt": 0.3})
    row = next(line for line in lines if line.startswith("| cora | sage"))
    assert "-0.07 +- 0.31" in row and "0.40" in row and "99.00 %" in row and "`cmd`" in row


def test_gin_cells_name_their_hidden_activation_and_merge_apart():
    runs = [run(0, 0.7, 0.7)]
    fixed = integer_accuracy.summarize_cell("cora", "gin", "a2q", 1.7, 25.0, runs, "fixed")
    old = {k: v for k, v in integer_accuracy.summarize_cell("cora", "gin", "a2q", 1.7, 25.0, runs).items()
           if k != "gin_hidden"}  # a cell written before gin_hidden existed: trained with the hidden quantizer
    key = ("dataset", "model", "method", "target_bits", "penalty_weight", "gin_hidden")
    assert integer_accuracy.cell_key(old, key)[-1] == "quantized" != integer_accuracy.cell_key(fixed, key)[-1]
    lines = integer_accuracy.render({"cells": [old, fixed]})
    assert any(line.startswith("| cora | gin (quantized hidden) |") for line in lines)
    assert any(line.startswith("| cora | gin (16-bit hidden) |") for line in lines)


def test_integer_logits_refuse_a_model_without_an_integer_path():
    from gnn.models import ModelConfig, build_model

    other = build_model(ModelConfig(arch="gcn", in_dim=4, out_dim=2))
    other.cfg = type("Cfg", (), {"arch": "transformer"})()  # an architecture without an integer path
    data = type("D", (), {"x": torch.zeros(3, 4), "edge_index": torch.zeros(2, 0, dtype=torch.long)})()
    with pytest.raises(ValueError, match="no integer path for arch 'transformer'"):
        integer_accuracy.integer_logits(other, data)
    assert set(integer_accuracy.INTEGER_PATHS) == {"gcn", "sage", "gin", "gat"}
