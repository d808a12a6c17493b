"""The planned sparse product ``A @ X`` (fixed entries, changing values) equals the dense product, float64; the
aggregation plans only a pattern that repeats and never reuses a plan for other entries."""

import pytest
import torch

from gnn.conv.aggregation import CsrAggregation
from gnn.conv.sparse_product import build_sparse_product_plan
from gnn.models import dropout

N, F = 40, 25


def _sparse_features(seed: int, density: float = 0.15) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    dense = torch.rand(N, F, generator=g, dtype=torch.float64) * (torch.rand(N, F, generator=g) < density)
    dense[5] = 0  # an empty row
    return dense.to_sparse().coalesce()


def _adjacency(edge_index: torch.Tensor) -> torch.Tensor:
    g = torch.Generator().manual_seed(7)
    w = torch.rand(edge_index.size(1), generator=g, dtype=torch.float64)
    return torch.sparse_coo_tensor(edge_index.flip(0), w, (N, N)).coalesce()  # row i: in-edges j -> i


def test_plan_product_equals_dense_product(edges_with_duplicates):
    a = _adjacency(edges_with_duplicates())
    x = _sparse_features(0)
    plan = build_sparse_product_plan(a, x)
    out = plan.product(x)
    ref = torch.sparse.mm(a, x).coalesce()
    assert out.is_coalesced() and torch.equal(out.indices(), ref.indices())
    torch.testing.assert_close(out.to_dense(), a.to_dense() @ x.to_dense(), rtol=0, atol=1e-12)
    y = torch.sparse_coo_tensor(x.indices(), torch.randn(x._nnz(), dtype=torch.float64), x.shape,
                                is_coalesced=True)  # same entries, new values (as after dropout)
    assert plan.matches(y)
    torch.testing.assert_close(plan.product(y).to_dense(), a.to_dense() @ y.to_dense(), rtol=0, atol=1e-12)


def test_plan_self_scale_value_and_gradient(edges_with_duplicates):
    a = _adjacency(edges_with_duplicates())
    a = (a + torch.sparse_coo_tensor(torch.arange(N).repeat(2, 1), torch.ones(N, dtype=torch.float64),
                                     (N, N))).coalesce()  # A + I: every entry of X is an entry of the product
    x = _sparse_features(1)
    plan = build_sparse_product_plan(a, x)
    assert plan.x_positions is not None
    c = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    out = plan.product(x, c)
    dense_x = x.to_dense()
    torch.testing.assert_close(out.to_dense(), a.to_dense() @ dense_x + 0.3 * dense_x, rtol=0, atol=1e-12)
    weights = torch.rand(N, F, dtype=torch.float64)
    (grad_c,) = torch.autograd.grad(out.values() @ weights[tuple(out.indices())], c)
    torch.testing.assert_close(grad_c, (weights * dense_x).sum().view(1), rtol=0, atol=1e-12)


def test_plan_refuses_self_scale_when_x_reaches_outside_the_product(edges_with_duplicates):
    a = _adjacency(edges_with_duplicates())  # nodes 37..39 have no in-edges: their rows of A @ X are empty
    x = _sparse_features(2, density=0.6)
    plan = build_sparse_product_plan(a, x)
    assert plan.x_positions is None
    with pytest.raises(ValueError, match="sparse_add_scaled"):
        plan.product(x, torch.tensor(0.5, dtype=torch.float64))


def test_plan_does_not_match_other_entries_or_dtypes(edges_with_duplicates):
    a = _adjacency(edges_with_duplicates())
    x = _sparse_features(3)
    plan = build_sparse_product_plan(a, x)
    copy = torch.sparse_coo_tensor(x.indices().clone(), x.values(), x.shape, is_coalesced=True)
    assert not plan.matches(copy)  # equal entries in other memory: not trusted without a comparison
    assert not plan.matches(_sparse_features(4))
    assert not plan.matches(x.float())


@pytest.mark.parametrize("self_loops", [False, True], ids=["mean", "sum-with-self"])
def test_aggregation_plans_a_repeated_pattern_only(self_loops, edges_with_duplicates):
    ei = edges_with_duplicates()
    agg = CsrAggregation("sum" if self_loops else "mean")
    x = _sparse_features(5)
    eps = torch.tensor([0.2], dtype=torch.float64, requires_grad=True) if self_loops else None
    dense_a = None
    outs = []
    for step in range(3):
        torch.manual_seed(step)
        xd = dropout(x, 0.5, training=True)  # new values, the input's entries
        outs.append((xd, agg.sparse(ei, xd, self_loops=self_loops, self_scale=eps)))
        assert bool(agg._plans) == (step >= 1)  # planned when the pattern comes back, not before
        if dense_a is None:
            dense_a = agg._coo[self_loops].to_dense()
    for xd, out in outs:
        ref = dense_a @ xd.to_dense() + (0.2 * xd.to_dense() if self_loops else 0)
        torch.testing.assert_close(out.to_dense(), ref, rtol=0, atol=1e-12)
    other = _sparse_features(6)  # a new pattern: the plan is not used for it
    ref = dense_a @ other.to_dense() + (0.2 * other.to_dense() if self_loops else 0)
    torch.testing.assert_close(agg.sparse(ei, other, self_loops=self_loops, self_scale=eps).to_dense(), ref,
                               rtol=0, atol=1e-12)


def test_a_product_over_the_pair_cap_stays_unplanned(monkeypatch, edges_with_duplicates):
    """Past MAX_PLAN_PAIRS the repeated pattern keeps the sparse-sparse product (same values) and is not re-counted."""
    from gnn.conv import sparse_product

    ei = edges_with_duplicates()
    x = _sparse_features(7)
    a = CsrAggregation("sum")
    a.sparse(ei, x)
    coo = a._coo[False]
    assert build_sparse_product_plan(coo, x.coalesce(), max_pairs=sparse_product.count_pairs(coo, x.coalesce())) \
        is not None
    monkeypatch.setattr(sparse_product, "MAX_PLAN_PAIRS", sparse_product.count_pairs(coo, x.coalesce()) - 1)
    agg = CsrAggregation("sum")
    calls = []
    real_count = sparse_product.count_pairs
    monkeypatch.setattr(sparse_product, "count_pairs", lambda *args: calls.append(1) or real_count(*args))
    for step in range(4):
        torch.manual_seed(step)
        xd = dropout(x, 0.5, training=True)
        out = agg.sparse(ei, xd)
        torch.testing.assert_close(out.to_dense(), coo.to_dense() @ xd.to_dense(), rtol=0, atol=1e-12)
    assert not agg._plans and agg._unplanned == {False}, agg._plans
    assert len(calls) == 1, calls


def test_values_matmul_on_a_planned_pattern_uses_its_column_order_and_matches_dense(edges_with_duplicates):
    """``X W^T`` with X from a plan (stored values needing a gradient, as a quantized aggregate): the weight gradient
    through the kept column-major order equals the dense float64 product's, and so does the values' gradient;
    the pattern is forgotten with its plan."""
    import gc

    from gnn.ops import _FIXED_PATTERNS, fixed_column_major, sparse_from_values, sparse_input_matmul, storage_address

    a = _adjacency(edges_with_duplicates())
    plan = build_sparse_product_plan(a, _sparse_features(2))
    values = torch.randn(plan.indices.size(1), dtype=torch.float64, requires_grad=True)
    x = sparse_from_values(plan.indices, values, plan.shape)
    column_major = fixed_column_major(x.detach())
    assert column_major is not None
    assert torch.equal(column_major.transpose(values.detach()).to_dense(), x.detach().to_dense().t())
    w = torch.randn(7, F, dtype=torch.float64, requires_grad=True)
    grad = torch.randn(N, 7, dtype=torch.float64)
    sparse_input_matmul(x, w).backward(grad)

    dense_values = values.detach().clone().requires_grad_(True)
    dense = torch.zeros(N, F, dtype=torch.float64).index_put((plan.indices[0], plan.indices[1]), dense_values)
    w_ref = w.detach().clone().requires_grad_(True)
    (dense @ w_ref.t()).backward(grad)
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=0, atol=1e-12)
    torch.testing.assert_close(values.grad, dense_values.grad, rtol=0, atol=1e-12)
    w.grad = None  # values that need no gradient (a Degree-Quant aggregate): the same kept order, the same dW
    sparse_input_matmul(x.detach(), w).backward(grad)
    torch.testing.assert_close(w.grad, w_ref.grad, rtol=0, atol=1e-12)

    other = _sparse_features(3)  # entries never planned: the weight gradient sorts X^T as before
    assert fixed_column_major(other) is None
    indices, key = plan.indices, storage_address(plan.indices)
    del plan, x, column_major
    gc.collect()
    assert fixed_column_major(torch.sparse_coo_tensor(indices, torch.zeros(indices.size(1)), (N, F),
                                                      is_coalesced=True)) is not None  # `indices` keeps it alive
    assert key in _FIXED_PATTERNS
    del indices
    gc.collect()
    assert key not in _FIXED_PATTERNS  # forgotten with the last reference to the plan's index tensor
