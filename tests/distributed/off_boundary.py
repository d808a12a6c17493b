"""Quantized runs whose calibrated steps sit off A2Q's clip boundary, for exact comparisons across layouts.

A2Q's calibration sets ``step = row_max / qmax``, so each row's maximum lands on the clip limit ``|x / s| = qmax``
itself, where the estimator is discontinuous: inside, the element passes its gradient to x and contributes
``round(v) - v = 0`` to the step's; clipped, it passes none to x and ``qmax`` to the step. Which side it falls on
is decided by the last bit of the sum that produced x, i.e. by the summation order, which a partitioned run, a
thread count or a CPU's vector width changes. Both answers are correct; comparing them entry-wise is not.

`off_boundary` scales every calibrated step by ``1 + MARGIN`` (reference and distributed run alike), so each
maximum sits MARGIN * qmax inside the limit, far beyond float32 summation noise (~1e-6 relative) and far from
a rounding half-integer: the two runs then compute the same smooth function and must agree to rounding.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from distributed.runner import train_many
from quant.qat.a2q import A2QQuantizer

MARGIN = 2.0**-12


@contextmanager
def off_boundary():
    calibrate = A2QQuantizer._calibrate

    @torch.no_grad()
    def calibrate_inside(self, x):
        calibrate(self, x)
        self.step.mul_(1.0 + MARGIN)

    A2QQuantizer._calibrate = calibrate_inside
    try:
        yield
    finally:
        A2QQuantizer._calibrate = calibrate


def train_many_off_boundary(cfgs: list) -> list[dict]:
    """`distributed.runner.train_many` with `off_boundary` calibration (a spawnable rank function)."""
    with off_boundary():
        return train_many(cfgs)
