"""The integer machinery every architecture's golden model shares (numpy only): rounding and fake-quant on a
step grid, dtype and shape checks of a layer's fields, running / tracing a chain of layers, and the exact
integer matrix product ``int_matmul`` (dense or sparse rows). Per-architecture layers live in
``quant.archs.<arch>.integer``; widths and rounding are specified in ``quant/FIXED_POINT.md``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from quant.formats.fixed_point import (
    code_limit,
)

ACC_BITS = 32


def round_half_away(v: np.ndarray) -> np.ndarray:
    """``floor(|v| + 0.5) * sign(v)`` (A2Q's rounding), float64."""
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def fake_quant(v: np.ndarray, step: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Codes ``clamp(round_haz(v / step), -qmax, qmax)`` (float64). step, bits broadcast against v."""
    qmax = code_limit(bits)
    return np.clip(round_half_away(v / step), -qmax, qmax)


def normalise_dtypes(obj, float_fields: tuple[str, ...], int_fields: tuple[str, ...]) -> None:
    """Cast the non-None array fields of a frozen dataclass to float64 / int64 in place (in ``__post_init__``)."""
    for names, dtype in ((float_fields, np.float64), (int_fields, np.int64)):
        for name in names:
            if getattr(obj, name) is not None:
                object.__setattr__(obj, name, np.asarray(getattr(obj, name), dtype=dtype))


def check_layer_fields(owner: str, shapes: list[tuple[str, np.ndarray | None, tuple]], steps: list,
                       weights: dict[str, np.ndarray], w_bits: int, psum_bits: int) -> None:
    """The checks every integer layer runs in ``__post_init__``: each ``(name, array, shape)`` (None skipped), every
    step > 0, weight codes within the symmetric ``w_bits`` range, ``psum_bits`` in 2..32. Raises ValueError naming
    ``owner`` and the field."""
    for name, arr, shape in shapes:
        if arr is not None and np.shape(arr) != shape:
            raise ValueError(f"{owner}: {name} has shape {np.shape(arr)}, expected {shape}")
    if any(s is not None and np.any(~(np.asarray(s) > 0)) for s in steps):
        raise ValueError(f"{owner}: every step must be > 0 (take |s| of the trained parameter)")
    for name, codes in weights.items():
        if np.abs(codes.astype(np.int64)).max(initial=0) > code_limit(w_bits):
            raise ValueError(f"{owner}: {name} exceed the symmetric {w_bits}-bit range")
    if not 2 <= psum_bits <= ACC_BITS:
        raise ValueError(f"{owner}: psum_bits={psum_bits} must lie in 2..{ACC_BITS}")


def check_layer_chain(owner: str, layers) -> None:
    """An integer model needs >= 1 layer, and every layer but the last feeds next-layer codes (``out_steps``)."""
    if not layers or any(lay.out_steps is None for lay in layers[:-1]):
        raise ValueError(f"{owner}: need >= 1 layer, and every layer but the last needs out_steps")


def trace_layers(x_codes: np.ndarray, layers, graph: tuple, trace_fn, on_overflow: str
                 ) -> tuple[list[np.ndarray], np.ndarray]:
    """:func:`run_layers` over ``trace_fn(layer, h, graph, on_overflow) -> {"out", "unit", ...}`` (a layer's integer
    trace)."""
    def layer_int(layer, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t = trace_fn(layer, h, graph, on_overflow)
        return t["out"], t["unit"]

    return run_layers(x_codes, layers, layer_int)


def run_layers(x_codes: np.ndarray, layers, layer_fn) -> tuple[list[np.ndarray], np.ndarray]:
    """Chain ``layer_fn(layer, h) -> (out, unit)`` over ``layers`` from ``x_codes``. Returns (per-layer outputs,
    the last output times its unit: float64 logits)."""
    h, outs, unit = x_codes, [], None
    for layer in layers:
        h, unit = layer_fn(layer, h)
        outs.append(h)
    return outs, h * unit


SPARSE_CODES_MAX_DENSITY = 0.05  # below this fraction of non-zero codes, int_matmul multiplies sparse rows


def _takes_sparse_product(codes: np.ndarray) -> bool:
    return codes.size > 0 and np.count_nonzero(codes) <= SPARSE_CODES_MAX_DENSITY * codes.size


def int_matmul_macs(codes: np.ndarray, f_out: int) -> int:
    """Multiply-accumulates :func:`int_matmul` spends on ``codes`` (N, F_in) against F_out weight rows."""
    return (np.count_nonzero(codes) if _takes_sparse_product(codes) else codes.size) * f_out


def int_matmul(codes: np.ndarray, w_codes: np.ndarray) -> np.ndarray:
    """Exact integer product ``codes @ w_codes.T``: (N, F_in) x (F_out, F_in) -> (N, F_out) int64.

    Sparse code matrices (bag-of-words inputs: 1% non-zero) go through a CSR product with int64 accumulation, which
    gives the same integers as the dense product (integer sums do not depend on their order) at the cost of the
    non-zero MACs only; numpy's dense int64 matmul has no BLAS and pays every MAC.
    """
    codes = np.asarray(codes)
    w = np.asarray(w_codes, dtype=np.int64).T  # (F_in, F_out)
    if _takes_sparse_product(codes):
        from scipy.sparse import csr_matrix
        return np.asarray(csr_matrix(codes.astype(np.int64)) @ w, dtype=np.int64)
    return codes.astype(np.int64) @ w


def check_codes(codes: np.ndarray, bits: np.ndarray, name: str) -> None:
    if np.any(np.abs(codes.astype(np.int64)) > code_limit(bits)[:, None]):
        raise ValueError(f"{name}: codes exceed their per-node bitwidths")




def bias_in_units(bias: np.ndarray, unit: np.ndarray) -> np.ndarray:
    """Bias in accumulator units, ``round_haz(b_f / unit)``; unit (N, 1) or (1, F_out) -> broadcastable int64."""
    return round_half_away(bias[None, :] / unit).astype(np.int64)


@dataclass(frozen=True, kw_only=True)
class QuantizedModel:
    """Input codes (N, F_in) int8 of the first layer plus the layers (the last has ``out_steps=None``); each
    architecture subclasses it with its layer type."""

    x_codes: np.ndarray
    layers: tuple

    def __post_init__(self) -> None:
        check_layer_chain(type(self).__name__, self.layers)


@dataclass(frozen=True)
class GoldenForward:
    """The whole-model forwards of one architecture, from its per-layer functions."""

    graph: Callable  # (edge_index, N) -> the CSR the layers aggregate over
    trace: Callable  # (layer, codes, graph, on_overflow) -> {"out", "unit", ...}: one layer in integers
    reference: Callable  # (layer, h, graph, exact_constants) -> (h, unit): one layer in float64 fake-quant

    def forward_int(self, model: QuantizedModel, edge_index: np.ndarray, on_overflow: str = "saturate"
                    ) -> tuple[list[np.ndarray], np.ndarray]:
        """Integer forward of the whole model. Returns (per-layer integer outputs, float64 logits (N, C))."""
        graph = self.graph(edge_index, model.x_codes.shape[0])
        return trace_layers(model.x_codes, model.layers, graph, self.trace, on_overflow)

    def forward_reference(self, model: QuantizedModel, edge_index: np.ndarray, exact_constants: bool = True
                          ) -> tuple[list[np.ndarray], np.ndarray]:
        """Float64 fake-quant forward of the whole model (same return convention as :meth:`forward_int`)."""
        graph = self.graph(edge_index, model.x_codes.shape[0])
        return run_layers(model.x_codes, model.layers,
                          lambda layer, h: self.reference(layer, h, graph, exact_constants))


def reference_output(y: np.ndarray, bias: np.ndarray | None, unit: np.ndarray, exact_constants: bool, relu: bool,
                     out_steps: np.ndarray | None, out_bits: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The last steps of a layer's float64 reference: the bias (the true one, or with ``exact_constants=False`` the
    integer path's, snapped to accumulator ``unit``), ReLU, then the next layer's fake-quant with 2-D ``out_steps``
    and ``out_bits`` -> (codes, steps); for the last layer (``out_steps`` None) -> (y, ones (N, 1))."""
    if bias is not None:
        y = y + (bias[None, :] if exact_constants else bias_in_units(bias, unit) * unit)
    if relu:
        y = np.maximum(y, 0.0)
    if out_steps is None:
        return y, np.ones((y.shape[0], 1))
    return fake_quant(y, out_steps, out_bits).astype(np.int64), out_steps
