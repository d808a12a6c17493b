"""Trained quantized GCN -> integer model: the float64 reference of the converted parameters equals the project's
fake-quant model run in float64, per-node values follow the degree table, and the integer path agrees."""

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnn.data.loaders import GraphData
from gnn.data.splits import Split
from gnn.models import ModelConfig, build_model
from gnn.ops import in_degree
from quant.qat.api import QuantConfig, quantize_
from quant.convert import input_codes
from quant.archs.gcn.convert import to_quantized_gcn
from quant.qat.degree_aware import degree_bucket
from quant.archs.gcn.integer import gcn_forward_int, gcn_forward_reference

N, F_IN, C = 80, 24, 3


def tiny_graph(seed: int = 0) -> GraphData:
    """Row-normalised binary bag-of-words features (as Cora's), a random symmetric graph, random labels."""
    g = torch.Generator().manual_seed(seed)
    xb = (torch.rand(N, F_IN, generator=g) < 0.2).float()
    xb[0] = 0.0  # an all-zero row
    x = xb / xb.sum(dim=1, keepdim=True).clamp_min(1.0)
    ei = torch.randint(0, N, (2, 240), generator=g)
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    y = torch.randint(0, C, (N,), generator=g)
    perm = torch.randperm(N, generator=g)
    split = Split(train=perm[:30], val=perm[30:50], test=perm[50:])
    return GraphData(name="tiny", task="node", data=Data(x=x, edge_index=ei, y=y), graphs=None, splits=[split],
                     num_features=F_IN, num_classes=C)


def cora_integer_and_fake_accuracy(cora, arch: str, convert, forward, **train_overrides) -> tuple[float, float]:
    """Short real A2Q training (60 epochs, seed 0) of ``arch``'s preset on Cora, then the test accuracy of the
    fake-quant model and of its integer golden model (``convert`` -> ``forward``). The slow tests of every layer."""
    from dataclasses import replace

    from gnn.presets import model_and_train_config
    from gnn.trainer import seed_everything, train_one

    model_cfg, train_cfg = model_and_train_config(cora, arch)
    train_cfg = replace(train_cfg, **{"quant": "a2q", "target_bits": 1.7, "epochs": 60, "device": "cpu",
                                      **train_overrides})
    seed_everything(0)
    model = build_model(model_cfg)
    train_one(model, cora, cora.splits[0], train_cfg, seed=0, progress=False)
    model.eval()
    d, test, y = cora.data, cora.splits[0].test.numpy(), cora.data.y.numpy()
    x = d.x.to_dense() if d.x.is_sparse else d.x
    with torch.no_grad():
        fake = model(x, d.edge_index).numpy()
    conv = convert(model, x, d.edge_index)
    _, logits = forward(conv.model, conv.edge_index, on_overflow="raise")
    return tuple(float((z[test].argmax(1) == y[test]).mean()) for z in (fake, logits))


def quantized_model(graph: GraphData, method: str = "a2q", seed: int = 0, hidden: int = 8, layers: int = 2,
                    arch: str = "gcn"):
    """A quantized GCN (or GraphSAGE) with randomised learned bits and steps (as after training)."""
    torch.manual_seed(seed)
    model = build_model(ModelConfig(arch=arch, in_dim=F_IN, out_dim=C, hidden_dim=hidden, num_layers=layers))
    quantize_(model, QuantConfig(method=method, target_bits=2.0, num_degree_buckets=6), graph.data)
    with torch.no_grad():
        for conv in model.convs:
            bias, points = (conv.bias, [conv.q_input]) if arch == "gcn" else (
                conv.lin_neigh.bias, [conv.q_input, conv.q_aggregate])
            bias.normal_(0, 0.05)
            for q in points:
                if hasattr(q, "learn_bits"):
                    q.bits.uniform_(1.6, 6.4)  # rounded: 2..6 signed bits, some 1-bit (all-zero) rows after clamp
                    q.step.mul_(torch.empty_like(q.step).uniform_(0.15, 0.5))  # some clipping
    model.eval()
    return model


@pytest.mark.parametrize("method", ["a2q", "degree-aware"])
def test_reference_equals_torch_fake_quant_in_float64(method):
    graph = tiny_graph()
    model = quantized_model(graph, method, layers=3)
    d = graph.data
    conv = to_quantized_gcn(model, d.x, d.edge_index)
    assert conv.input_exact and conv.x_schemes[0] == "input"
    with torch.no_grad():
        want = model.double()(d.x.double(), d.edge_index).numpy()
    _, got = gcn_forward_reference(conv.model, conv.edge_index, exact_constants=True)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.unique(conv.model.layers[1].x_bits).size > 2  # mixed precision really exercised
    assert conv.model.layers[0].xw_scheme == "channel"  # A2Q's per-channel XW step


def test_integer_path_agrees_with_fake_quant():
    graph = tiny_graph(1)
    model = quantized_model(graph, seed=1)
    d = graph.data
    conv = to_quantized_gcn(model, d.x, d.edge_index, frac_bits=14, psum_bits=32)
    outs_i, logits_i = gcn_forward_int(conv.model, conv.edge_index)
    outs_r, logits_r = gcn_forward_reference(conv.model, conv.edge_index, exact_constants=True)
    assert np.abs(outs_i[0] - outs_r[0]).max() <= 1 and np.mean(outs_i[0] != outs_r[0]) < 0.02
    with torch.no_grad():
        fake = model(d.x, d.edge_index).numpy()
    assert np.mean(logits_i.argmax(1) == fake.argmax(1)) >= 0.95
    assert np.abs(logits_i - logits_r).max() < 0.05 * np.abs(logits_r).max()


def test_degree_aware_per_node_values_come_from_the_table():
    graph = tiny_graph(2)
    model = quantized_model(graph, "degree-aware", seed=2)
    d = graph.data
    conv = to_quantized_gcn(model, d.x, d.edge_index)
    tab = conv.degree_tables[1]
    q = model.convs[1].q_input
    bucket = degree_bucket(in_degree(d.edge_index, N), q.num_buckets, q.bucket_scheme).numpy()
    np.testing.assert_array_equal(conv.model.layers[1].x_bits, tab["bits"][bucket])
    np.testing.assert_array_equal(conv.model.layers[1].x_steps, tab["step"][bucket])
    np.testing.assert_array_equal(conv.model.layers[0].out_steps, tab["step"][bucket])
    np.testing.assert_array_equal(tab["min_degree"], np.arange(6))
    assert tab["max_degree"][-1] == -1  # last bucket unbounded


def test_input_codes_exact_and_fallback():
    x = np.array([[0.0, 0.25, 0.25, 0.0], [0.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.0, 0.0]], dtype=np.float32)
    codes, steps, bits, exact = input_codes(x)
    assert exact and bits.tolist() == [2, 1, 2]
    np.testing.assert_array_equal(codes * steps[:, None], x)
    x2 = np.array([[0.1, 0.3, -0.7]])
    codes, steps, bits, exact = input_codes(x2)
    assert not exact and bits.tolist() == [8]
    assert np.abs(codes * steps[:, None] - x2).max() <= steps[0] / 2 + 1e-12


def test_rejects_unsupported_models():
    graph = tiny_graph()
    dq = build_model(ModelConfig(arch="gcn", in_dim=F_IN, out_dim=C))
    quantize_(dq, QuantConfig(method="dq-int8"), graph.data)
    with pytest.raises(ValueError, match="supported: a2q, degree-aware"):
        to_quantized_gcn(dq, graph.data.x, graph.data.edge_index)
    sage = build_model(ModelConfig(arch="sage", in_dim=F_IN, out_dim=C))
    with pytest.raises(ValueError, match="takes arch='gcn'.*to_quantized_sage"):
        to_quantized_gcn(sage, graph.data.x, graph.data.edge_index)
    fp32 = build_model(ModelConfig(arch="gcn", in_dim=F_IN, out_dim=C))
    with pytest.raises(ValueError, match="not quantized"):
        to_quantized_gcn(fp32, graph.data.x, graph.data.edge_index)
