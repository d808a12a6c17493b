"""The check every export test makes of a manifest's metrics: each figure is recomputed from the arrays (and from
the model when the test holds it), and the integer path stays within the stated distance of the fake-quant model.

The integer path's codes differ from the fake-quant model's by at most one step (quant/FIXED_POINT.md), which
changes a prediction only where two logits nearly tie: the tiny seed-fixed fixtures agree on every node (GCN: all
but one of 80), and the CLI tests' 3-epoch Cora models, barely trained and full of near ties, within 0.5 point of
test accuracy and on 98 % of the nodes (measured on this machine: 0.4 pt and 98.8 % at worst)."""

from __future__ import annotations

import numpy as np
import pytest
import torch


def check_export_metrics(q, model=None, graph=None, *, max_delta_pt: float, min_agreement: float) -> None:
    met = q.manifest["metrics"]
    labels, test, logits = q["graph.labels"], q["graph.test_index"], q["logits"]
    acc_int = float((logits[test].argmax(1) == labels[test]).mean())
    assert met["test_acc_integer"] == acc_int
    assert met["test_acc_delta_pt"] == pytest.approx(100.0 * (acc_int - met["test_acc_fake_quant"]), abs=1e-9)
    if model is not None:
        d = graph.data
        model.eval()
        with torch.no_grad():
            fake = model(d.x, d.edge_index).double().numpy()
        assert met["test_acc_fake_quant"] == float((fake[test].argmax(1) == labels[test]).mean())
        assert met["prediction_agreement"] == float(np.mean(fake.argmax(1) == logits.argmax(1)))
    assert abs(met["test_acc_delta_pt"]) <= max_delta_pt, met
    assert met["prediction_agreement"] >= min_agreement, met
