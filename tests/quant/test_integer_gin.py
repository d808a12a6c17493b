"""Integer GIN (quant.archs.gin.integer): the converter's sign folding and learned eps, the 16-bit fixed-point hidden
activation of a GIN trained without the hidden quantizer, bit-exactness on power-of-two scales (both input schemes,
both signs of the norm scale, a node without in-edges, a repeated edge), GIN-only bad input. What every architecture's
integer model must satisfy (the float64 reference equals the project's quantized GIN run in float64, the integer path
agrees, the degree tables, saturation, bad layer fields, unconvertible models, the slow Cora accuracy) is
test_integer_archs.py.

Re-exports the tiny graph and quantized GIN of arch_cases.py for tests/hw, which loads this file by its path."""


import numpy as np
import pytest
import torch
from arch_cases import (
    METHODS,
    converted,
    exact_on_pow2,
    gin_pow2_layer,
    lone_node_edges,
    quantized_gin,
    tiny_graph,
)

from quant.archs.gin.convert import fixed_point_hidden_steps, to_quantized_gin
from quant.archs.gin.integer import (
    HIDDEN_FIXED_BITS,
    gin_forward_int,
    gin_forward_reference,
    gin_graph,
    gin_layer_trace,
)

__all__ = ["quantized_gin", "tiny_graph"]


@pytest.mark.parametrize("method", METHODS)
def test_converted_gin_folds_negative_norm_scales_and_a_learned_eps(method):
    _, _, conv = converted("gin", method, layers=3)  # the model of test_reference_equals_torch_fake_quant_in_float64
    layer = conv.model.layers[1]
    assert (layer.bn_scale < 0).any() and layer.eps != 0  # the sign folding and the self-loop weight exercised


@pytest.mark.parametrize("method", METHODS)
def test_without_hidden_quantizer_the_hidden_activation_is_16_bit_fixed_point(method):
    """A GIN trained without the hidden quantizer (the grid's recipe): the converter calibrates per-node 16-bit steps
    on the model's own hidden activation; the float64 reference equals the torch model with exactly that fixed point
    inserted, and the integer path stays within one step of it."""
    graph = tiny_graph(2)
    d = graph.data
    model = quantized_gin(graph, method, seed=2, layers=3, quantize_mlp_hidden=False).double()
    x = d.x.double()
    conv = to_quantized_gin(model, x, d.edge_index)
    assert conv.hidden_schemes == ("fixed",) * 3
    captured = {}
    for li, c in enumerate(model.convs):
        c.mlp[3].register_forward_hook(lambda _m, inp, _o, li=li: captured.__setitem__(li, inp[0].numpy().copy()))
    with torch.no_grad():
        plain = model(x, d.edge_index).numpy()
    for li, layer in enumerate(conv.model.layers):
        assert np.all(layer.hid_bits == HIDDEN_FIXED_BITS) and layer.hidden_frac_bits == layer.frac_bits - 8
        np.testing.assert_allclose(layer.hid_steps, fixed_point_hidden_steps(captured[li]), rtol=0)
        row_max = captured[li].max(axis=1)
        np.testing.assert_allclose(row_max[row_max > 0] / layer.hid_steps[row_max > 0], 2**15 - 1, rtol=1e-12)

    def fixed_point(li):  # the torch model with the integer path's hidden rounding inserted
        s = torch.as_tensor(conv.model.layers[li].hid_steps)[:, None]
        return lambda _m, _inp, out: torch.clamp(torch.round(out / s), -(2**15 - 1), 2**15 - 1) * s

    for li, c in enumerate(model.convs):
        c.mlp[3]._forward_hooks.clear()
        c.mlp[3].register_forward_hook(fixed_point(li))
    with torch.no_grad():
        want = model(x, d.edge_index).numpy()
    _, got = gin_forward_reference(conv.model, conv.edge_index, exact_constants=True)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.abs(got - plain).max() < 1e-3 * np.abs(plain).max()  # 16 bits: close to the unrounded model
    outs_i, logits_i = gin_forward_int(conv.model, conv.edge_index, on_overflow="raise")
    outs_r, _ = gin_forward_reference(conv.model, conv.edge_index, exact_constants=True)
    assert np.abs(outs_i[0] - outs_r[0]).max() <= 1 and np.mean(logits_i.argmax(1) == plain.argmax(1)) >= 0.95
    trace = gin_layer_trace(conv.model.layers[0], conv.model.x_codes, gin_graph(conv.edge_index, d.num_nodes))
    assert trace["hidden"].max() > 2**14  # codes really use the 16-bit range


def test_fixed_point_hidden_steps():
    z = np.array([[0.0, 0.0], [3.0, 1.0], [0.5, 2.0**-20]])
    np.testing.assert_allclose(fixed_point_hidden_steps(z), [1.0, 3.0 / 32767, 0.5 / 32767])
    np.testing.assert_allclose(fixed_point_hidden_steps(z, bits=4), [1.0, 3.0 / 7, 0.5 / 7])


def test_integer_path_is_bit_exact_on_power_of_two_scales():
    """Snapped constants + power-of-two steps, norm scales (both signs) and 1 + eps: the integer layers equal the
    float64 fake-quant layers exactly, per-node input steps in the first layer and per-channel ones in the second,
    including a node without in-edges (its sum is its own row) and a repeated edge (counted twice)."""
    rng = np.random.default_rng(0)
    n, ei = 30, lone_node_edges(rng, 30)  # node n-1 has no in-edges
    first = gin_pow2_layer(rng, n, 12, 10, 6, "node", last=False)
    second = gin_pow2_layer(rng, n, 6, 10, 3, "channel", last=True)
    x_codes, outs = exact_on_pow2("gin", rng, first, second, 12, ei)
    graph = gin_graph(ei, n)
    lone = graph[0][n - 1]  # the only slot of node n-1 is its self loop
    assert graph[0][n] - lone == 1 and graph[2][lone]
    hidden = gin_layer_trace(first, x_codes, graph)["hidden"]
    assert np.count_nonzero(outs[0]) > 0.2 * outs[0].size and np.count_nonzero(hidden) > 0


def test_rejects_models_outside_eval_mode_and_codes_over_their_bits():
    graph = tiny_graph()
    d = graph.data
    no_norm = quantized_gin(graph, quantize_mlp_hidden=False)
    for conv in no_norm.convs:
        conv.mlp[1] = torch.nn.Identity()
    with pytest.raises(ValueError, match="eval forward"):  # dropout would change the calibrated hidden activation
        to_quantized_gin(no_norm.train(), d.x, d.edge_index)
    training = quantized_gin(graph).train()
    with pytest.raises(ValueError, match="eval mode"):
        to_quantized_gin(training, d.x, d.edge_index)
    layer = gin_pow2_layer(np.random.default_rng(2), 5, 4, 6, 3, "channel", last=True)
    with pytest.raises(ValueError, match="exceed their per-channel"):
        gin_layer_trace(layer, np.full((5, 4), 100), gin_graph(np.zeros((2, 0), dtype=np.int64), 5))
