"""Which side draws a halo row's dropout mask (`ExchangeConfig.halo_dropout`): with "owner" the rows travel dropped
by their owner, with "receiver" they travel undropped and the receiver drops them; in both the gradient of the
global loss is the true one (central differences in float64, masks fixed by reseeding)."""

import pytest
import torch
from rank_functions import run_probes

from distributed.halo import ExchangeConfig
from distributed.launch import spawn

SMOOTHING_STEPS = 5
CALLS = {("dropout", "owner"): ("halo_dropout_probe", ("owner",)),
         ("dropout", "receiver"): ("halo_dropout_probe", ("receiver",)),
         ("smoothing", 0.0): ("smoothing_probe", (0.0, SMOOTHING_STEPS)),
         ("smoothing", 0.75): ("smoothing_probe", (0.75, SMOOTHING_STEPS)),
         ("fresh", None): ("smoothing_probe", (0.0, 4, False))}


@pytest.fixture(scope="module")
def probes() -> dict:
    """Every probe of this file in one 2-rank spawn: {key of CALLS: per-rank results}."""
    per_rank = spawn(run_probes, 2, list(CALLS.values()), timeout_s=600)
    return {key: [results[i] for results in per_rank] for i, key in enumerate(CALLS)}


@pytest.mark.parametrize("halo_dropout", ["owner", "receiver"])
def test_halo_rows_and_their_gradient(probes, halo_dropout):
    for r in probes[("dropout", halo_dropout)]:
        halo, owner_rows = r["halo"], r["owner_rows"]
        assert halo.numel() and (owner_rows != 0).float().mean() > 0.3
        if halo_dropout == "receiver":
            torch.testing.assert_close(halo, owner_rows, rtol=0, atol=0)
        else:  # each entry dropped (0) or kept and scaled by 1 / (1 - p)
            kept = halo != 0
            torch.testing.assert_close(halo[kept], 2 * owner_rows[kept], rtol=1e-15, atol=0)
            assert ((owner_rows != 0) & ~kept).any()  # some entries the owner's mask dropped
        assert r["autograd"] == pytest.approx(r["numeric"], rel=1e-6, abs=1e-9)
        assert any(abs(v) > 1e-3 for v in r["autograd"])


def test_unknown_halo_dropout_is_refused():
    with pytest.raises(ValueError, match="halo_dropout='sender'; valid: owner, receiver"):
        ExchangeConfig(halo_dropout="sender")


@pytest.mark.parametrize("momentum", [0.0, 0.75])
def test_smoothing_is_a_moving_average_of_the_stale_rows(probes, momentum):
    """Stale step t uses the rows sent at step t - 1 (step 0 exchanges once synchronously, so steps 0 and 1 see
    step 0's rows) and the gradients sent at step t - 1 (none at step 0); smoothing averages both."""
    steps = SMOOTHING_STEPS
    received_rows = [1.0, 1.0, 2.0, 3.0, 4.0]
    received_grads = [None, 10.0, 20.0, 30.0, 40.0]
    rows, grads, avg_row, avg_grad = [], [], None, None
    for r, g in zip(received_rows, received_grads, strict=True):
        avg_row = r if avg_row is None else momentum * avg_row + (1 - momentum) * r
        rows.append(avg_row)
        if g is not None:
            avg_grad = g if avg_grad is None else momentum * avg_grad + (1 - momentum) * g
        grads.append(0.0 if avg_grad is None else avg_grad)
    for r in probes[("smoothing", momentum)]:
        for t in range(steps):
            used = [v for row in r["halos"][t] for v in row]
            got = [v for row in r["grads"][t] for v in row]
            assert used and got
            assert used == pytest.approx([rows[t]] * len(used), rel=1e-6), t
            assert got == pytest.approx([grads[t]] * len(got), rel=1e-6), t


def test_fresh_gradients_with_stale_halos(probes):
    """stale_gradients=False: the forward stays one step stale, the gradients of every step arrive in that step."""
    for r in probes[("fresh", None)]:
        assert [row[0][0] for row in r["halos"]] == [1.0, 1.0, 2.0, 3.0]
        assert [row[0][0] for row in r["grads"]] == [10.0, 20.0, 30.0, 40.0]


def test_smoothing_needs_the_pipeline():
    with pytest.raises(ValueError, match="needs pipeline=True"):
        ExchangeConfig(smoothing=0.9)
    with pytest.raises(ValueError, match="smoothing=1.0"):
        ExchangeConfig(pipeline=True, smoothing=1.0)
    with pytest.raises(ValueError, match="only acts with pipeline=True"):
        ExchangeConfig(stale_gradients=False)
