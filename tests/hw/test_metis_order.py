"""METIS node order for the accelerator's consecutive-ID subgraphs: a relabelling that keeps the graph and
cuts cross-subgraph edges."""

import numpy as np
import pytest

from hw.workload import metis_order, reorder_graph, workload_from_graph


def _shuffled_communities(num_blocks: int = 8, block: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    n = num_blocks * block
    src = rng.integers(0, n, 6000)
    dst = (src // block) * block + rng.integers(0, block, src.size)  # edges stay inside a community
    ei = np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])])
    perm = rng.permutation(n)  # hide the communities behind random IDs
    return ei, perm, n


def test_reorder_is_a_relabelling():
    ei, perm, n = _shuffled_communities()
    x = np.arange(n, dtype=np.float64)[:, None]
    order = metis_order(perm[ei], n, part_nodes=64)
    assert sorted(order.tolist()) == list(range(n))
    x2, ei2 = reorder_graph(x, perm[ei], order)
    assert np.array_equal(x2[:, 0], order)  # new node i carries old node order[i]'s features
    assert np.array_equal(order[ei2], perm[ei])  # the same edges, renamed


def test_metis_order_cuts_cross_tile_edges():
    ei, perm, n = _shuffled_communities()
    shuffled = perm[ei]
    cross = lambda e: float(np.mean(e[0] // 64 != e[1] // 64))  # noqa: E731
    _, reordered = reorder_graph(np.zeros((n, 1)), shuffled, metis_order(shuffled, n, part_nodes=64))
    assert cross(shuffled) > 0.8  # random IDs: almost every edge crosses 64-node tiles
    assert cross(reordered) < 0.1


def test_unknown_order_is_rejected():
    with pytest.raises(ValueError, match="valid: natural, metis"):
        workload_from_graph("cora", order="rcm")
