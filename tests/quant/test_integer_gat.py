"""Integer GAT (quant.archs.gat.integer): the converter's averaged heads, the softmax table and the comparison-only ELU
requantization against float64. What every architecture's integer model must satisfy (the float64 reference equals
the project's quantized GAT run in float64, concatenated and averaged heads, ELU between layers; the integer path
agrees; the degree tables; bad layer fields and unconvertible models; the slow Cora accuracy) is
test_integer_archs.py."""

import numpy as np
import pytest
from arch_cases import METHODS, converted, gat_layer

from quant.archs.gat.integer import (
    EXP_BITS,
    elu_requantize,
    elu_thresholds,
    exp_table,
    gat_constants,
    gat_graph,
    gat_layer_trace,
)
from quant.formats.fixed_point import code_limit
from quant.integer import round_half_away


@pytest.mark.parametrize("method", METHODS)
def test_converted_gat_averages_two_heads_in_its_last_layer(method):
    _, _, conv = converted("gat", method)  # the model of test_reference_equals_torch_fake_quant_in_float64
    assert conv.model.layers[-1].heads == 2 and not conv.model.layers[-1].concat


def test_softmax_numerators_match_float64_softmax():
    """Per destination, the table numerators over their sum equal the float64 softmax of the LeakyReLU'd scores
    within 2^-(EXP_BITS - 1); the maximum edge's numerator is exactly 2^EXP_BITS, codes above the max give 0."""
    rng = np.random.default_rng(3)
    layer = gat_layer(rng, 40, 6, 3, 4, score_bits=5)
    table = exp_table(layer)
    q = int(code_limit(layer.score_bits))
    assert table.shape == (3, 2 * q + 1, 2 * q + 1)
    assert np.all(np.diagonal(table, axis1=1, axis2=2) == 2**EXP_BITS) and np.all(np.triu(table[0], 1) == 0)
    ei = rng.integers(0, 40, size=(2, 300))
    graph = gat_graph(ei, 40)
    trace = gat_layer_trace(layer, rng.integers(-1, 2, size=(40, 6)), graph)
    dst, score = graph[2], trace["score"]
    logit = layer.leaky(score * layer.score_steps[None, :])
    for i in rng.choice(40, size=10, replace=False):
        rows = dst == i
        want = np.exp(logit[rows] - logit[rows].max(0)) / np.exp(logit[rows] - logit[rows].max(0)).sum(0)
        got = trace["numer"][rows] / trace["numer"][rows].sum(0)
        np.testing.assert_allclose(got, want, atol=2.0 ** -(EXP_BITS - 1))


def test_elu_requantize_by_comparisons_equals_float64():
    rng = np.random.default_rng(4)
    layer = gat_layer(rng, 50, 6, 2, 3, last=False)
    k = gat_constants(layer)
    acc = rng.integers(-3 * 2**layer.frac_bits, 2**layer.frac_bits, size=(50, 6))
    got = elu_requantize(acc, k, layer.out_bits)
    v = acc * layer.unit
    elu = np.where(v > 0, v, np.expm1(np.minimum(v, 0)))
    qmax = code_limit(layer.out_bits)[:, None]
    want = np.clip(round_half_away(elu / layer.out_steps[:, None]), -qmax, qmax)
    mismatch = got != want
    assert mismatch.mean() < 0.01  # positive side: one requant rounding; negative side: exact comparisons
    assert np.all(got[acc < 0] == want[acc < 0])
    assert (got < 0).sum() > 50 and (want[:, :] == -qmax).any()  # deep negatives reach the clamp
    # s' = 0.6, qmax 3, unit 0.01: floor(ln(0.7) / 0.01), floor(ln(0.1) / 0.01); k = 3 needs ELU <= -1.5: never
    assert elu_thresholds(np.array([0.6]), np.array([3]), 0.01).tolist() == [[-36, -231, np.iinfo(np.int64).min]]
