"""The sparse-matrix aggregation path equals message passing: forward and gradients, float64."""

import pytest
import torch

import gnn.conv.aggregation as aggregation
from gnn.conv.gcn import GCNConv
from gnn.conv.gin import GINConv
from gnn.conv.sage import SAGEConv
from gnn.ops import csr_adjacency

N = 40  # conftest.NUM_NODES


@pytest.mark.parametrize("make", [lambda: GCNConv(6, 4), lambda: GCNConv(6, 8), lambda: SAGEConv(6, 4),
                                  lambda: SAGEConv(6, 8), lambda: GINConv(6, 4), lambda: GINConv(6, 8)],
                         ids=["gcn", "gcn-wide", "sage-project-first", "sage", "gin-project-first", "gin"])
def test_sparse_matrix_path_equals_message_passing(make, edges_with_duplicates, forward_backward):
    torch.manual_seed(0)
    conv = make().double()
    x = torch.randn(N, 6, dtype=torch.float64)
    ei = edges_with_duplicates()
    ref_out, ref_grads = forward_backward(conv, x, ei, 10**12)  # message passing
    out, grads = forward_backward(conv, x, ei, 0)  # CSR product
    assert conv._csr._key is not None  # the CSR path really ran
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


def test_csr_cache_rebuilds_for_a_new_graph(monkeypatch, edges_with_duplicates):
    monkeypatch.setattr(aggregation, "SPMM_MIN_EDGES", 0)
    monkeypatch.setattr(aggregation, "SPMM_MIN_MESSAGE_ELEMENTS", 0)
    conv = SAGEConv(6, 8).double()
    x = torch.randn(N, 6, dtype=torch.float64)
    a, b = edges_with_duplicates(0), edges_with_duplicates(1)
    conv(x, a)
    out_b = conv(x, b)
    monkeypatch.setattr(aggregation, "SPMM_MIN_EDGES", 10**12)
    monkeypatch.setattr(aggregation, "SPMM_MIN_MESSAGE_ELEMENTS", 10**12)
    torch.testing.assert_close(out_b, conv(x, b), rtol=0, atol=1e-12)


def test_csr_adjacency_mean_rows_and_bad_reduce():
    ei = torch.tensor([[0, 1, 2, 2], [1, 1, 1, 0]])  # node 1 has 3 in-edges, node 0 one, node 2 none
    a, a_t = csr_adjacency(ei, 3, reduce="mean", dtype=torch.float64)
    dense = a.to_dense()
    assert torch.equal(dense, torch.tensor([[0, 0, 1], [1 / 3, 1 / 3, 1 / 3], [0, 0, 0]], dtype=torch.float64))
    assert torch.equal(a_t.to_dense(), dense.T)
    with pytest.raises(ValueError, match="reduce must be"):
        csr_adjacency(ei, 3, reduce="max")


def test_sparse_input_matmul_equals_dense_product_and_gradient():
    from gnn.ops import sparse_input_matmul

    g = torch.Generator().manual_seed(0)
    dense = torch.randn(30, 50, generator=g, dtype=torch.float64) * (torch.rand(30, 50, generator=g) < 0.1)
    w = torch.randn(7, 50, generator=g, dtype=torch.float64, requires_grad=True)
    out = sparse_input_matmul(dense.to_sparse(), w)
    grad = torch.randn(30, 7, generator=g, dtype=torch.float64)
    out.backward(grad)
    w_ref = w.detach().clone().requires_grad_(True)
    ref = dense @ w_ref.t()
    ref.backward(grad)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=0, atol=1e-12)
    x = dense.to_sparse().requires_grad_(True)  # stored values that need a gradient get it at their entries only
    sparse_input_matmul(x, w.detach()).backward(grad)
    stored = dense != 0
    torch.testing.assert_close(x.grad.to_dense(), (grad @ w.detach()) * stored, rtol=0, atol=1e-12)


@pytest.mark.parametrize("contained", [True, False], ids=["b-within-a", "union"])
def test_sparse_add_scaled_equals_dense_with_gradient(contained):
    from gnn.ops import sparse_add_scaled

    g = torch.Generator().manual_seed(1)
    b = torch.rand(20, 30, generator=g, dtype=torch.float64) * (torch.rand(20, 30, generator=g) < 0.2)
    a = torch.rand(20, 30, generator=g, dtype=torch.float64) * (torch.rand(20, 30, generator=g) < 0.3)
    if contained:
        a = a + b  # every entry of b is an entry of a, as in (A + I) @ X
    c = torch.tensor([0.7], dtype=torch.float64, requires_grad=True)
    out = sparse_add_scaled(a.to_sparse(), b.to_sparse(), c)
    assert out.is_sparse and out.is_coalesced()
    torch.testing.assert_close(out.to_dense(), a + 0.7 * b, rtol=0, atol=1e-12)
    weights = torch.rand(20, 30, generator=g, dtype=torch.float64)
    (grad_c,) = torch.autograd.grad(out.coalesce().values() @ weights[tuple(out.indices())], c)
    torch.testing.assert_close(grad_c, (weights * b).sum().view(1), rtol=0, atol=1e-12)
