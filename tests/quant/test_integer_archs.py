"""What every integer-path architecture's converted model must satisfy (GCN, GraphSAGE, GIN, GAT: the cases of
arch_cases.py): the float64 reference equals the project's fake-quant model run in float64, the integer path agrees
with both, per-node values follow the degree tables, a narrow partial sum raises on request and saturates otherwise,
bad layers and unconvertible models are refused, and (slow) the integer path's Cora accuracy. The checks of one
architecture only stay in its own file: test_integer_gnn.py, test_convert.py (GCN), test_integer_{sage,gin,gat}.py."""

import numpy as np
import pytest
import torch
from arch_cases import (
    CASES,
    F_IN,
    METHODS,
    C,
    converted,
    cora_integer_and_fake_accuracy,
    gat_layer,
    gin_pow2_layer,
    sage_pow2_layer,
    tiny_graph,
)

from gnn.models import ModelConfig, build_model
from gnn.ops import in_degree
from quant.qat.api import QuantConfig, quantize_
from quant.qat.degree_aware import degree_bucket

SIGNED_HIDDEN = ("gat",)  # ELU between layers: negative hidden codes; the others' ReLU outputs never are
MIXED = {  # arch -> (layer, per-node bits, more distinct widths than): mixed precision really exercised
    "gcn": ((1, "x_bits", 2),),
    "sage": ((1, "x_bits", 2), (0, "agg_bits", 2)),
    "gin": ((1, "hid_bits", 2), (1, "agg_bits", 2)),
    "gat": ((1, "x_bits", 1),),
}
HIDDEN_X_SCHEME = {"gin": "channel"}  # GIN's hidden layers take per-channel inputs (quant.qat.plan)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("arch", CASES)
def test_reference_equals_torch_fake_quant_in_float64(arch, method):
    graph, model, conv = converted(arch, method, layers=3)
    d = graph.data
    scheme = HIDDEN_X_SCHEME.get(arch, "degree" if method == "degree-aware" else "node")
    assert conv.input_exact and conv.x_schemes == ("input", scheme, scheme)
    with torch.no_grad():
        want = model.double()(d.x.double(), d.edge_index).numpy()
    outs, got = CASES[arch].forward_reference(conv.model, conv.edge_index, exact_constants=True)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    for li, bits, more_than in MIXED[arch]:
        assert np.unique(getattr(conv.model.layers[li], bits)).size > more_than, (li, bits)
    assert [(h < 0).any() for h in outs[:-1]] == [arch in SIGNED_HIDDEN] * 2


@pytest.mark.parametrize("arch", CASES)
def test_integer_path_agrees_with_fake_quant(arch):
    graph, model, conv = converted(arch, seed=1)
    outs_i, logits_i = CASES[arch].forward_int(conv.model, conv.edge_index, on_overflow="raise")
    outs_r, logits_r = CASES[arch].forward_reference(conv.model, conv.edge_index, exact_constants=True)
    for a, b in zip(outs_i[:-1], outs_r[:-1], strict=True):
        assert np.abs(a - b).max() <= 1 and np.mean(a != b) < 0.02
        assert (a < 0).any() == (arch in SIGNED_HIDDEN)  # GAT: the comparison-only ELU branch is exercised
    assert np.abs(logits_i - logits_r).max() < 0.02 * np.abs(logits_r).max()
    with torch.no_grad():
        fake = model(graph.data.x, graph.data.edge_index).numpy()
    assert np.mean(logits_i.argmax(1) == fake.argmax(1)) >= 0.95


DEGREE_TABLES = {  # arch -> (conv, quantizer) of the bucket scheme, [(layer, field, table, column)], tables it lacks
    "gcn": ((1, "q_input"), [(1, "x_bits", 1, "bits"), (1, "x_steps", 1, "step"), (0, "out_steps", 1, "step")], ()),
    "sage": ((1, "q_input"), [(1, "x_bits", (1, "input"), "bits"), (0, "out_steps", (1, "input"), "step"),
                              (0, "agg_steps", (0, "aggregate"), "step")], ()),
    "gin": ((0, "q_aggregate"), [(1, "agg_bits", (1, "aggregate"), "bits"), (0, "hid_steps", (0, "hidden"), "step")],
            ((1, "input"),)),  # GIN's input stays per channel (quant.qat.plan)
    "gat": ((0, "q_xw"), [(0, "xw_bits", (0, "xw"), "bits"), (1, "x_steps", (1, "input"), "step")], ()),
}


@pytest.mark.parametrize("arch", CASES)
def test_degree_aware_per_node_values_come_from_the_tables(arch):
    graph, model, conv = converted(arch, "degree-aware", seed=2)
    (ci, quantizer), fields, absent = DEGREE_TABLES[arch]
    scheme = getattr(model.convs[ci], quantizer).bucket_scheme
    bucket = degree_bucket(in_degree(graph.data.edge_index, graph.data.num_nodes), 6, scheme).numpy()
    for li, field, table, column in fields:
        np.testing.assert_array_equal(getattr(conv.model.layers[li], field), conv.degree_tables[table][column][bucket],
                                      err_msg=f"layer {li} {field}")
    for tab in conv.degree_tables.values():
        np.testing.assert_array_equal(tab["min_degree"], np.arange(6))
        assert tab["max_degree"][-1] == -1  # last bucket unbounded
    assert not set(absent) & set(conv.degree_tables)


NARROW_LAYERS = {  # arch -> a last layer of 10 nodes and 8 input features on power-of-two scales
    "sage": lambda rng: sage_pow2_layer(rng, 10, 8, 4, last=True),
    "gin": lambda rng: gin_pow2_layer(rng, 10, 8, 6, 4, "channel", last=True),
}


@pytest.mark.parametrize("arch", NARROW_LAYERS)
def test_saturation_is_reported_on_request(arch):
    layer = NARROW_LAYERS[arch](np.random.default_rng(1))
    narrow = type(layer)(**{**layer.__dict__, "psum_bits": 8})
    x = np.full((10, 8), 1)
    ring, hub = np.arange(20) % 10, np.zeros(20, dtype=np.int64)
    for ei in (np.stack([ring, hub]), np.stack([hub, ring])):  # node 0 sums 20 in-edges; node 0 feeds every node
        graph = CASES[arch].graph(ei, 10)
        with pytest.raises(OverflowError, match="8-bit"):
            CASES[arch].trace(narrow, x, graph, on_overflow="raise")
        CASES[arch].trace(narrow, x, graph)  # the default policy saturates


VALID_LAYERS = {  # arch -> a valid small layer, each bad field below replaced in turn
    "sage": lambda: sage_pow2_layer(np.random.default_rng(2), 5, 4, 3, last=True),
    "gin": lambda: gin_pow2_layer(np.random.default_rng(2), 5, 4, 6, 3, "channel", last=True),
    "gat": lambda: gat_layer(np.random.default_rng(5), 5, 4, 2, 3),
}
BAD_FIELDS = [  # (arch, field, bad value, what the error says)
    ("sage", "agg_bits", np.ones(4, dtype=np.int64), "agg_bits has shape"),
    ("sage", "agg_steps", np.zeros(5), "step must be > 0"),
    ("sage", "wr_codes", np.full((3, 4), 9), "wr_codes exceed"),
    ("gin", "x_scheme", "node", "x_steps has shape"),
    ("gin", "hid_bits", np.ones(4, dtype=np.int64), "hid_bits has shape"),
    ("gin", "hid_steps", np.zeros(5), "step must be > 0"),
    ("gin", "w2_codes", np.full((3, 6), 9), "w2_codes exceed"),
    ("gin", "eps", -1.5, r"1 \+ eps"),
    ("gin", "x_scheme", "row", "x_scheme"),
    ("gat", "heads", 4, "do not split into heads=4"),
    ("gat", "att_src_codes", np.full((2, 3), 9), "attention codes exceed"),
    ("gat", "score_bits", 1, "score_bits=1"),
    ("gat", "concat", False, "bias has shape"),
    ("gat", "score_steps", np.zeros(2), "step must be > 0"),
]


@pytest.mark.parametrize(("arch", "field", "value", "match"), BAD_FIELDS,
                         ids=[f"{arch}-{field}-{match.split()[-1]}" for arch, field, _, match in BAD_FIELDS])
def test_bad_layers_are_refused(arch, field, value, match):
    layer = VALID_LAYERS[arch]()
    with pytest.raises(ValueError, match=match):
        type(layer)(**{**layer.__dict__, field: value})


OTHER_ARCH = {"gcn": "sage", "sage": "gcn", "gin": "sage", "gat": "gcn"}
SMALL = {"gat": {"hidden_dim": 8, "heads": 2}}  # a smaller GAT than the default


@pytest.mark.parametrize("arch", CASES)
def test_rejects_unconvertible_models(arch):
    d = tiny_graph().data
    convert = CASES[arch].convert
    other = build_model(ModelConfig(arch=OTHER_ARCH[arch], in_dim=F_IN, out_dim=C))
    wrong_arch = rf"takes arch='{arch}'.*to_quantized_sage"  # and names every converter
    with pytest.raises(ValueError, match=wrong_arch):
        convert(other, d.x, d.edge_index)
    quantize_(other, QuantConfig(method="a2q"), d)
    with pytest.raises(ValueError, match=wrong_arch):
        convert(other, d.x, d.edge_index)
    dq = build_model(ModelConfig(arch=arch, in_dim=F_IN, out_dim=C, **SMALL.get(arch, {})))
    quantize_(dq, QuantConfig(method="dq-int8"), d)
    with pytest.raises(ValueError, match="supported: a2q, degree-aware"):
        convert(dq, d.x, d.edge_index)
    with pytest.raises(ValueError, match="not quantized"):
        convert(build_model(ModelConfig(arch=arch, in_dim=F_IN, out_dim=C, **SMALL.get(arch, {}))), d.x, d.edge_index)


@pytest.mark.slow
@pytest.mark.parametrize(("arch", "overrides"), [
    ("sage", {}),
    ("gin", {"quantize_mlp_hidden": True}),  # the hidden activation quantized
    ("gin", {"quantize_mlp_hidden": False}),  # the hidden activation in 16-bit fixed point
    ("gat", {"target_bits": 4.0}),  # preset: 8 heads of 8; at a 1.7-bit target A2Q's GAT collapses (RESULTS.md)
], ids=["sage", "gin-hidden-quantized", "gin-hidden-fixed", "gat-4bit"])
def test_cora_integer_accuracy_within_0p3_points_of_fake_quant(cora, arch, overrides):
    """Real short A2Q training on Cora, conversion, and the issue's target for the integer path."""
    acc_fake, acc_int = cora_integer_and_fake_accuracy(cora, arch, CASES[arch].convert, CASES[arch].forward_int,
                                                       **overrides)
    assert acc_fake > 0.6  # a trained model, not chance
    assert abs(acc_int - acc_fake) <= 0.003, (acc_fake, acc_int)
