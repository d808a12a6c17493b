"""Synthetic generators: determinism, structure, class signal, and scale."""

import time

import pytest
import torch

from gnn.data.synthetic import powerlaw_graph, sbm_graph


def test_sbm_is_deterministic_and_homophilous():
    a = sbm_graph(2000, num_classes=4, avg_degree=8, seed=1)
    b = sbm_graph(2000, num_classes=4, avg_degree=8, seed=1)
    c = sbm_graph(2000, num_classes=4, avg_degree=8, seed=2)
    assert torch.equal(a.data.edge_index, b.data.edge_index) and torch.equal(a.data.x, b.data.x)
    assert not torch.equal(a.data.edge_index, c.data.edge_index)
    src, dst = a.data.edge_index
    assert (src != dst).all()
    assert torch.equal(a.data.edge_index, torch.stack([dst, src])[:, torch.argsort(dst * 2000 + src)])  # symmetric
    same = (a.data.y[src] == a.data.y[dst]).float().mean()
    assert same > 0.75  # 0.8 inside + 0.2 * 1/4 by chance, minus deduplication
    assert 6.0 < a.data.edge_index.size(1) / 2000 < 8.5


def test_powerlaw_has_heavy_tail():
    g = powerlaw_graph(12, edge_factor=8, seed=0)
    deg = torch.bincount(g.data.edge_index[1], minlength=4096).float()
    assert deg.max() > 20 * deg.mean()
    assert g.data.x.shape == (4096, 32) and g.num_classes == 8


@pytest.mark.slow
def test_powerlaw_reaches_10m_edges():
    t = time.perf_counter()
    g = powerlaw_graph(20, edge_factor=8, seed=0)
    assert g.data.edge_index.size(1) >= 10_000_000
    assert time.perf_counter() - t < 300
