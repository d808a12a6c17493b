"""FlexAttention block-sparse topology attention on CPU: plans, bitmasks and the forward pass against the float64
reference (PyTorch has no CPU backward for FlexAttention; gradients are tested in test_gpu.py on a GPU)."""

import pytest
import torch
from gt_reference import random_graph, topology_attention_reference

from graphtransformer.flex import FlexConfig, build_flex_plan, flex_graph_attention
from graphtransformer.model import GraphTransformer, GraphTransformerConfig, attention_graph


def _qkv(h, n, d, seed):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(h, n, d, generator=g, dtype=torch.float64) for _ in range(3)]


def _popcount(words: torch.Tensor) -> int:
    w = words.to(torch.int64) & 0xFFFFFFFF
    return sum(int(((w >> b) & 1).sum()) for b in range(32))


CONFIGS = [
    FlexConfig(block_size=32, min_tile_edges=1),  # every edge in a tile
    FlexConfig(block_size=32, min_tile_edges=20),  # dense tiles + edge-list remainder, merged by lse
    FlexConfig(block_size=64, min_tile_edges=10**9),  # no tile at all: edge list only
    FlexConfig(block_size=32, min_tile_edges=4, num_clusters=5),  # METIS order, results back in caller order
    FlexConfig(block_size=128),  # the default tile, one ragged block
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"b{c.block_size}_m{c.min_tile_edges}_c{c.num_clusters}")
def test_flex_forward_equals_reference(cfg):
    n = 150  # not a multiple of any block: the last block is padded
    ei = random_graph(n, 0.04, seed=2, empty_rows=(7, 149), dense_block=40)
    q, k, v = _qkv(2, n, 8, seed=3)
    plan = build_flex_plan(ei, n, cfg)
    out, lse = flex_graph_attention(q, k, v, plan)
    ref_out, ref_lse = topology_attention_reference(q, k, v, ei)
    assert torch.allclose(out, ref_out, atol=1e-12)
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
    finite = torch.isfinite(ref_lse)
    assert torch.allclose(lse[finite], ref_lse[finite], atol=1e-12)


def test_plan_splits_every_edge_once_and_bitmasks_hold_exactly_the_tile_edges():
    n = 150
    ei = random_graph(n, 0.04, seed=2, dense_block=40)
    num_edges = ei.shape[1]
    for m in (1, 20, 10**9):
        plan = build_flex_plan(ei, n, FlexConfig(block_size=32, min_tile_edges=m))
        assert _popcount(plan.bits) == plan.tile_edges
        assert plan.tile_edges + plan.rest_edges.shape[1] == num_edges
        assert plan.num_tiles == int((plan.slot_table >= 0).sum())
        assert int(plan.block_mask.kv_num_blocks.sum()) == plan.num_tiles
    assert build_flex_plan(ei, n, FlexConfig(block_size=32, min_tile_edges=1)).tile_edge_fraction == 1.0
    assert build_flex_plan(ei, n, FlexConfig(block_size=32, min_tile_edges=10**9)).tile_edge_fraction == 0.0


def test_bit_31_of_a_word_and_duplicate_edges():
    """Key column 31 sets the sign bit of its int32 word; a duplicated edge is counted once."""
    ei = torch.tensor([[31, 31, 0, 63, 32], [0, 0, 31, 63, 5]])  # src -> dst; (31 -> 0) twice
    n = 64
    q, k, v = _qkv(1, n, 4, seed=0)
    plan = build_flex_plan(ei, n, FlexConfig(block_size=32, min_tile_edges=1))
    assert plan.tile_edges == 4 and int(plan.bits.min()) < 0  # bit 31 stored as a negative int32
    out, lse = flex_graph_attention(q, k, v, plan)
    ref_out, ref_lse = topology_attention_reference(q, k, v, torch.unique(ei, dim=1))
    assert torch.allclose(out, ref_out, atol=1e-12)
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))


def test_flex_errors_are_clear():
    with pytest.raises(ValueError, match="multiple of 32"):
        FlexConfig(block_size=48)
    with pytest.raises(ValueError, match="min_tile_edges"):
        FlexConfig(min_tile_edges=0)
    with pytest.raises(ValueError, match="outside"):
        build_flex_plan(torch.tensor([[0, 5], [1, 2]]), 5)
    ei = random_graph(40, 0.1, seed=0)
    plan = build_flex_plan(ei, 40, FlexConfig(block_size=32))
    q, k, v = _qkv(1, 40, 4, seed=0)
    with pytest.raises(ValueError, match="built for 40 nodes"):
        flex_graph_attention(q[:, :39], k[:, :39], v[:, :39], plan)
    q.requires_grad_(True)
    with pytest.raises(RuntimeError, match="no CPU backward"):
        flex_graph_attention(q, k, v, plan)


def test_model_flex_layers_equal_sparse_layers_in_evaluation():
    """The 'flex' kind is the same attention as 'sparse': same model weights, same logits (CPU forward)."""
    n = 90
    ei = random_graph(n, 0.05, seed=5)
    graph = attention_graph(ei, n, max_degree=8, flex=FlexConfig(block_size=32, min_tile_edges=3, num_clusters=3))
    x = torch.randn(n, 6, dtype=torch.float64)
    logits = {}
    for kind in ("sparse", "flex"):
        cfg = GraphTransformerConfig(in_dim=6, out_dim=3, hidden_dim=16, num_heads=2, num_layers=2,
                                     schedule=(kind, "dense"), pe_dim=0, max_degree=8)
        torch.manual_seed(0)
        model = GraphTransformer(cfg).double().eval()
        with torch.no_grad():
            logits[kind] = model(x, graph)
    assert torch.allclose(logits["flex"], logits["sparse"], atol=1e-12)
