"""Trained quantized GCN -> integer model: what only the GCN converter does (the per-channel XW step, the input codes
of FP32 features). What every converter must do (the float64 reference equals the fake-quant model, per-node values
follow the degree tables, the integer path agrees, unconvertible models refused) is test_integer_archs.py."""


import numpy as np
import pytest
from arch_cases import F_IN, METHODS, C, N, converted, quantized_model, tiny_graph

from quant.convert import input_codes

__all__ = ["C", "F_IN", "N", "quantized_model", "tiny_graph"]


@pytest.mark.parametrize("method", METHODS)
def test_converted_gcn_steps_xw_per_channel(method):
    _, _, conv = converted("gcn", method, layers=3)  # the model of test_reference_equals_torch_fake_quant_in_float64
    assert conv.model.layers[0].xw_scheme == "channel"  # A2Q's per-channel XW step


def test_input_codes_exact_and_fallback():
    x = np.array([[0.0, 0.25, 0.25, 0.0], [0.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.0, 0.0]], dtype=np.float32)
    codes, steps, bits, exact = input_codes(x)
    assert exact and bits.tolist() == [2, 1, 2]
    np.testing.assert_array_equal(codes * steps[:, None], x)
    x2 = np.array([[0.1, 0.3, -0.7]])
    codes, steps, bits, exact = input_codes(x2)
    assert not exact and bits.tolist() == [8]
    assert np.abs(codes * steps[:, None] - x2).max() <= steps[0] / 2 + 1e-12
