"""Per-rank partitions: halo/send/recv consistency against a brute-force reference, global GCN norm.

Node partitioning itself (balance, caching, bad input) is tested in tests/gnn/data/test_partition.py."""

import pytest
import torch

import distributed.partition
import gnn.data.partition
from distributed.parallelize import global_gcn_edges
from distributed.partition import build_partition
from gnn.data.partition import halo_rows_total, partition_nodes
from gnn.ops import gcn_norm


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


def test_reexports_are_the_graph_partitioner():
    """hw/workload.py still imports partition_nodes from distributed.partition (until it switches)."""
    for name in ("METHODS", "partition_nodes", "cached_partition_nodes", "partition_cache_path", "halo_rows_total"):
        assert getattr(distributed.partition, name) is getattr(gnn.data.partition, name)
