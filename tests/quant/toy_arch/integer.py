"""The toy architecture's golden model (numpy): exact integer products, float64 scaling and requantization."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from quant.integer import fake_quant, int_matmul


@dataclass(frozen=True, kw_only=True)
class ToyLayer:
    """x_steps, x_bits (N,) of the input codes; w_codes (F_out, F_in), w_steps (F_out,); bias (F_out,)."""

    x_steps: np.ndarray
    x_bits: np.ndarray
    w_codes: np.ndarray
    w_steps: np.ndarray
    w_bits: int
    bias: np.ndarray
    relu: bool
    frac_bits: int = 0  # no fixed-point constants: the scaling runs in float64


@dataclass(frozen=True, kw_only=True)
class ToyModel:
    x_codes: np.ndarray  # (N, F_in) int8 codes of the first layer's input
    layers: tuple[ToyLayer, ...]


def toy_forward(model: ToyModel) -> tuple[list[np.ndarray], np.ndarray]:
    """Each layer's input codes and the logits: ``acc = x_codes @ w_codes^T`` in integers, then
    ``acc * s_i * t_f + b``, ReLU and the next layer's quantizer (its per-node steps and bits)."""
    codes, inputs = model.x_codes, []
    for li, lay in enumerate(model.layers):
        inputs.append(codes)
        real = int_matmul(codes, lay.w_codes) * lay.x_steps[:, None] * lay.w_steps[None, :] + lay.bias
        if li + 1 == len(model.layers):
            return inputs, real
        nxt = model.layers[li + 1]
        codes = fake_quant(np.maximum(real, 0.0) if lay.relu else real, nxt.x_steps[:, None],
                           nxt.x_bits[:, None]).astype(np.int8)
    raise ValueError("toy_forward: a model without layers")
