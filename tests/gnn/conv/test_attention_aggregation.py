"""GAT's sparse-product attention aggregation equals message passing: forward and gradients, float64."""

import pytest
import torch

import gnn.conv.aggregation as aggregation
from gnn.conv.attention_aggregation import AttentionAggregation, _block_csr_layout
from gnn.conv.gat import GATConv

N = 40


def _graph(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, N - 3, (2, 160), generator=g)  # nodes N-3.. have no edges but their self-loop
    return torch.cat([ei, ei[:, :10]], dim=1)  # 10 duplicate edges


def _run(conv, x, ei, min_edges, monkeypatch):
    monkeypatch.setattr(aggregation, "SPMM_MIN_EDGES", min_edges)
    x = x.clone().requires_grad_(True)
    out = conv(x, ei)
    out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out))
    grads = [x.grad] + [p.grad.clone() for p in conv.parameters()]
    conv.zero_grad()
    return out.detach(), grads


@pytest.mark.parametrize("concat", [True, False], ids=["concat-heads", "mean-heads"])
def test_gat_sparse_product_equals_message_passing(concat, monkeypatch):
    torch.manual_seed(0)
    conv = GATConv(6, 5, heads=3, concat=concat).double()
    x = torch.randn(N, 6, dtype=torch.float64)
    ei = _graph()
    ref_out, ref_grads = _run(conv, x, ei, 10**12, monkeypatch)  # message passing
    out, grads = _run(conv, x, ei, 0, monkeypatch)  # one sparse product per direction
    assert conv._attention_spmm._key is not None  # the sparse path really ran
    torch.testing.assert_close(out, ref_out, rtol=0, atol=1e-12)
    assert len(grads) == 5  # x, bias-free lin weight, att_src, att_dst, bias
    for g, r in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=0, atol=1e-12)


def test_attention_aggregation_against_dense_per_head_matrices():
    g = torch.Generator().manual_seed(1)
    ei = torch.cat([torch.randint(0, 12, (2, 50), generator=g), torch.tensor([[3, 3], [5, 5]])], dim=1)
    alpha = torch.rand(ei.size(1), 4, generator=g, dtype=torch.float64, requires_grad=True)
    xw = torch.randn(12, 4, 3, generator=g, dtype=torch.float64, requires_grad=True)
    out = AttentionAggregation()(ei, alpha, xw)
    dense = torch.zeros(4, 12, 12, dtype=torch.float64)  # (H, N_dst, N_src)
    dense = dense.index_put((torch.arange(4).repeat(ei.size(1)), ei[1].repeat_interleave(4),
                             ei[0].repeat_interleave(4)), alpha.reshape(-1), accumulate=True)
    ref = torch.einsum("hij,jhc->ihc", dense, xw).reshape(12, 12)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, x: AttentionAggregation()(ei, a, x), (alpha, xw))


def test_block_layout_places_every_edge_and_head_once():
    ei = torch.tensor([[0, 2, 1, 2, 0], [1, 1, 0, 1, 2]])  # edge 2->1 twice
    crow, col, value_index = _block_csr_layout(ei[1], ei[0], 3, 2)
    assert crow.tolist() == [0, 1, 2, 5, 8, 9, 10]  # rows (node, head): in-degrees 1, 3, 1 per head
    assert sorted(value_index.tolist()) == list(range(10))
    rows = torch.repeat_interleave(torch.arange(6), crow.diff())
    e, h = value_index // 2, value_index % 2
    assert torch.equal(rows, ei[1][e] * 2 + h) and torch.equal(col, ei[0][e] * 2 + h)
