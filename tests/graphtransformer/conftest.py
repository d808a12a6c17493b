"""Shared fixtures of the graph transformer tests (and ``gt_reference`` on sys.path for the kernel tests)."""

import sys
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Data

from gnn.data.splits import Split

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))


def _bag_of_words(n=240, vocab=600, classes=4, words=8, seed=0):
    """Row-normalised binary word features (each node: 6 words of its class topic + 2 random), an Erdos-Renyi
    graph independent of the labels, 40 train / 60 val / rest test nodes."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % classes
    topic = torch.randint(0, vocab, (classes, 12), generator=g)  # 12 topic words per class
    pick = topic[y[:, None], torch.randint(0, 12, (n, words - 2), generator=g)]  # (N, 6)
    cols = torch.cat([pick, torch.randint(0, vocab, (n, 2), generator=g)], dim=1)
    x = torch.zeros(n, vocab).scatter_(1, cols, 1.0)
    x = x / x.sum(1, keepdim=True)
    a = torch.rand(n, n, generator=g) < 4.0 / n
    dst, src = torch.nonzero(torch.triu(a, 1) | torch.triu(a, 1).T, as_tuple=True)
    perm = torch.randperm(n, generator=g)
    split = Split(perm[:40], perm[40:100], perm[100:])
    return Data(x=x, edge_index=torch.stack([src, dst]), y=y, num_nodes=n), split, vocab, classes


@pytest.fixture
def bag_of_words_task():
    """``bag_of_words_task(n=240, vocab=600, classes=4, words=8, seed=0) -> (data, split, vocab, classes)``."""
    return _bag_of_words
