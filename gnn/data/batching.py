"""Mini-batches of a graph-classification dataset, built by index arithmetic on pre-concatenated tensors.

A batch is the disjoint union of its graphs, exactly as PyG's ``DataLoader`` collates it (node features
concatenated in batch order, edge indices shifted by the nodes before them, a ``batch`` vector of graph ids),
but without collating ``Data`` objects one by one: every graph's nodes and edges already sit in one tensor, and
a batch is a gather of whole rows.

Random draws are those of ``torch.utils.data.DataLoader`` (torch 2.x), so that graph-task results recorded with
it reproduce: every epoch (every ``iter``) draws the iterator's base seed, one int64 from the loader's generator
(the global generator when there is none); with ``shuffle`` the order is ``torch.randperm`` on the generator, and
the sampler draws a second, unused permutation after the last batch. ``tests/gnn/data/test_batching.py`` checks
batches and generator states against ``DataLoader``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class GraphBatch:
    """One mini-batch. x: (N, F); edge_index: (2, E) int64 into this batch's nodes; batch: (N,) graph id in
    [0, num_graphs); y: (num_graphs,) labels."""

    x: Tensor
    edge_index: Tensor
    batch: Tensor
    y: Tensor

    @property
    def num_graphs(self) -> int:
        return int(self.y.numel())

    def to(self, device: torch.device | str) -> GraphBatch:
        return GraphBatch(*(t.to(device) for t in (self.x, self.edge_index, self.batch, self.y)))


def _ranges(starts: Tensor, counts: Tensor) -> Tensor:
    """Concatenation of arange(s, s + c) for each (s, c). starts, counts: (B,) int64 -> (sum(counts),)."""
    ends = torch.cumsum(counts, 0)
    shift = torch.repeat_interleave(starts - (ends - counts), counts)
    return torch.arange(int(ends[-1]) if counts.numel() else 0, dtype=torch.long) + shift


class GraphBatcher:
    """Iterates over mini-batches of the graphs ``indices`` of ``graphs`` (a PyG dataset or list of ``Data``).

    Every graph needs ``x`` (n_i, F), ``edge_index`` (2, e_i) and a one-element ``y``; other attributes are not
    carried. Raises ValueError for an empty selection or a batch size below 1.
    """

    def __init__(self, graphs: Sequence, indices: Tensor | Sequence[int], batch_size: int, shuffle: bool = False,
                 generator: torch.Generator | None = None) -> None:
        if batch_size < 1:
            raise ValueError(f"GraphBatcher: batch_size={batch_size} must be >= 1")
        self.indices = torch.as_tensor(indices, dtype=torch.long).reshape(-1)  # (G_sel,) dataset graph ids
        if self.indices.numel() == 0:
            raise ValueError("GraphBatcher: no graphs selected")
        self.batch_size, self.shuffle, self.generator = batch_size, shuffle, generator
        data = [graphs[int(i)] for i in self.indices]
        nodes = torch.tensor([d.num_nodes for d in data], dtype=torch.long)  # (G_sel,)
        edges = torch.tensor([d.edge_index.size(1) for d in data], dtype=torch.long)  # (G_sel,)
        self._node_ptr = torch.cumsum(nodes, 0) - nodes  # (G_sel,) first row of each graph in self._x
        self._edge_ptr = torch.cumsum(edges, 0) - edges
        self._nodes, self._edges = nodes, edges
        self._x = torch.cat([d.x for d in data])  # (sum n_i, F)
        self._edge_index = torch.cat([d.edge_index for d in data], dim=1)  # (2, sum e_i), local node ids
        self._y = torch.cat([d.y.reshape(-1) for d in data])  # (G_sel,)

    def __len__(self) -> int:
        return -(-self.indices.numel() // self.batch_size)

    def batch_of(self, positions: Tensor) -> GraphBatch:
        """The batch of the selected graphs at ``positions`` (into ``indices``), in that order."""
        n, e = self._nodes[positions], self._edges[positions]  # (B,), (B,)
        node_rows = _ranges(self._node_ptr[positions], n)
        edge_cols = _ranges(self._edge_ptr[positions], e)
        offsets = torch.cumsum(n, 0) - n  # (B,) first node of each graph in the batch
        edge_index = self._edge_index[:, edge_cols] + torch.repeat_interleave(offsets, e)
        batch = torch.repeat_interleave(torch.arange(positions.numel()), n)
        return GraphBatch(self._x[node_rows], edge_index, batch, self._y[positions])

    def __iter__(self) -> Iterator[GraphBatch]:
        count = self.indices.numel()
        torch.empty((), dtype=torch.int64).random_(generator=self.generator)  # DataLoader's base seed draw
        order = torch.randperm(count, generator=self.generator) if self.shuffle else torch.arange(count)
        for start in range(0, count, self.batch_size):
            yield self.batch_of(order[start:start + self.batch_size])
        if self.shuffle:
            torch.randperm(count, generator=self.generator)  # RandomSampler's trailing permutation (sliced to 0)
