"""Each layer equals PyG's reference layer with copied weights, forward and gradients, to 1e-6."""

import copy

import pytest
import torch
import torch_geometric.nn as pygnn

from gnn.conv import GATConv, GCNConv, GINConv, SAGEConv
from gnn.conv.gin import gin_mlp
from gnn.conv.quant_point import QuantPoint

ATOL = 1e-6


def random_graph(num_nodes=30, num_edges=120, in_dim=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_nodes, in_dim, generator=g, dtype=torch.float64)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=g)
    return x, edge_index


def grads_of(module, x, edge_index):
    x = x.clone().requires_grad_(True)
    out = module(x, edge_index)
    weight = torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)  # a non-uniform upstream grad
    (out * weight).sum().backward()
    params = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
    return out.detach(), x.grad.clone(), params


def assert_same(ours, ref, name_map):
    out_a, gx_a, gp_a = ours
    out_b, gx_b, gp_b = ref
    torch.testing.assert_close(out_a, out_b, atol=ATOL, rtol=0)
    torch.testing.assert_close(gx_a, gx_b, atol=ATOL, rtol=0)
    for ours_name, ref_name in name_map.items():
        torch.testing.assert_close(gp_a[ours_name].reshape(gp_b[ref_name].shape), gp_b[ref_name], atol=ATOL, rtol=0)


def test_gcn_matches_pyg():
    x, ei = random_graph()
    ours = GCNConv(12, 7).double()
    ref = pygnn.GCNConv(12, 7).double()
    with torch.no_grad():
        ref.lin.weight.copy_(ours.lin.weight)
        ours.bias.normal_()
        ref.bias.copy_(ours.bias)
    assert str(ours) == "GCNConv(12, 7)"
    assert_same(grads_of(ours, x, ei), grads_of(ref, x, ei), {"lin.weight": "lin.weight", "bias": "bias"})


@pytest.mark.parametrize("in_dim, out_dim", [(12, 5), (12, 20)])  # projects first / aggregates first
def test_sage_matches_pyg(in_dim, out_dim):
    x, ei = random_graph(seed=1, in_dim=in_dim)
    ours = SAGEConv(in_dim, out_dim).double()
    assert ours.projects_first() == (out_dim < in_dim)
    ref = pygnn.SAGEConv(in_dim, out_dim).double()
    with torch.no_grad():
        ours.lin_neigh.bias.normal_()
        ref.lin_l.weight.copy_(ours.lin_neigh.weight)
        ref.lin_l.bias.copy_(ours.lin_neigh.bias)
        ref.lin_r.weight.copy_(ours.lin_root.weight)
    assert_same(grads_of(ours, x, ei), grads_of(ref, x, ei),
                {"lin_neigh.weight": "lin_l.weight", "lin_neigh.bias": "lin_l.bias", "lin_root.weight": "lin_r.weight"})


@pytest.mark.parametrize("train_eps, mlp_hidden", [(False, 9), (True, 9), (True, 20)])
def test_gin_matches_pyg(train_eps, mlp_hidden):
    x, ei = random_graph(seed=2)
    mlp = gin_mlp(12, 6, mlp_hidden).double()
    ours = GINConv(12, 6, mlp=mlp, eps=0.3, train_eps=train_eps).double().eval()
    assert ours.projects_first() == (mlp_hidden < 12)
    ref = pygnn.GINConv(copy.deepcopy(mlp), eps=0.3, train_eps=train_eps).double().eval()
    ref.nn.load_state_dict(mlp.state_dict())  # PyG's constructor re-initialises the MLP it is given
    ref.nn = torch.nn.Sequential(*[m for m in ref.nn if not isinstance(m, QuantPoint)])  # PyG has no such module
    names = {"mlp.0.weight": "nn.0.weight", "mlp.4.weight": "nn.3.weight", "mlp.0.bias": "nn.0.bias"}
    if train_eps:
        names["eps"] = "eps"
    assert_same(grads_of(ours, x, ei), grads_of(ref, x, ei), names)


@pytest.mark.parametrize("concat", [True, False])
def test_gat_matches_pyg(concat):
    x, ei = random_graph(seed=3)
    ours = GATConv(12, 4, heads=3, concat=concat).double().eval()
    ref = pygnn.GATConv(12, 4, heads=3, concat=concat).double().eval()
    with torch.no_grad():
        ours.bias.normal_()
        ref.lin.weight.copy_(ours.lin.weight)
        ref.att_src.copy_(ours.att_src)
        ref.att_dst.copy_(ours.att_dst)
        ref.bias.copy_(ours.bias)
    assert_same(grads_of(ours, x, ei), grads_of(ref, x, ei),
                {"lin.weight": "lin.weight", "att_src": "att_src", "att_dst": "att_dst", "bias": "bias"})


def test_quant_points_are_named_and_identity():
    x, ei = random_graph()
    for conv in (GCNConv(12, 4), SAGEConv(12, 4), GINConv(12, 4), GATConv(12, 4, heads=2)):
        points = {n: m for n, m in conv.named_modules() if type(m).__name__ == "QuantPoint"}
        assert any(n.endswith("q_input") for n in points)
        assert any(n.endswith("q_weight") for n in points)
        assert any(n.endswith("q_aggregate") for n in points)
        before = conv.eval()(x.float(), ei)
        for p in points.values():
            assert p(before) is before  # identity in full precision


class _NotIdentity(QuantPoint):
    """Stands in for a quantizer swapped into a quantization point."""


@pytest.mark.parametrize("make", [lambda: SAGEConv(12, 5), lambda: GINConv(12, 5, mlp=gin_mlp(12, 5, 4))])
def test_sparse_input_equals_dense_and_quantized_aggregate_keeps_order(make):
    """Projecting first takes sparse COO features without densifying them and gives the dense result and
    gradients; a quantizer on the aggregate switches back to aggregate-then-project."""
    x, ei = random_graph(seed=4)
    x = torch.where(x > 1.0, x, torch.zeros_like(x))  # mostly zeros, like bag-of-words features
    layer = make().double().eval()
    assert layer.accepts_sparse_input()
    dense_out = layer(x, ei)
    (dense_out ** 2).sum().backward()
    dense_grads = {n: p.grad.clone() for n, p in layer.named_parameters() if p.grad is not None}
    layer.zero_grad()
    sparse_out = layer(x.to_sparse(), ei)
    (sparse_out ** 2).sum().backward()
    torch.testing.assert_close(sparse_out, dense_out, atol=ATOL, rtol=0)
    for n, g in dense_grads.items():
        torch.testing.assert_close(layer.get_parameter(n).grad, g, atol=ATOL, rtol=0)
    layer.q_aggregate = _NotIdentity("aggregate", "node")
    assert not layer.projects_first() and not layer.accepts_sparse_input()
    torch.testing.assert_close(layer(x, ei), dense_out, atol=ATOL, rtol=0)  # identity stand-in: same maths
