"""Structural encodings of nodes for graph transformers (pure functions of the topology).

* :func:`degree_index`: clipped in-degree, used as an embedding index (Graphormer's centrality encoding).
* :func:`laplacian_pe`: the ``k`` eigenvectors of the symmetric normalised Laplacian with the smallest non-trivial
  eigenvalues (Dwivedi & Bresson 2020), signs fixed so that the largest-magnitude entry is positive
  (deterministic; random sign flipping is a training-time augmentation, :func:`random_sign_flip`).
* :func:`random_walk_pe`: ``[P_ii, (P^2)_ii, ..., (P^k)_ii]`` with ``P = D^-1 A`` (Dwivedi et al. 2022, RWSE).

All take edge_index (2, E) (symmetric, self loops ignored) and return float tensors with one row per node.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
import torch
from torch import Tensor


def _adjacency(edge_index: Tensor, num_nodes: int) -> sp.csr_matrix:
    """Binary symmetric adjacency without self loops, (N, N) CSR."""
    src, dst = edge_index.cpu().numpy()
    keep = src != dst
    a = sp.coo_matrix((np.ones(int(keep.sum())), (dst[keep], src[keep])), shape=(num_nodes, num_nodes)).tocsr()
    a = ((a + a.T) > 0).astype(np.float64)
    return a


def degree_index(edge_index: Tensor, num_nodes: int, max_degree: int) -> Tensor:
    """In-degree without self loops, clipped to ``max_degree``. (N,) int64 in [0, max_degree]."""
    src, dst = edge_index
    deg = torch.bincount(dst[src != dst], minlength=num_nodes)
    return deg.clamp_max(max_degree)


def laplacian_pe(edge_index: Tensor, num_nodes: int, k: int) -> Tensor:
    """(N, k) float64 eigenvectors of L = I - D^-1/2 A D^-1/2, skipping the first (trivial) one.

    Uses a dense solver up to 2,000 nodes, ARPACK (shift-invert near 0) above. Columns beyond N - 1 are zero.
    """
    if k < 1:
        raise ValueError(f"laplacian_pe: k={k}; use k >= 1")
    a = _adjacency(edge_index, num_nodes)
    deg = np.asarray(a.sum(axis=1)).ravel()
    d_inv_sqrt = np.where(deg > 0, 1.0 / np.sqrt(np.maximum(deg, 1e-12)), 0.0)
    lap = sp.eye(num_nodes) - sp.diags(d_inv_sqrt) @ a @ sp.diags(d_inv_sqrt)
    num = min(k + 1, num_nodes)
    if num_nodes <= 2000:
        vals, vecs = np.linalg.eigh(lap.toarray())
        vecs = vecs[:, :num]
    else:
        vals, vecs = spla.eigsh(lap.tocsc(), k=num, sigma=-1e-3, which="LM", tol=1e-6,
                                v0=np.ones(num_nodes) / np.sqrt(num_nodes))
        vecs = vecs[:, np.argsort(vals)]
    vecs = vecs[:, 1:]
    idx = np.abs(vecs).argmax(axis=0)
    vecs = vecs * np.sign(vecs[idx, np.arange(vecs.shape[1])] + 1e-300)  # largest-magnitude entry positive
    pe = np.zeros((num_nodes, k))
    pe[:, : vecs.shape[1]] = vecs
    return torch.from_numpy(pe)


def random_walk_pe(edge_index: Tensor, num_nodes: int, k: int) -> Tensor:
    """(N, k) float64 return probabilities of 1..k-step random walks (isolated nodes: 0).

    Cost: k sparse-dense products with an (N, N) dense iterate, so use it for graphs up to ~10K nodes.
    """
    if k < 1:
        raise ValueError(f"random_walk_pe: k={k}; use k >= 1")
    a = _adjacency(edge_index, num_nodes)
    deg = np.asarray(a.sum(axis=1)).ravel()
    p = sp.diags(np.where(deg > 0, 1.0 / np.maximum(deg, 1), 0.0)) @ a  # (N, N) row-stochastic
    out = np.zeros((num_nodes, k))
    cur = np.eye(num_nodes)
    for i in range(k):
        cur = np.asarray(p @ cur)  # P^(i+1)
        out[:, i] = np.diag(cur)
    return torch.from_numpy(out)


def random_sign_flip(pe: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Flip the sign of each eigenvector column at random (training augmentation for Laplacian PE). (N, k)."""
    signs = torch.randint(0, 2, (pe.shape[1],), generator=generator).to(pe.device, pe.dtype) * 2 - 1
    return pe * signs
