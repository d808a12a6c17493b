"""Structural encodings vs closed forms on tiny literal graphs."""

import numpy as np
import torch

from graphtransformer.positional import degree_index, laplacian_pe, random_walk_pe


def _cycle(n):
    s = torch.arange(n)
    d = (s + 1) % n
    return torch.cat([torch.stack([s, d]), torch.stack([d, s])], dim=1)


def test_degree_index_ignores_self_loops_and_clips():
    ei = torch.tensor([[0, 1, 2, 3, 0, 0], [1, 1, 1, 1, 2, 0]])  # node 1 has 3 in-edges + a loop
    assert degree_index(ei, 4, max_degree=2).tolist() == [0, 2, 1, 0]


def test_laplacian_pe_are_eigenvectors():
    ei = _cycle(8)
    pe = laplacian_pe(ei, 8, k=3).numpy()
    a = np.zeros((8, 8))
    a[ei[1], ei[0]] = 1
    lap = np.eye(8) - a / 2  # cycle: every degree is 2
    for j in range(3):
        v = pe[:, j]
        lam = v @ lap @ v
        assert np.allclose(lap @ v, lam * v, atol=1e-10) and abs(np.linalg.norm(v) - 1) < 1e-10
        assert lam > 1e-8  # the trivial eigenvector is skipped
        assert v[np.abs(v).argmax()] > 0  # sign convention


def test_random_walk_pe_on_cycle_closed_form():
    # On an even cycle the walk returns after t steps with probability C(t, t/2) / 2^t (0 for odd t, t < n).
    pe = random_walk_pe(_cycle(10), 10, k=4)
    expected = torch.tensor([0.0, 0.5, 0.0, 6 / 16], dtype=torch.float64)
    assert torch.allclose(pe, expected.expand(10, 4), atol=1e-12)
