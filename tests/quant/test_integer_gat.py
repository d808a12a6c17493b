"""Integer GAT (quant.archs.gat.integer) against its float64 fake-quant reference and the project's own quantized GAT run in
float64 (concatenated and averaged heads, ELU between layers); the softmax table and the comparison-only ELU
requantization against float64; the converter's mapping; bad input."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch

from gnn.models import ModelConfig, build_model
from gnn.ops import in_degree
from quant.qat.api import QuantConfig, quantize_
from quant.archs.gat.convert import to_quantized_gat
from quant.qat.degree_aware import degree_bucket
from quant.formats.fixed_point import code_limit
from quant.archs.gat.integer import (
    EXP_BITS,
    QuantizedGATLayer,
    elu_requantize,
    elu_thresholds,
    exp_table,
    gat_constants,
    gat_forward_int,
    gat_forward_reference,
    gat_graph,
    gat_layer_trace,
)
from quant.integer import round_half_away

_spec = importlib.util.spec_from_file_location("_quant_test_convert", Path(__file__).with_name("test_convert.py"))
_convert_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_convert_tests)  # tests are not a package (--import-mode=importlib)
tiny_graph, F_IN, C = _convert_tests.tiny_graph, _convert_tests.F_IN, _convert_tests.C


def quantized_gat(graph, method: str = "a2q", seed: int = 0, layers: int = 3):
    """A quantized GAT (4 concatenated heads, 2 averaged heads in the last layer) with randomised learned bits and
    steps of its inputs and projected features, as after training."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(arch="gat", in_dim=F_IN, out_dim=C, hidden_dim=16, heads=4, out_heads=2,
                                    num_layers=layers))
    quantize_(model, QuantConfig(method=method, target_bits=2.0, num_degree_buckets=6), graph.data)
    with torch.no_grad():
        model(graph.data.x, graph.data.edge_index)  # calibrates every step
        for conv in model.convs:
            conv.bias.normal_(0, 0.1)
            for q in (conv.q_input, conv.q_xw):
                if hasattr(q, "learn_bits"):
                    q.bits.uniform_(1.6, 6.4)  # rounded: 2..6 signed bits
                    q.step.mul_(torch.empty_like(q.step).uniform_(0.15, 0.5))  # some clipping
    model.eval()
    return model


@pytest.mark.parametrize("method", ["a2q", "degree-aware"])
def test_reference_equals_torch_fake_quant_in_float64(method):
    graph = tiny_graph()
    model = quantized_gat(graph, method)
    d = graph.data
    conv = to_quantized_gat(model, d.x, d.edge_index)
    assert conv.input_exact and conv.x_schemes[0] == "input"
    with torch.no_grad():
        want = model.double()(d.x.double(), d.edge_index).numpy()
    outs, got = gat_forward_reference(conv.model, conv.edge_index)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.unique(conv.model.layers[1].x_bits).size > 1  # mixed precision really exercised
    assert (outs[0] < 0).any() and conv.model.layers[-1].heads == 2 and not conv.model.layers[-1].concat


def test_integer_path_agrees_with_fake_quant():
    graph = tiny_graph(1)
    model = quantized_gat(graph, seed=1)
    d = graph.data
    conv = to_quantized_gat(model, d.x, d.edge_index)
    outs_i, logits_i = gat_forward_int(conv.model, conv.edge_index, on_overflow="raise")
    outs_r, logits_r = gat_forward_reference(conv.model, conv.edge_index)
    for a, b in zip(outs_i[:-1], outs_r[:-1], strict=True):
        assert np.abs(a - b).max() <= 1 and np.mean(a != b) < 0.02
        assert (a < 0).any()  # the comparison-only ELU branch is exercised
    assert np.abs(logits_i - logits_r).max() < 0.02 * np.abs(logits_r).max()
    with torch.no_grad():
        fake = model(d.x, d.edge_index).numpy()
    assert np.mean(logits_i.argmax(1) == fake.argmax(1)) >= 0.95


def _layer(rng, n, f_in, heads, c, score_bits=4, last=True, concat=True) -> QuantizedGATLayer:
    return QuantizedGATLayer(
        x_steps=rng.uniform(0.05, 0.5, n), x_bits=rng.integers(2, 7, n), w_codes=rng.integers(-7, 8, (heads * c, f_in)),
        w_steps=rng.uniform(0.02, 0.1, heads * c), xw_steps=rng.uniform(0.05, 0.4, n), xw_bits=rng.integers(2, 7, n),
        heads=heads, att_src_codes=rng.integers(-7, 8, (heads, c)), att_dst_codes=rng.integers(-7, 8, (heads, c)),
        att_steps=rng.uniform(0.05, 0.2, heads), score_steps=rng.uniform(0.2, 0.8, heads), score_bits=score_bits,
        concat=concat, bias=rng.normal(0, 0.2, heads * c if concat else c),
        out_steps=None if last else rng.uniform(0.05, 0.6, n), out_bits=None if last else rng.integers(1, 8, n))


def test_softmax_numerators_match_float64_softmax():
    """Per destination, the table numerators over their sum equal the float64 softmax of the LeakyReLU'd scores
    within 2^-(EXP_BITS - 1); the maximum edge's numerator is exactly 2^EXP_BITS, codes above the max give 0."""
    rng = np.random.default_rng(3)
    layer = _layer(rng, 40, 6, 3, 4, score_bits=5)
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
    layer = _layer(rng, 50, 6, 2, 3, last=False)
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


def test_degree_aware_per_node_values_come_from_the_tables():
    graph = tiny_graph(2)
    model = quantized_gat(graph, "degree-aware", seed=2)
    d = graph.data
    conv = to_quantized_gat(model, d.x, d.edge_index)
    bucket = degree_bucket(in_degree(d.edge_index, d.num_nodes), 6, model.convs[0].q_xw.bucket_scheme).numpy()
    np.testing.assert_array_equal(conv.model.layers[0].xw_bits, conv.degree_tables[(0, "xw")]["bits"][bucket])
    np.testing.assert_array_equal(conv.model.layers[1].x_steps, conv.degree_tables[(1, "input")]["step"][bucket])


def test_rejects_unconvertible_models_and_bad_layers():
    graph = tiny_graph()
    d = graph.data
    gcn = build_model(ModelConfig(arch="gcn", in_dim=F_IN, out_dim=C))
    quantize_(gcn, QuantConfig(method="a2q"), d)
    with pytest.raises(ValueError, match="takes arch='gat'"):
        to_quantized_gat(gcn, d.x, d.edge_index)
    dq = build_model(ModelConfig(arch="gat", in_dim=F_IN, out_dim=C, hidden_dim=8, heads=2))
    quantize_(dq, QuantConfig(method="dq-int8"), d)
    with pytest.raises(ValueError, match="supported: a2q, degree-aware"):
        to_quantized_gat(dq, d.x, d.edge_index)
    layer = _layer(np.random.default_rng(5), 5, 4, 2, 3)
    with pytest.raises(ValueError, match="do not split into heads=4"):
        QuantizedGATLayer(**{**layer.__dict__, "heads": 4})
    with pytest.raises(ValueError, match="attention codes exceed"):
        QuantizedGATLayer(**{**layer.__dict__, "att_src_codes": np.full((2, 3), 9)})
    with pytest.raises(ValueError, match="score_bits=1"):
        QuantizedGATLayer(**{**layer.__dict__, "score_bits": 1})
    with pytest.raises(ValueError, match="bias has shape"):
        QuantizedGATLayer(**{**layer.__dict__, "concat": False})
    with pytest.raises(ValueError, match="step must be > 0"):
        QuantizedGATLayer(**{**layer.__dict__, "score_steps": np.zeros(2)})


@pytest.mark.slow
def test_cora_integer_accuracy_within_0p3_points_of_fake_quant(cora):
    """Real short A2Q training of a GAT on Cora (preset: 8 heads of 8), conversion, and the issue's target; at a 1.7-bit
    target A2Q's GAT collapses (RESULTS.md), so 4 bits."""
    acc_fake, acc_int = _convert_tests.cora_integer_and_fake_accuracy(cora, "gat", to_quantized_gat, gat_forward_int,
                                                                      target_bits=4.0)
    assert acc_fake > 0.6  # a trained model, not chance
    assert abs(acc_int - acc_fake) <= 0.003, (acc_fake, acc_int)
