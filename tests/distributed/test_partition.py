"""Partitions: balance, halo/send/recv consistency against a brute-force reference, caching, bad input."""

import pytest
import torch

from distributed.parallelize import global_gcn_edges
from distributed.partition import (
    build_partition,
    cached_partition_nodes,
    halo_rows_total,
    partition_cache_path,
    partition_nodes,
)
from gnn.ops import gcn_norm


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


def test_partition_maps_match_brute_force(cora):
    ei, n = cora.data.edge_index, cora.data.num_nodes
    parts = partition_nodes(ei, n, 3, "random", seed=1)
    ps = [build_partition(ei, parts, r) for r in range(3)]
    edges = set(map(tuple, ei.t().tolist()))
    for p in ps:
        owned = set(p.owned.tolist())
        halo_ref = sorted({s for s, d in edges if d in owned and s not in owned and s != d},
                          key=lambda v: (int(parts[v]), v))
        assert p.halo.tolist() == halo_ref
        local_nodes = torch.cat([p.owned, p.halo])
        got = {(int(local_nodes[s]), int(local_nodes[d])) for s, d in p.edge_index.t().tolist()}
        assert got == {(s, d) for s, d in edges if d in owned and s != d}
        for q in ps:  # what p sends q == the rows of q's halo that p owns, same order
            sent = p.owned[p.send_index[q.rank]].tolist()
            assert sent == [v for v in q.halo.tolist() if parts[v] == p.rank]
            assert p.send_counts[q.rank] == q.recv_counts[p.rank]
    assert sum(p.num_halo for p in ps) == halo_rows_total(parts, ei)


def test_global_gcn_norm_matches_single_graph(cora):
    ei, n = cora.data.edge_index, cora.data.num_nodes
    parts = partition_nodes(ei, n, 2, "metis")
    ref_ei, ref_w = gcn_norm(ei, n)
    ref = {(int(s), int(d)): float(w) for (s, d), w in zip(ref_ei.t().tolist(), ref_w, strict=True)}
    for r in range(2):
        p = build_partition(ei, parts, r)
        lei, w = global_gcn_edges(p)
        nodes = torch.cat([p.owned, p.halo])
        for (s, d), wv in zip(lei.t().tolist(), w.tolist(), strict=True):
            assert ref[(int(nodes[s]), int(nodes[d]))] == pytest.approx(wv, rel=1e-6)
        assert lei.size(1) == sum(1 for (_, d) in ref if parts[d] == r)


def test_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path))
    ei = ring_graph(40)
    a = cached_partition_nodes("ring40", ei, 40, 4, "metis", 0)
    path = partition_cache_path("ring40", 4, "metis", 0)
    assert path.exists() and str(path).startswith(str(tmp_path / "partitions"))
    assert torch.equal(a, cached_partition_nodes("ring40", ei, 40, 4, "metis", 0))
    b = cached_partition_nodes("ring40", ring_graph(40)[:, :60], 40, 4, "metis", 0)  # other graph: recomputed
    assert b.shape == (40,)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="at most 5 parts"):
        partition_nodes(ring_graph(5), 5, 6)
    with pytest.raises(ValueError, match="valid: metis, random"):
        partition_nodes(ring_graph(5), 5, 2, "spectral")
