"""Model stack: shapes for every architecture and task, config validation."""

import pytest
import torch
import torch.nn.functional as F

from gnn.models import CONVS, ModelConfig, build_model


@pytest.mark.parametrize("arch", list(CONVS))
def test_node_model_shapes_and_gradients(arch):
    x = torch.randn(10, 5)
    ei = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]])
    m = build_model(ModelConfig(arch=arch, in_dim=5, out_dim=3, hidden_dim=4, heads=2, num_layers=3,
                                norm="layer", residual=True))
    out = m(x, ei)
    assert out.shape == (10, 3)
    out.sum().backward()
    assert all(p.grad is not None for p in m.parameters() if p.requires_grad)


@pytest.mark.parametrize("arch", ["gin", "gcn"])
@pytest.mark.parametrize("pool", ["sum", "mean"])
def test_graph_model_pools_per_graph(arch, pool):
    x = torch.randn(7, 4)
    ei = torch.tensor([[0, 1, 3, 4, 5], [1, 2, 4, 5, 6]])
    batch = torch.tensor([0, 0, 0, 1, 1, 1, 1])
    m = build_model(ModelConfig(arch=arch, in_dim=4, out_dim=2, hidden_dim=8, num_layers=3, pool=pool,
                                norm="batch")).eval()
    out = m(x, ei, batch)
    assert out.shape == (2, 3 - 1)
    # graphs are independent: the first graph's logits do not depend on the second graph
    x2 = x.clone()
    x2[3:] = torch.randn(4, 4)
    torch.testing.assert_close(m(x2, ei, batch)[0], out[0])


@pytest.mark.parametrize("bad", [dict(arch="gcnn"), dict(num_layers=0), dict(dropout=1.0), dict(norm="group"),
                                 dict(pool="max")])
def test_invalid_config_is_rejected_with_message(bad):
    kwargs = dict(arch="gcn", in_dim=3, out_dim=2) | bad
    with pytest.raises(ValueError, match="ModelConfig"):
        ModelConfig(**kwargs)


@pytest.mark.parametrize("arch", ["gcn", "gat"])
def test_sparse_input_equals_dense(arch):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(20, 30, generator=g) < 0.1).float()
    ei = torch.randint(0, 20, (2, 60), generator=g)
    m = build_model(ModelConfig(arch=arch, in_dim=30, out_dim=3, hidden_dim=4, heads=2)).eval()
    dense = m(x, ei)
    gd = torch.autograd.grad(dense.square().sum(), m.convs[0].lin.weight)[0]
    sparse = m(x.to_sparse(), ei)
    gs = torch.autograd.grad(sparse.square().sum(), m.convs[0].lin.weight)[0]
    torch.testing.assert_close(sparse, dense, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(gs, gd, atol=1e-6, rtol=1e-5)


def test_graph_readout_can_include_the_input():
    """readout_input pools the input features too (GIN paper Eq. 4.2): the head reads F_in more columns, and
    the logits then depend on the input even where every layer's output is held fixed."""
    cfg = ModelConfig(arch="gin", in_dim=4, out_dim=2, hidden_dim=8, num_layers=2, pool="sum", norm="batch")
    with_input = build_model(ModelConfig(**{**cfg.__dict__, "readout_input": True}))
    assert with_input.head[0].in_dim == 4 + 8 + 8
    assert build_model(cfg).head[0].in_dim == 8 + 8
    x = torch.randn(5, 4)
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    out = with_input.eval()(x, ei, torch.zeros(5, dtype=torch.long))
    assert out.shape == (1, 2)
    out.sum().backward()
    assert with_input.head[0].weight.grad[:, :4].abs().sum() > 0  # the input columns receive gradient


def test_linear_sum_head_is_the_gin_papers_prediction():
    """head="linear-sum": logits = sum over readouts l of Linear_l(sum-pool(h_l)) (eval: no dropout), the input
    readout included; the PROTEINS/MUTAG GIN preset uses it."""
    from torch_geometric.nn import global_add_pool

    from gnn.data.loaders import load_dataset
    from gnn.presets import model_and_train_config

    torch.manual_seed(0)
    cfg = ModelConfig(arch="gin", in_dim=4, out_dim=3, hidden_dim=8, num_layers=2, pool="sum", norm="batch",
                      readout_input=True, head="linear-sum")
    m = build_model(cfg).eval()
    assert not hasattr(m, "head") and [h.in_dim for h in m.readout_heads] == [4, 8, 8]
    x, batch = torch.randn(7, 4), torch.tensor([0, 0, 0, 1, 1, 1, 1])
    ei = torch.tensor([[0, 1, 3, 4, 5], [1, 2, 4, 5, 6]])
    hidden = []
    h = x
    for conv, norm in zip(m.convs, m.norms, strict=True):
        h = torch.relu(norm(conv(h, ei)))
        hidden.append(h)
    expected = sum(F.linear(global_add_pool(r, batch), lin.weight, lin.bias)
                   for lin, r in zip(m.readout_heads, [x, *hidden], strict=True))
    torch.testing.assert_close(m(x, ei, batch), expected)
    assert model_and_train_config(load_dataset("mutag"), "gin")[0].head == "linear-sum"
    with pytest.raises(ValueError, match="unknown head"):
        ModelConfig(arch="gin", in_dim=4, out_dim=2, pool="sum", head="mean")
