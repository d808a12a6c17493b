"""Kernels vs an independent float64 reference: explicit NumPy-free masked softmax written out row by row."""

import math

import pytest
import torch

from graphtransformer.attention import dense_attention, edge_mask, merge_attention, sparse_attention
from graphtransformer.cluster import ClusterConfig, build_cluster_plan, cluster_blocked_attention

H, D = 2, 4


def _reference(q, k, v, mask):
    """Per-row masked softmax via torch.softmax on the selected columns only (no shared code with the kernels)."""
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], -math.inf, dtype=q.dtype)
    for i in range(q.shape[1]):
        cols = torch.nonzero(mask[i]).flatten()
        if cols.numel() == 0:
            continue
        s = q[:, i:i + 1] @ k[:, cols].transpose(-1, -2) / math.sqrt(q.shape[-1])  # (H, 1, c)
        out[:, i] = (torch.softmax(s, -1) @ v[:, cols])[:, 0]
        lse[:, i] = torch.logsumexp(s[:, 0], -1)
    return out, lse


def _graph(n, p, seed, loops=True, isolated=()):
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(n, n, generator=g) < p
    a = a | a.T
    if loops:
        a |= torch.eye(n, dtype=torch.bool)
    for i in isolated:  # nodes attending nothing: empty rows (lse = -inf)
        a[i, :] = False
    dst, src = torch.nonzero(a, as_tuple=True)
    return torch.stack([src, dst])


def _qkv(nq, nk, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(H, n, D, generator=g, dtype=torch.float64, requires_grad=True) for n in (nq, nk, nk)]


def _grads(fn, q, k, v):
    out, lse = fn(q, k, v)
    g = torch.Generator().manual_seed(99)
    w_out = torch.randn(out.shape, generator=g, dtype=out.dtype)
    w_lse = torch.randn(lse.shape, generator=g, dtype=out.dtype)
    finite = torch.isfinite(lse)
    loss = (out * w_out).sum() + (torch.where(finite, lse, 0) * w_lse).sum()
    return out.detach(), lse.detach(), torch.autograd.grad(loss, (q, k, v))


def _assert_same_attention(fn1, fn2, q, k, v):
    """Same outputs, the same empty (lse = -inf) rows, the same finite lse and finite, equal gradients."""
    o1, l1, g1 = _grads(fn1, q, k, v)
    o2, l2, g2 = _grads(fn2, q, k, v)
    assert (o1 - o2).abs().max() < 1e-10
    assert torch.equal(l1.isinf(), l2.isinf())
    assert (l1[l1.isfinite()] - l2[l2.isfinite()]).abs().max() < 1e-10
    for a, b in zip(g1, g2, strict=True):
        assert torch.isfinite(a).all() and (a - b).abs().max() < 1e-10


@pytest.mark.parametrize("n,p", [(7, 0.3), (40, 0.1)])
def test_dense_masked_matches_rowwise_reference(n, p):
    ei = _graph(n, p, 0, isolated=(3,))
    mask = edge_mask(ei, n, n)
    q, k, v = _qkv(n, n, 1)
    o1, l1, g1 = _grads(lambda a, b, c: dense_attention(a, b, c, mask), q, k, v)
    o2, l2, g2 = _grads(lambda a, b, c: _reference(a, b, c, mask), q, k, v)
    torch.testing.assert_close(o1, o2, atol=1e-12, rtol=0)
    assert torch.equal(torch.isinf(l1), torch.isinf(l2)) and torch.isinf(l1[:, 3]).all()
    torch.testing.assert_close(l1[torch.isfinite(l1)], l2[torch.isfinite(l2)], atol=1e-12, rtol=0)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=0)


@pytest.mark.parametrize("n,p,isolated", [(9, 0.3, ()), (60, 0.08, (5, 17))])
def test_sparse_equals_dense_with_mask(n, p, isolated):
    ei = _graph(n, p, 2, isolated=isolated)
    mask = edge_mask(ei, n, n)
    q, k, v = _qkv(n, n, 3)
    _assert_same_attention(lambda a, b, c: sparse_attention(a, b, c, ei),
                           lambda a, b, c: dense_attention(a, b, c, mask), q, k, v)


def test_sparse_rectangular_queries_and_keys():
    """Nq != Nk (the halo layout): keys are local rows plus fetched remote rows."""
    ei = torch.tensor([[0, 4, 2, 3, 4], [0, 0, 1, 2, 2]])  # src in [0, 5), dst in [0, 3)
    q, k, v = _qkv(3, 5, 4)
    mask = edge_mask(ei, 3, 5)
    o1, l1, g1 = _grads(lambda a, b, c: sparse_attention(a, b, c, ei), q, k, v)
    o2, l2, g2 = _grads(lambda a, b, c: _reference(a, b, c, mask), q, k, v)
    assert (o1 - o2).abs().max() < 1e-12 and (l1 - l2).abs().max() < 1e-12
    for a, b in zip(g1, g2, strict=True):
        assert (a - b).abs().max() < 1e-12


@pytest.mark.parametrize("threshold", [0.0, 0.05, 0.3, 1.0])
def test_cluster_blocked_equals_dense_with_mask(threshold):
    # Two planted communities + a few cross edges: METIS finds them, diagonal tiles are dense.
    n = 64
    g = torch.Generator().manual_seed(5)
    comm = torch.arange(n) % 2
    prob = torch.where(comm[:, None] == comm[None, :], 0.3, 0.02)
    a = torch.rand(n, n, generator=g) < prob
    a = a | a.T | torch.eye(n, dtype=torch.bool)
    a[11, :] = False  # an empty query row
    dst, src = torch.nonzero(a, as_tuple=True)
    ei = torch.stack([src, dst])
    plan = build_cluster_plan(ei, n, ClusterConfig(num_clusters=4, density_threshold=threshold))
    if threshold == 0.0:
        assert plan.sparse_edges.shape[1] == 0 and plan.dense_edge_fraction == 1.0
    if threshold == 1.0:
        assert plan.dense_edge_fraction == 0.0
    q, k, v = _qkv(n, n, 6)
    _assert_same_attention(lambda a_, b, c: cluster_blocked_attention(a_, b, c, plan),
                           lambda a_, b, c: dense_attention(a_, b, c, a), q, k, v)


def test_cluster_plan_keeps_every_edge_once():
    ei = _graph(50, 0.1, 7)
    plan = build_cluster_plan(ei, 50, ClusterConfig(num_clusters=4, density_threshold=0.1))
    n_tile = sum(int(t.mask.sum()) for t in plan.tiles)
    assert n_tile + plan.sparse_edges.shape[1] == ei.shape[1]
    assert sorted(plan.order.tolist()) == list(range(50))
    assert torch.equal(plan.order[plan.inverse], torch.arange(50))


def test_merge_of_disjoint_key_halves_equals_full():
    n = 12
    ei = _graph(n, 0.3, 8, isolated=(2,))
    mask = edge_mask(ei, n, n)
    q, k, v = _qkv(n, n, 9)
    half = torch.zeros(n, dtype=torch.bool)
    half[: n // 2] = True

    def merged(a, b, c):
        o1, l1 = dense_attention(a, b, c, mask & half)
        o2, l2 = dense_attention(a, b, c, mask & ~half)
        return merge_attention(o1, l1, o2, l2)

    o1, l1, g1 = _grads(merged, q, k, v)
    o2, l2, g2 = _grads(lambda a, b, c: dense_attention(a, b, c, mask), q, k, v)
    assert (o1 - o2).abs().max() < 1e-12
    for a, b in zip(g1, g2, strict=True):
        assert torch.isfinite(a).all() and (a - b).abs().max() < 1e-12


def test_flash_dense_equals_explicit_dense():
    from graphtransformer.attention import flash_dense_attention

    q, k, v = _qkv(33, 21, 10)
    o1, l1, g1 = _grads(lambda a, b, c: (flash_dense_attention(a, b, c)[0], torch.zeros(H, 33)), q, k, v)
    o2, l2, g2 = _grads(lambda a, b, c: (dense_attention(a, b, c)[0], torch.zeros(H, 33)), q, k, v)
    assert (o1 - o2).abs().max() < 1e-12
    assert (flash_dense_attention(q, k, v)[1] - dense_attention(q, k, v)[1]).abs().max() < 1e-12
    for a, b in zip(g1, g2, strict=True):
        assert (a - b).abs().max() < 1e-12


def test_sparse_attention_dropout_drops_normalised_weights():
    """Attention dropout = dropout on the softmax weights (GAT): same mask via the same RNG draw, lse undropped."""
    n, p = 15, 0.4
    ei = _graph(n, 0.3, 11)
    q, k, v = _qkv(n, n, 12)
    torch.manual_seed(5)
    out, lse = sparse_attention(q, k, v, ei, dropout_p=p)
    torch.manual_seed(5)
    keep = torch.nn.functional.dropout(torch.ones(H, ei.shape[1], dtype=q.dtype), p, training=True)  # (H, E)
    probs = torch.zeros(H, n, n, dtype=q.dtype)  # (H, query, key) dropped softmax weights
    s = (q[:, ei[1]] * k[:, ei[0]]).sum(-1) / math.sqrt(D)
    for h in range(H):
        for i in range(n):
            sel = ei[1] == i
            probs[h, i, ei[0, sel]] = torch.softmax(s[h, sel], 0) * keep[h, sel]
    assert (out - probs @ v).abs().max() < 1e-12
    assert (lse - sparse_attention(q, k, v, ei)[1]).abs().max() < 1e-12
    out.sum().backward()
    assert torch.isfinite(q.grad).all()
