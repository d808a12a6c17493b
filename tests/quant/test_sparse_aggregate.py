"""A quantized GraphSAGE or GIN keeps sparse bag-of-words input sparse through its quantized first-layer aggregate
(the neighbour mean, or GIN's (1 + eps) x_i + sum_j x_j with a learned eps): the same outputs and gradients as the
dense path in float64, for A2Q (Local Gradient and task gradient), degree-aware and Degree-Quant (protective mask
and percentile range included)."""

import copy
from types import SimpleNamespace

import pytest
import torch
from torch_geometric.data import Data

from gnn.conv.aggregation import CsrAggregation
from gnn.models import ModelConfig, build_model
from gnn.ops import _FIXED_PATTERNS, storage_address
from gnn.trainer import first_layer_aggregates_sparse, first_layer_takes_sparse, wants_sparse_input
from quant.qat.a2q import A2QQuantizer
from quant.qat.api import QuantConfig, quant_penalty, quant_summary, quantize_
from quant.qat.degree_quant import DQQuantizer
from quant.qat.graph_context import GraphContext


def bag_of_words_graph(n=90, f=50, density=0.06, seed=0):
    """Features at ~6% density, random directed edges; nodes 0..4 have no in-edges. The stored values are random
    (tf-idf-like), not 0/1: binary means hit rounding ties (x / s = k + 1/2 exactly), where a 1e-16 difference in
    summation order between the sparse and dense products legitimately flips a code."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, f, generator=g, dtype=torch.float64) * (torch.rand(n, f, generator=g) < density)
    src = torch.randint(0, n, (5 * n,), generator=g)
    dst = torch.randint(5, n, (5 * n,), generator=g)
    return Data(x=x, edge_index=torch.unique(torch.stack([src, dst]), dim=1), y=torch.randint(0, 3, (n,), generator=g),
                num_nodes=n)


def quantized_model(data, arch="sage", **quant):
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch=arch, in_dim=data.x.size(1), out_dim=3, hidden_dim=8, dropout=0.0))
    return quantize_(model.double(), QuantConfig(**quant), data).double()  # quantizers are made in float32


def step(model, x, data):
    """One training forward + backward; returns the logits and every gradient by parameter name."""
    torch.manual_seed(1)  # Degree-Quant's protective mask is drawn in the forward pre-hook
    model.train()
    model.zero_grad()
    out = model(x, data.edge_index)
    weights = torch.linspace(-1.0, 1.0, out.numel(), dtype=out.dtype).view_as(out)
    ((out * weights).sum() + quant_penalty(model)).backward()
    return out.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("quant", [
    {"method": "a2q", "local_gradient": "on"}, {"method": "a2q", "local_gradient": "off", "init_bits": 3},
    {"method": "degree-aware", "num_degree_buckets": 4}, {"method": "dq-int4", "dq_low": 0.3},
    {"method": "dq-int8"}], ids=lambda q: "-".join(f"{v}" for v in q.values()))
@pytest.mark.parametrize("arch", ["sage", "gin"])
def test_sparse_quantized_aggregate_equals_dense(arch, quant):
    data = bag_of_words_graph()
    sparse_model = quantized_model(data, arch, **quant)
    if arch == "gin":
        with torch.no_grad():
            sparse_model.convs[0].eps.fill_(0.3)  # a non-zero learned eps: its gradient is compared too
    dense_model = copy.deepcopy(sparse_model)
    assert first_layer_aggregates_sparse(sparse_model) and not first_layer_takes_sparse(sparse_model)
    x_sparse = data.x.to_sparse()  # one input tensor, as in training: its pattern repeats and gets planned
    for _ in range(2):  # the second step sees the Degree-Quant range stored by the first, and the planned product
        out_s, grads_s = step(sparse_model, x_sparse, data)
        out_d, grads_d = step(dense_model, data.x, data)
        torch.testing.assert_close(out_s, out_d, rtol=0, atol=1e-10)
        assert grads_s.keys() == grads_d.keys() and len(grads_s) >= 5
        for name in grads_d:
            torch.testing.assert_close(grads_s[name], grads_d[name], rtol=0, atol=1e-10, msg=name)
    agg_s, agg_d = sparse_model.convs[0].q_aggregate, dense_model.convs[0].q_aggregate
    if isinstance(agg_d, DQQuantizer):
        assert torch.isfinite(agg_d.hi) and agg_d.hi > 0
        torch.testing.assert_close((agg_s.lo, agg_s.hi), (agg_d.lo, agg_d.hi), rtol=0, atol=1e-12)
    else:
        assert any(n.startswith("convs.0.q_aggregate") for n in grads_d)  # its step and bits learn
    assert quant_summary(sparse_model)["avg_bits"] == pytest.approx(quant_summary(dense_model)["avg_bits"])
    for m in (sparse_model, dense_model):
        m.eval()
    with torch.no_grad():
        torch.testing.assert_close(sparse_model(x_sparse, data.edge_index),
                                   dense_model(data.x, data.edge_index), rtol=0, atol=1e-10)
    assert sparse_model.convs[0]._csr._plans  # the planned product (gnn.conv.sparse_product) really ran
    (plan,) = sparse_model.convs[0]._csr._plans.values()
    kept = _FIXED_PATTERNS[storage_address(plan.indices)]  # the second step's weight gradient read X^T through it
    assert kept.column_major is not None


def test_sparse_calibration_of_per_row_steps_matches_dense():
    x = bag_of_words_graph().x * torch.linspace(0.5, 2.0, 50, dtype=torch.float64)
    ctx = GraphContext(90, torch.randint(0, 90, (2, 300), generator=torch.Generator().manual_seed(3)))
    for scheme, shape in (("node", (90, 1)), ("degree", (6, 1))):
        q_sparse, q_dense = (A2QQuantizer(role="aggregate", kind="node", scheme=scheme, param_shape=shape, init_bits=3,
                                          max_bits=8, unsigned=True, local=True, ctx=ctx, num_buckets=6).double()
                             for _ in range(2))
        out = q_sparse(x.to_sparse())
        assert out.is_sparse
        torch.testing.assert_close(out.to_dense(), q_dense(x), rtol=0, atol=1e-12)
        torch.testing.assert_close(q_sparse.step, q_dense.step, rtol=0, atol=1e-15)


def test_who_keeps_input_sparse_and_bad_sparse_input():
    data = bag_of_words_graph()
    torch.manual_seed(0)
    fp32 = build_model(ModelConfig(arch="sage", in_dim=50, out_dim=3, hidden_dim=8))
    assert first_layer_takes_sparse(fp32) and not first_layer_aggregates_sparse(fp32)  # projects first
    quantized_input = quantized_model(data, method="a2q", quantize_first_input=True)
    assert not first_layer_aggregates_sparse(quantized_input)  # X itself is quantized: dense rows
    big = SimpleNamespace(task="node", data=SimpleNamespace(x=torch.rand(1100, 1000) * (torch.rand(1100, 1000) < 0.01)))
    quantized = quantized_model(data, method="degree-aware")
    assert wants_sparse_input(quantized, big, "cpu") and not wants_sparse_input(quantized, big, "cuda")
    assert wants_sparse_input(fp32, big, "cuda")  # projecting first is sparse on every device
    assert not wants_sparse_input(quantized, SimpleNamespace(task="node", data=SimpleNamespace(x=big.data.x[:500])))
    ctx = GraphContext()
    channel = A2QQuantizer(role="xw", kind="node", scheme="channel", param_shape=(1, 50), init_bits=4, max_bits=8,
                           unsigned=False, local=False, ctx=ctx)
    with pytest.raises(ValueError, match="per-row schemes"):
        channel(data.x.to_sparse())
    with pytest.raises(ValueError, match="need a gradient"):
        CsrAggregation("mean").sparse(data.edge_index, data.x.to_sparse().requires_grad_(True))
