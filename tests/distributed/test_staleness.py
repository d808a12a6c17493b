"""Sylvie's Bounded Staleness Adaptor (`distributed.staleness`): the drift measure against NumPy, the decisions on
hand-worked drift sequences, the bound, and a state round trip. The multi-process behaviour (a huge budget equals
the fixed rule, resume is exact) is in test_equivalence.py and test_resume_exact.py."""

import numpy as np
import pytest
import torch

from distributed.halo import ExchangeConfig
from distributed.staleness import StalenessAdaptor, relative_drift, row_drift


def test_row_drift_counts_only_entries_both_steps_kept():
    rng = np.random.default_rng(0)
    prev, cur = rng.normal(size=(7, 5)), rng.normal(size=(7, 5))
    prev[rng.random((7, 5)) < 0.5] = 0.0  # dropped by dropout (or ReLU) in one step or the other
    cur[rng.random((7, 5)) < 0.5] = 0.0
    kept = (prev != 0) & (cur != 0)
    want = (float(((cur - prev)[kept] ** 2).sum()), float((cur[kept] ** 2).sum()))
    got = row_drift(torch.tensor(prev, dtype=torch.float32), torch.tensor(cur, dtype=torch.float32))
    assert got == pytest.approx(want, rel=1e-6)


def test_dropout_masks_alone_do_not_look_like_drift():
    x = torch.rand(400, 64) + 0.5  # the same activations, two dropout masks (p = 0.5)
    a, b = torch.nn.functional.dropout(x, 0.5), torch.nn.functional.dropout(x, 0.5)
    assert relative_drift(torch.tensor([row_drift(a, b)])) == 0.0
    naive = ((a - b) ** 2).sum() / (b ** 2).sum()
    assert naive.sqrt() > 0.8  # what a plain difference would have reported


def test_relative_drift_is_the_largest_layer_and_skips_silent_layers():
    sums = torch.tensor([[0.0, 0.0], [1.0, 100.0], [4.0, 100.0]], dtype=torch.float64)
    assert relative_drift(sums) == pytest.approx(0.2)
    assert relative_drift(torch.zeros(2, 2)) == 0.0


def decisions(adaptor: StalenessAdaptor, drifts: list[float]) -> list[bool]:
    return [adaptor.decide(epoch, d) for epoch, d in enumerate(drifts)]


def test_budget_spends_the_drift_of_stale_epochs_only():
    # drifts[e]: measured in epoch e - 1's step. Epoch 0: nothing seen, stale; 1: epoch 0 was stale, spent 0.5, with
    # the forecast 0.5 exactly the budget: stale; 2: spent 1.0 + 0.5 > 1: synchronous, spent restarts at 0; 3: the
    # synchronous epoch's drift is not spent: 0 + 0.5, stale; 4: 0.5 + 0.5, stale; 5: synchronous; 6: stale
    got = decisions(StalenessAdaptor(budget=1.0, max_period=100), [0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    assert got == [False, False, True, False, False, True, False]


def test_period_grows_as_the_drift_falls():
    drifts = [0.8] * 10 + [0.05] * 30
    sync = [e for e, s in enumerate(decisions(StalenessAdaptor(budget=1.0, max_period=1000), drifts)) if s]
    gaps = np.diff(sync)
    assert gaps[0] <= 2 and gaps[-1] >= 10  # short periods while the rows move fast, long once they settle


@pytest.mark.parametrize("budget", [1e9, 0.3])
def test_max_period_bounds_the_staleness(budget):
    got = decisions(StalenessAdaptor(budget=budget, max_period=4), [0.01] * 20)
    runs = "".join("s" if s else "-" for s in got).split("s")
    assert max(len(r) for r in runs) <= 3
    if budget == 1e9:  # never over budget: exactly the fixed rule, (epoch + 1) % 4 == 0
        assert got == [(e + 1) % 4 == 0 for e in range(20)]


def test_state_round_trip_continues_identically():
    drifts = [0.3, 0.2, 0.6, 0.1, 0.4, 0.05, 0.7, 0.2]
    whole = decisions(StalenessAdaptor(budget=0.5, max_period=5), drifts)
    first = StalenessAdaptor(budget=0.5, max_period=5)
    head = [first.decide(e, d) for e, d in enumerate(drifts[:3])]
    second = StalenessAdaptor(budget=0.5, max_period=5)
    second.load_state_dict(first.state_dict())
    assert head + [second.decide(e, d) for e, d in enumerate(drifts[3:], start=3)] == whole
    assert {h["synchronous"] for h in second.history} == {True, False}


@pytest.mark.parametrize("kwargs, match", [
    ({"pipeline": True, "staleness_budget": 1.0}, "sync_every=K as its bound"),
    ({"sync_every": 5, "staleness_budget": 1.0}, "sync_every only acts with pipeline"),
    ({"pipeline": True, "sync_every": 5, "staleness_budget": -1.0}, "staleness_budget=-1.0"),
    ({"pipeline": True, "sync_every": 5, "staleness_budget": float("nan")}, "staleness_budget=nan"),
])
def test_config_refuses_an_unbounded_or_nonsense_budget(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExchangeConfig(codec="int1", **kwargs)


def test_adaptor_refuses_nonsense():
    with pytest.raises(ValueError, match="budget"):
        StalenessAdaptor(budget=0.0, max_period=3)
    with pytest.raises(ValueError, match="max_period"):
        StalenessAdaptor(budget=1.0, max_period=0)
