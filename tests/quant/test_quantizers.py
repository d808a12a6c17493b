"""Pure quantizer math against NumPy references and hand-derived gradients."""

import math

import numpy as np
import pytest
import torch

from quant.qat.nns import degree_pool_slices, nns_range, nns_select
from quant.qat.quantizers import (
    a2q_fake_quant,
    a2q_quantize,
    affine_fake_quant,
    affine_qparams,
    dq_protect_probability,
    kth_smallest,
    kth_smallest_with_zeros,
    percentile_range,
    round_half_away,
)


def np_a2q(x, s, b):
    """Independent NumPy reference of A2Q's forward (float64)."""
    qmax = 2.0 ** (b - 1) - 1
    v = np.clip(x / s, -qmax, qmax)
    return np.sign(v) * np.floor(np.abs(v) + 0.5) * s


def test_round_half_away_ties():
    v = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51])
    assert round_half_away(v).tolist() == [-3, -2, -1, 1, 2, 3, 0, -1]
    # torch.round is half-to-even: the A2Q grid must differ from it on ties
    assert torch.round(torch.tensor(2.5)).item() == 2.0


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
def test_a2q_forward_matches_numpy(bits):
    g = torch.Generator().manual_seed(bits)
    x = torch.randn(50, 7, generator=g, dtype=torch.float64) * 3
    s = torch.rand(50, 1, generator=g, dtype=torch.float64) * 0.5 + 0.05
    b = torch.full((50, 1), float(bits), dtype=torch.float64)
    out = a2q_fake_quant(x, s, b)
    np.testing.assert_allclose(out.numpy(), np_a2q(x.numpy(), s.numpy(), bits), rtol=0, atol=1e-12)


def test_a2q_ties_clipping_and_zero_bits():
    s = torch.tensor([[0.5]], dtype=torch.float64)
    x = torch.tensor([[0.25, -0.25, 0.75, 10.0, -10.0, 0.0]], dtype=torch.float64)
    b = torch.tensor([[3.0]], dtype=torch.float64)  # qmax = 3
    codes, xq = a2q_quantize(x, s, b)
    assert codes.tolist() == [[1, -1, 2, 3, -3, 0]]  # ties away from zero, clipping at +-qmax (no -4 level)
    assert xq.tolist() == [[0.5, -0.5, 1.0, 1.5, -1.5, 0.0]]
    assert torch.all(a2q_fake_quant(x, s, torch.ones_like(b)) == 0)  # b = 1: qmax = 0, all zeros
    # continuous bits are rounded half away from zero: 2.5 -> 3
    assert torch.equal(a2q_fake_quant(x, s, torch.tensor([[2.5]], dtype=torch.float64)), xq)


def test_unsigned_convention_b_plus_one():
    """A non-negative tensor on a signed (b+1)-bit grid has exactly 2^b - 1 ... 2^b levels of an unsigned b-bit
    grid: codes 0..2^b - 1, so reporting b (without the sign bit) loses nothing."""
    b = 3
    x = torch.linspace(0, 10, 1001, dtype=torch.float64).view(-1, 1)
    codes, _ = a2q_quantize(x, torch.tensor([[0.5]], dtype=torch.float64), torch.tensor([[b + 1.0]]))
    assert codes.min() == 0 and codes.max() == 2**b - 1
    assert len(torch.unique(codes)) == 2**b


def _hand_grads(x, s, bits, g):
    qmax = 2.0 ** (bits - 1) - 1
    v = x / s
    inside = (np.abs(v) <= qmax).astype(float)
    r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    ds = (r - v) * inside + np.sign(x) * qmax * (1 - inside)
    db = (1 - inside) * np.sign(x) * (qmax + 1) * math.log(2) * s
    return g * inside, (g * ds).sum(1, keepdims=True), (g * db).sum(1, keepdims=True), ds, db


def test_a2q_global_gradients_match_hand_formulas():
    gen = torch.Generator().manual_seed(1)
    x = (torch.randn(20, 6, generator=gen, dtype=torch.float64) * 2)
    s = (torch.rand(20, 1, generator=gen, dtype=torch.float64) * 0.3 + 0.1).requires_grad_()
    b = torch.full((20, 1), 3.0, dtype=torch.float64, requires_grad=True)
    x.requires_grad_()
    g = torch.randn(20, 6, generator=gen, dtype=torch.float64)
    a2q_fake_quant(x, s, b, local=False).backward(g)
    gx, gs, gb, _, _ = _hand_grads(x.detach().numpy(), s.detach().numpy(), 3.0, g.numpy())
    np.testing.assert_allclose(x.grad.numpy(), gx, atol=1e-12)
    np.testing.assert_allclose(s.grad.numpy(), gs, atol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), gb, atol=1e-12)
    assert (gb != 0).any() and (gx == 0).any()  # some elements were clipped


def test_a2q_gradients_exact_at_the_range_edges():
    """Element by element (step and bits shaped like x, so nothing is summed), the three gradients equal the hand
    formulas exactly where the formulas switch: scaled values exactly at +-qmax (inside), one ulp beyond (clipped),
    ties, zeros, and b = 1 (qmax = 0: everything but zero is clipped)."""
    s = 0.25  # a power of two: x = s * v is exact
    v = np.array([3.0, -3.0, np.nextafter(3.0, 4.0), np.nextafter(-3.0, -4.0), 2.5, -0.5, 0.0, 7.0, -0.3, 0.3, 0.0])
    bits = np.array([3.0] * 8 + [1.0, 1.0, 1.0])  # qmax 3, then qmax 0
    x = torch.tensor(v * s, dtype=torch.float64).view(1, -1).requires_grad_()
    st = torch.full_like(x, s).requires_grad_()
    b = torch.tensor(bits, dtype=torch.float64).view(1, -1).requires_grad_()
    g = torch.tensor([1.5, -2.0, 0.75, -1.25, 3.0, -0.5, 2.0, -4.0, 1.0, -1.0, 0.5], dtype=torch.float64).view(1, -1)
    out = a2q_fake_quant(x, st, b)
    out.backward(g)
    with torch.no_grad():  # evaluation keeps nothing for backward; the values are the same
        assert torch.equal(a2q_fake_quant(x, st, b), out)
    qmax = 2.0 ** (bits - 1) - 1
    inside = np.abs(v) <= qmax
    r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    ds = np.where(inside, r - v, np.sign(v) * qmax)
    db = np.where(inside, 0.0, np.sign(v) * (qmax + 1) * math.log(2) * s)
    assert inside.tolist() == [True, True, False, False, True, True, True, False, False, False, True]
    np.testing.assert_array_equal(x.grad.numpy().ravel(), np.where(inside, g.numpy().ravel(), 0.0))
    np.testing.assert_array_equal(st.grad.numpy().ravel(), g.numpy().ravel() * ds)
    np.testing.assert_array_equal(b.grad.numpy().ravel(), g.numpy().ravel() * db)
    assert not np.signbit(x.grad.numpy()[~inside.reshape(1, -1)]).any()  # clipped inputs get +0, as `where` gives


def test_local_gradient_uses_quantization_error_not_task_gradient():
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(10, 8, generator=gen, dtype=torch.float64) * 2
    s0 = torch.rand(10, 1, generator=gen, dtype=torch.float64) * 0.3 + 0.1
    grads = []
    for scale in (1.0, -7.0):  # two different task gradients
        xx, s = x.clone().requires_grad_(), s0.clone().requires_grad_()
        b = torch.full((10, 1), 3.0, dtype=torch.float64, requires_grad=True)
        (a2q_fake_quant(xx, s, b, local=True) * scale).sum().backward()
        grads.append((s.grad.clone(), b.grad.clone(), xx.grad.clone()))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])  # local: no task g
    assert not torch.equal(grads[0][2], grads[1][2])  # the input still gets the task gradient
    xq = np_a2q(x.numpy(), s0.numpy(), 3.0)
    _, _, _, ds, db = _hand_grads(x.numpy(), s0.numpy(), 3.0, 1.0)
    e = np.sign(xq - x.numpy())
    np.testing.assert_allclose(grads[0][0].numpy(), (e * ds).mean(1, keepdims=True), atol=1e-12)
    np.testing.assert_allclose(grads[0][1].numpy(), (e * db).mean(1, keepdims=True), atol=1e-12)


def test_surrogate_finite_differences():
    """The estimators are exact derivatives of the surrogate x_hat(s, b): x + s (round(v0) - v0) inside the
    range (rounding offset frozen) and sign(x) s (2^(b-1) - 1) outside; check by central differences."""
    x = torch.tensor([[0.37, -0.81, 2.9, -4.2, 0.05]], dtype=torch.float64)
    s0, b0 = 0.3, 3.4  # b0 rounds to 3 -> qmax 3, range 0.9
    qmax = 2.0 ** (round(b0) - 1) - 1
    v0 = x / s0
    inside = v0.abs() <= qmax
    k = torch.sign(v0) * torch.floor(v0.abs() + 0.5) - v0

    def surrogate(s, b):  # differentiable in b through 2^(b-1) with b at the rounded value + (b - b0)
        bb = round(b0) + (b - b0)
        return torch.where(inside, x + s * k, torch.sign(x) * s * (2.0 ** (bb - 1) - 1))

    s = torch.tensor([[s0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([[b0]], dtype=torch.float64, requires_grad=True)
    g = torch.tensor([[1.0, -2.0, 0.5, 3.0, 1.5]], dtype=torch.float64)
    a2q_fake_quant(x, s, b).backward(g)
    h = 1e-6
    fd_s = ((surrogate(s0 + h, b0) - surrogate(s0 - h, b0)) * g).sum() / (2 * h)
    fd_b = ((surrogate(s0, b0 + h) - surrogate(s0, b0 - h)) * g).sum() / (2 * h)
    assert s.grad.item() == pytest.approx(fd_s.item(), rel=1e-6)
    assert b.grad.item() == pytest.approx(fd_b.item(), rel=1e-6)
    # and the surrogate agrees with the quantizer's forward value at the point
    np.testing.assert_allclose(surrogate(s0, b0).numpy(), np_a2q(x.numpy(), s0, 3.0), atol=1e-12)


def test_affine_dq_matches_numpy_and_clips_gradient():
    x = torch.tensor([-1.0, -0.3, 0.0, 0.2, 0.9, 2.0], requires_grad=True)
    scale, zp, qmin, qmax = affine_qparams(torch.tensor(-1.0), torch.tensor(1.0), 4)
    out = affine_fake_quant(x, scale, zp, qmin, qmax)
    sc, z = float(scale), float(zp)
    ref = (np.clip(np.round(x.detach().numpy() / sc + z), -8, 7) - z) * sc
    np.testing.assert_allclose(out.detach().numpy(), ref, atol=1e-6)
    out.sum().backward()
    codes = np.clip(np.round(x.detach().numpy() / sc + z), -8, 7)
    np.testing.assert_array_equal(x.grad.numpy(), ((codes > -8) & (codes < 7)).astype(np.float32))
    assert x.grad[0] == 0 and x.grad[-1] == 0  # range edges: no gradient


def test_percentile_range_matches_numpy():
    x = torch.randn(10001, generator=torch.Generator().manual_seed(3))
    lo, hi = percentile_range(x, 0.01)
    xs = np.sort(x.numpy())
    assert lo.item() == pytest.approx(xs[int(math.ceil(0.01 * x.numel())) - 1])
    assert hi.item() == pytest.approx(xs[int(math.floor(0.99 * x.numel()))])
    lo0, hi0 = percentile_range(x, 0.0)
    assert lo0 == x.min() and hi0 == x.max()


@pytest.mark.parametrize("zero_fraction", [0.0, 0.6, 0.95, 1.0])
def test_percentile_range_of_mostly_zero_tensors_matches_numpy(zero_fraction):
    """The zero-counting path (taken when over half the elements are 0) gives numpy's order statistics exactly."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(40, 53, generator=gen)
    x[torch.rand(x.shape, generator=gen) < zero_fraction] = 0.0
    xs = np.sort(x.numpy().reshape(-1))
    n = xs.size
    for pct in (0.001, 0.01, 0.2, 0.45):
        lo, hi = percentile_range(x, pct)
        assert lo.item() == xs[max(1, math.ceil(pct * n)) - 1]
        assert hi.item() == xs[min(n, math.floor((1 - pct) * n) + 1) - 1]
    for k in range(1, n + 1, 97):  # every region: negatives, zeros, positives
        nonzero = x.reshape(-1)[x.reshape(-1) != 0]
        assert kth_smallest_with_zeros(nonzero, n, k).item() == xs[k - 1]


@pytest.mark.parametrize("n", [1, 7, 3000])
def test_kth_smallest_matches_numpy_in_both_paths(n):
    """Tails go through topk (k or n - k + 1 <= n / 256), the middle through kthvalue; ties included."""
    gen = torch.Generator().manual_seed(n)
    x = torch.randint(-40, 40, (n,), generator=gen).to(torch.float32) / 8  # many ties
    xs = np.sort(x.numpy())
    tail = max(1, n // 256)
    for k in sorted({1, tail, tail + 1, n // 2 + 1, n - tail, n - tail + 1, n} & set(range(1, n + 1))):
        assert kth_smallest(x, k).item() == xs[k - 1], k
    with pytest.raises(ValueError, match="outside"):
        kth_smallest(x, n + 1)


def test_dq_protect_probability_is_cdf_formula():
    deg = torch.tensor([0, 1, 1, 3, 7, 1, 2, 2])
    batch = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1])
    p = dq_protect_probability(deg, 0.1, 0.3, batch)
    ref = []
    for i in range(8):
        same = deg[batch == batch[i]].numpy()
        ref.append(0.1 + 0.2 * (same <= deg[i].item()).mean())
    np.testing.assert_allclose(p.numpy(), ref, atol=1e-6)
    assert p.argmax() == 4  # highest in-degree in its graph gets p_high
    assert p[4].item() == pytest.approx(0.3)


@pytest.mark.parametrize("kind", ["code", "paper"])
def test_nns_select_matches_brute_force(kind):
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(40, 5, generator=gen) * torch.rand(40, 1, generator=gen) * 4
    step = torch.rand(30, generator=gen) * 0.2 + 0.01
    bits = torch.randint(2, 8, (30,), generator=gen).float()
    idx = nns_select(x, step, bits, kind)
    f = x.abs().amax(1).numpy()
    q = 2.0 ** (bits.numpy() - 1) * step.numpy()
    if kind == "paper":
        q = (2.0 ** (bits.numpy() - 1) - 1) * step.numpy()
    np.testing.assert_array_equal(idx.numpy(), np.abs(f[:, None] - q[None, :]).argmin(1))
    assert not torch.equal(nns_range(step, bits, "code"), nns_range(step, bits, "paper"))


@pytest.mark.parametrize("seed", range(6))
def test_nns_nearest_search_matches_argmin_with_duplicates_and_ties(seed):
    """The sorted-pool search equals NumPy's argmin (first minimum) over |f - q|, on a coarse grid where pool
    values repeat and many rows sit exactly midway between two values, below the smallest or above the largest."""
    gen = torch.Generator().manual_seed(seed)
    m, n = int(torch.randint(1, 40, (1,), generator=gen)), 200
    step = torch.randint(1, 12, (m,), generator=gen).float() * 0.25  # duplicates likely
    bits = torch.ones(m)  # code range 2^0 * step = step
    f = torch.randint(-2, 30, (n,), generator=gen).float() * 0.125  # |x| max; midpoints and exact hits
    x = torch.zeros(n, 3)
    x[:, 1] = f * torch.where(torch.rand(n, generator=gen) < 0.5, -1.0, 1.0)
    q = step.numpy()
    expected = np.abs(np.abs(x.numpy()).max(1)[:, None] - q[None, :]).argmin(1)
    np.testing.assert_array_equal(nns_select(x, step, bits, "code").numpy(), expected)
    deg = torch.randint(0, 8, (n,), generator=gen)
    pool = torch.rand(1000, generator=gen).mul(40).round().div(8) + 0.125  # 1000 entries, heavy duplication
    got = nns_select(x, pool, torch.ones(1000), "code", deg).numpy()
    fx = np.abs(x.numpy()).max(1)
    for (lo, hi), sel in zip(degree_pool_slices(1000), (deg >= 5, (deg >= 2) & (deg < 5), deg < 2), strict=True):
        sel = sel.numpy()
        ref = np.abs(fx[sel, None] - pool.numpy()[None, lo:hi]).argmin(1) + lo
        np.testing.assert_array_equal(got[sel], ref)


def test_nns_degree_mode_searches_its_slice():
    m = 1000
    assert degree_pool_slices(m) == ((0, 10), (10, 100), (100, 1000))
    x = torch.rand(300, 4)
    deg = torch.arange(300) % 7
    idx = nns_select(x, torch.rand(m) + 0.01, torch.full((m,), 4.0), "code", deg)
    assert (idx[deg >= 5] < 10).all()
    assert ((idx[(deg >= 2) & (deg < 5)] >= 10) & (idx[(deg >= 2) & (deg < 5)] < 100)).all()
    assert (idx[deg < 2] >= 100).all()


def test_nns_gradient_scatter_adds_onto_pool():
    """Gathering pool entries per node gives each pool entry the sum of its nodes' gradients."""
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(12, 3, generator=gen, dtype=torch.float64) * 2
    pool_s = (torch.rand(4, 1, generator=gen, dtype=torch.float64) * 0.3 + 0.1).requires_grad_()
    pool_b = torch.full((4, 1), 3.0, dtype=torch.float64, requires_grad=True)
    idx = torch.tensor([0, 1, 2, 3, 0, 0, 1, 2, 2, 2, 3, 1])
    g = torch.randn(12, 3, generator=gen, dtype=torch.float64)
    a2q_fake_quant(x, pool_s[idx], pool_b[idx]).backward(g)
    per_node_s = pool_s.detach()[idx].clone().requires_grad_()
    per_node_b = pool_b.detach()[idx].clone().requires_grad_()
    a2q_fake_quant(x, per_node_s, per_node_b).backward(g)
    ref_s = torch.zeros(4, 1, dtype=torch.float64).index_add_(0, idx, per_node_s.grad)
    ref_b = torch.zeros(4, 1, dtype=torch.float64).index_add_(0, idx, per_node_b.grad)
    torch.testing.assert_close(pool_s.grad, ref_s)
    torch.testing.assert_close(pool_b.grad, ref_b)
