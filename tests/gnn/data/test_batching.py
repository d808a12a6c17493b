"""GraphBatcher yields the batches PyG's DataLoader collates, in the same shuffled order."""

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from gnn.data.batching import GraphBatcher
from gnn.data.loaders import load_dataset


def _random_graphs(count: int, seed: int) -> list[Data]:
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for _ in range(count):
        n = int(torch.randint(1, 9, (1,), generator=gen))  # one-node graphs included
        e = int(torch.randint(0, 3 * n, (1,), generator=gen))  # edgeless graphs included
        graphs.append(Data(x=torch.randn(n, 3, generator=gen), edge_index=torch.randint(0, n, (2, e), generator=gen),
                           y=torch.randint(0, 2, (1,), generator=gen)))
    return graphs


def _assert_same_batches(graphs, indices, batch_size, shuffle, seed):
    subset = [graphs[i] for i in indices]
    gen_ref = torch.Generator().manual_seed(seed) if shuffle else None
    gen_ours = torch.Generator().manual_seed(seed) if shuffle else None
    ref = DataLoader(subset, batch_size=batch_size, shuffle=shuffle, generator=gen_ref)
    ours = GraphBatcher(graphs, indices, batch_size, shuffle=shuffle, generator=gen_ours)
    assert len(ours) == len(ref)
    for _epoch in range(2):  # the generators advance identically from epoch to epoch
        torch.manual_seed(11)
        ref_batches = list(ref)
        global_after_ref = torch.get_rng_state()
        torch.manual_seed(11)
        pairs = list(zip(ref_batches, ours, strict=True))
        assert torch.equal(torch.get_rng_state(), global_after_ref)  # dropout's generator sees the same draws
        if shuffle:
            assert torch.equal(gen_ours.get_state(), gen_ref.get_state())
        for a, b in pairs:
            torch.testing.assert_close(b.x, a.x, rtol=0, atol=0)
            assert torch.equal(b.edge_index, a.edge_index)
            assert torch.equal(b.batch, a.batch)
            assert torch.equal(b.y, a.y)
            assert b.num_graphs == a.num_graphs


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("batch_size", [1, 5, 32])
def test_batches_equal_pyg_dataloader(shuffle, batch_size):
    graphs = _random_graphs(23, seed=batch_size)
    indices = torch.randperm(23, generator=torch.Generator().manual_seed(1))[:17]
    _assert_same_batches(graphs, indices, batch_size, shuffle, seed=7)


def test_batches_equal_pyg_dataloader_on_mutag():
    g = load_dataset("mutag")
    _assert_same_batches(g.graphs, g.splits[0].train, 32, True, seed=3)


def test_bad_batcher_input_is_refused():
    graphs = _random_graphs(3, seed=0)
    with pytest.raises(ValueError, match="batch_size"):
        GraphBatcher(graphs, [0, 1], 0)
    with pytest.raises(ValueError, match="no graphs"):
        GraphBatcher(graphs, [], 4)
