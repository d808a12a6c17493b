"""Independent float64 reference of topology attention for the kernel tests: a dense score matrix with the graph
mask, softmax row by row over the attended columns only (no code shared with the kernels)."""

import math

import torch


def topology_attention_reference(q, k, v, edge_index):
    """q (H, Nq, D), k and v (H, Nk, D), edge_index (2, E) src -> dst -> out (H, Nq, D), lse (H, Nq) (-inf: no keys)."""
    q, k, v = (t.detach().cpu().double() for t in (q, k, v))
    mask = torch.zeros(q.shape[1], k.shape[1], dtype=torch.bool)
    mask[edge_index[1].cpu(), edge_index[0].cpu()] = True
    out = torch.zeros_like(q)
    lse = torch.full(q.shape[:2], -math.inf, dtype=q.dtype)
    for i in range(q.shape[1]):
        cols = torch.nonzero(mask[i]).flatten()
        if cols.numel():
            s = (q[:, i:i + 1] @ k[:, cols].transpose(-1, -2))[:, 0] / math.sqrt(q.shape[-1])  # (H, c)
            out[:, i] = (torch.softmax(s, -1).unsqueeze(1) @ v[:, cols])[:, 0]
            lse[:, i] = torch.logsumexp(s, -1)
    return out, lse


def random_graph(n: int, p: float, seed: int, empty_rows=(), dense_block: int = 0):
    """Symmetric Erdos-Renyi edges (2, E) with self loops; ``empty_rows`` attend nothing; the first
    ``dense_block`` nodes form a near-clique (a tile that a block-sparse kernel keeps)."""
    g = torch.Generator().manual_seed(seed)
    a = torch.rand(n, n, generator=g) < p
    if dense_block:
        a[:dense_block, :dense_block] |= torch.rand(dense_block, dense_block, generator=g) < 0.7
    a = a | a.T | torch.eye(n, dtype=torch.bool)
    for i in empty_rows:
        a[i, :] = False
    dst, src = torch.nonzero(a, as_tuple=True)
    return torch.stack([src, dst])
