"""Sylvie's Bounded Staleness Adaptor: when to run a synchronous epoch, decided from the measured staleness error.

A pipelined training step uses halo rows one step old: the error it makes is how far the boundary rows moved in one
step. Every rank measures that on the rows it sends (exact, before any codec), so neither codec noise nor the
receiver's view enters:

    drift_l(t) = || x_l(t) - x_l(t-1) ||_F / || x_l(t) ||_F    (boundary rows of layer l, summed over all ranks)

Layers >= 1 exchange rows after the owner's dropout (``ExchangeConfig.halo_dropout="owner"``, the default), and
two epochs' masks differ: counted naively, dropout alone makes the drift ~ sqrt(2p) (1.0 at p = 0.5) whatever the
weights do. Only entries that both steps kept (non-zero in both) are counted; the inverted-dropout scale
1 / (1 - p) is the same in both and cancels, so the measure follows the activations, not the masks (undropped rows,
``"receiver"``, lose only their ReLU zeros to this rule).

The adaptor spends a budget: each stale epoch costs its drift (the largest over layers); when the next stale epoch
would take the total since the last synchronous epoch over ``budget``, that epoch runs synchronously and the total
restarts at 0. The period therefore adapts: short while the weights move fast (early training, large learning
rate), long once they settle; ``max_period`` bounds it (a synchronous epoch at least every ``max_period`` epochs, as
the fixed ``sync_every`` rule). Every rank decides the same: the drifts are summed over ranks first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from torch import Tensor


def row_drift(previous: Tensor, current: Tensor) -> tuple[float, float]:
    """(sum of squared changes, sum of squared values) over the entries non-zero in both ``previous`` and
    ``current`` (same shape, e.g. (S, F) rows sent). Their ratio's square root is the relative drift."""
    kept = (previous != 0) & (current != 0)
    cur = current.double() * kept
    return float(((cur - previous.double() * kept) ** 2).sum()), float((cur ** 2).sum())


def relative_drift(sums: Tensor) -> float:
    """Largest relative drift over layers from per-layer (sum of squared changes, sum of squared values) rows,
    shape (L, 2); layers that sent nothing (zero values) are skipped; 0.0 when none sent anything."""
    drifts = [math.sqrt(d / v) for d, v in sums.tolist() if v > 0]
    return max(drifts, default=0.0)


@dataclass
class StalenessAdaptor:
    """Decides per epoch whether it runs synchronously. ``budget``: total drift of stale epochs allowed between two
    synchronous ones; ``max_period``: a synchronous epoch at least every this many epochs (>= 1)."""

    budget: float
    max_period: int
    spent: float = 0.0  # drift of the stale epochs since the last synchronous one
    since_sync: int = 0  # epochs since the last synchronous one
    history: list[dict] = field(default_factory=list)  # per decided epoch: epoch, drift seen, synchronous

    def __post_init__(self) -> None:
        if not (math.isfinite(self.budget) and self.budget > 0):
            raise ValueError(f"StalenessAdaptor: budget={self.budget}; need a finite drift budget > 0")
        if self.max_period < 1:
            raise ValueError(f"StalenessAdaptor: max_period={self.max_period}; need >= 1")

    def decide(self, epoch: int, last_drift: float) -> bool:
        """Whether ``epoch`` runs synchronously, given the drift measured in the previous training step (spent if
        that step was stale; the forecast of this one's)."""
        if self.history and not self.history[-1]["synchronous"]:
            self.spent += last_drift
        self.since_sync += 1
        synchronous = self.spent + last_drift > self.budget or self.since_sync >= self.max_period
        if synchronous:
            self.spent, self.since_sync = 0.0, 0
        self.history.append({"epoch": epoch, "drift": last_drift, "synchronous": synchronous})
        return synchronous

    def state_dict(self) -> dict:
        return {"spent": self.spent, "since_sync": self.since_sync, "history": [dict(h) for h in self.history]}

    def load_state_dict(self, state: dict) -> None:
        self.spent, self.since_sync = state["spent"], state["since_sync"]
        self.history = [dict(h) for h in state["history"]]
