"""The memory-efficient edge-list kernel against the float64 reference and the plain autograd kernel."""

import pytest
import torch
from gt_reference import random_graph, topology_attention_reference

from graphtransformer.attention import sparse_attention
from graphtransformer.edge_attention import fused_sparse_attention


def _qkv(h, n, d, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(h, n, d, generator=g, dtype=dtype, requires_grad=True) for _ in range(3)]


def _loss_grads(fn, q, k, v):
    """Loss through out and the finite lse (as the ring merge uses both) -> (out, lse, (dq, dk, dv))."""
    out, lse = fn(q, k, v)
    g = torch.Generator().manual_seed(7)
    w_out, w_lse = torch.randn(out.shape, generator=g, dtype=out.dtype), torch.randn(lse.shape, generator=g,
                                                                                        dtype=out.dtype)
    loss = (out * w_out).sum() + (torch.where(torch.isfinite(lse), lse, 0) * w_lse).sum()
    return out.detach(), lse.detach(), torch.autograd.grad(loss, (q, k, v))


@pytest.mark.parametrize("chunk", [1, 13, None])
def test_fused_equals_reference_and_autograd_kernel(chunk):
    n = 45
    ei = random_graph(n, 0.12, seed=0, empty_rows=(4, 30))
    q, k, v = _qkv(3, n, 5, seed=1)
    ref_out, ref_lse = topology_attention_reference(q, k, v, ei)
    out, lse, grads = _loss_grads(lambda a, b, c: fused_sparse_attention(a, b, c, ei, chunk_edges=chunk), q, k, v)
    assert torch.allclose(out, ref_out, atol=1e-12)
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse)) and bool(torch.isinf(lse[:, [4, 30]]).all())
    finite = torch.isfinite(ref_lse)
    assert torch.allclose(lse[finite], ref_lse[finite], atol=1e-12)
    assert torch.equal(out[:, [4, 30]], torch.zeros_like(out[:, [4, 30]]))
    _, _, plain = _loss_grads(lambda a, b, c: sparse_attention(a, b, c, ei), q, k, v)
    for g_fused, g_plain in zip(grads, plain, strict=True):
        assert torch.allclose(g_fused, g_plain, atol=1e-12)
        assert torch.isfinite(g_fused).all()


def test_fused_gradcheck_rectangular():
    """Finite differences through out and lse, queries and keys of different counts (a ring step's shape)."""
    g = torch.Generator().manual_seed(3)
    nq, nk = 9, 14
    ei = torch.stack([torch.randint(0, nk, (40,), generator=g), torch.randint(0, nq - 1, (40,), generator=g)])
    q = torch.randn(2, nq, 3, generator=g, dtype=torch.float64, requires_grad=True)
    k, v = (torch.randn(2, nk, 3, generator=g, dtype=torch.float64, requires_grad=True) for _ in range(2))

    def f(a, b, c):
        out, lse = fused_sparse_attention(a, b, c, ei, chunk_edges=7)
        return out, torch.where(torch.isfinite(lse), lse, 0)

    assert torch.autograd.gradcheck(f, (q, k, v))


def test_fused_keeps_no_per_edge_tensor_for_backward():
    """What the autograd graph holds after the forward: (H, N, D)-sized tensors and the edge list, no (H, E, D)."""
    n, h, d = 200, 2, 4
    ei = random_graph(n, 0.2, seed=4)
    q, k, v = _qkv(h, n, d, seed=5, dtype=torch.float32)
    per_edge = h * ei.shape[1] * d
    out, _ = fused_sparse_attention(q, k, v, ei)
    saved = out.grad_fn.saved_tensors
    assert max(t.numel() for t in saved) < per_edge / 4
    out_plain, _ = sparse_attention(q, k, v, ei)  # the plain kernel does keep per-edge gathers (the contrast)
    held = []
    stack = [out_plain.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None:
            continue
        held += [getattr(fn, a) for a in dir(fn) if a.startswith("_saved_") and isinstance(getattr(fn, a),
                                                                                          torch.Tensor)]
        stack += [f for f, _ in fn.next_functions]
    assert max(t.numel() for t in held) >= per_edge


def test_fused_rejects_bad_shapes():
    q, k, v = _qkv(2, 5, 3, seed=0)
    with pytest.raises(ValueError, match="edge_index must be"):
        fused_sparse_attention(q, k, v, torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="need q"):
        fused_sparse_attention(q, k[:1], v, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="chunk_edges"):
        fused_sparse_attention(q, k, v, torch.zeros(2, 4, dtype=torch.long), chunk_edges=0)
