"""Fixtures of the aggregation tests: a small graph with duplicate edges and isolated nodes, and a runner that
takes one forward and backward pass with the sparse-product path switched on or off."""

import pytest
import torch

import gnn.conv.aggregation as aggregation

NUM_NODES = 40


@pytest.fixture
def edges_with_duplicates():
    """(seed) -> edge_index (2, 170) over NUM_NODES nodes: the last 3 nodes have no edges, 10 edges repeat."""

    def make(seed: int = 0) -> torch.Tensor:
        g = torch.Generator().manual_seed(seed)
        ei = torch.randint(0, NUM_NODES - 3, (2, 160), generator=g)
        return torch.cat([ei, ei[:, :10]], dim=1)

    return make


@pytest.fixture
def forward_backward(monkeypatch):
    """(conv, x, edge_index, min_edges) -> (output, [grad x, grads of the parameters]); ``min_edges`` sets
    ``SPMM_MIN_EDGES`` and ``SPMM_MIN_MESSAGE_ELEMENTS`` (0: sparse products, huge: message passing)."""

    def run(conv, x, ei, min_edges):
        monkeypatch.setattr(aggregation, "SPMM_MIN_EDGES", min_edges)
        monkeypatch.setattr(aggregation, "SPMM_MIN_MESSAGE_ELEMENTS", min_edges)
        x = x.clone().requires_grad_(True)
        out = conv(x, ei)
        out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out))
        grads = [x.grad] + [p.grad.clone() for p in conv.parameters()]
        conv.zero_grad()
        return out.detach(), grads

    return run
