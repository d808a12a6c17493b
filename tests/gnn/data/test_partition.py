"""Node partitioning (`gnn.data.partition`): balance, METIS cut quality, caching, bad input."""

import pytest
import torch

from gnn.data.partition import cached_partition_nodes, halo_rows_total, partition_cache_path, partition_nodes


def ring_graph(n: int) -> torch.Tensor:
    i = torch.arange(n)
    e = torch.stack([i, (i + 1) % n])
    return torch.cat([e, e.flip(0)], dim=1)  # (2, 2n) symmetric


@pytest.mark.parametrize("method", ["metis", "random"])
def test_balanced_and_complete(method, cora):
    ei, n = cora.data.edge_index, cora.data.num_nodes
    parts = partition_nodes(ei, n, 4, method, seed=0)
    sizes = torch.bincount(parts, minlength=4)
    assert sizes.sum() == n and sizes.max() <= 1.05 * n / 4 and sizes.min() > 0
    if method == "metis":  # METIS cuts far fewer edges than random
        rand = partition_nodes(ei, n, 4, "random", seed=0)
        assert halo_rows_total(parts, ei) < 0.5 * halo_rows_total(rand, ei)


def test_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path))
    ei = ring_graph(40)
    a = cached_partition_nodes("ring40", ei, 40, 4, "metis", 0)
    path = partition_cache_path("ring40", 4, "metis", 0)
    assert path == tmp_path / "partitions" / "ring40_p4_metis_s0.pt" and path.exists()
    assert torch.equal(a, cached_partition_nodes("ring40", ei, 40, 4, "metis", 0))
    b = cached_partition_nodes("ring40", ring_graph(40)[:, :60], 40, 4, "metis", 0)  # other graph: recomputed
    assert b.shape == (40,)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="at most 5 parts"):
        partition_nodes(ring_graph(5), 5, 6)
    with pytest.raises(ValueError, match="valid: metis, random"):
        partition_nodes(ring_graph(5), 5, 2, "spectral")
