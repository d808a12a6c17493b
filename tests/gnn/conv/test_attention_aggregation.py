"""GAT's sparse-product attention aggregation equals message passing: forward and gradients, float64."""

import pytest
import torch

from gnn.conv.attention_aggregation import AttentionAggregation, _block_csr_layout
from gnn.conv.gat import GATConv

N = 40  # conftest.NUM_NODES


@pytest.mark.parametrize("concat", [True, False], ids=["concat-heads", "mean-heads"])
def test_gat_sparse_product_equals_message_passing(concat, edges_with_duplicates, forward_backward):
    torch.manual_seed(0)
    conv = GATConv(6, 5, heads=3, concat=concat).double()
    x = torch.randn(N, 6, dtype=torch.float64)
    ei = edges_with_duplicates()
    ref_out, ref_grads = forward_backward(conv, x, ei, 10**12)  # message passing
    out, grads = forward_backward(conv, x, ei, 0)  # one sparse product per direction
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
