"""Every sequence-parallel layout == the single-process model (outputs and gradients, fp64, 1e-10), and the bytes
the code counts == closed-form communication volumes. Workers: gloo over CPU, spawned, free ports."""

import os
import tempfile

import numpy as np
import pytest
import torch.distributed as dist

from graphtransformer.equivalence import EquivalenceCase, _problem, run_equivalence
from graphtransformer.model import GraphTransformer, GraphTransformerConfig
from graphtransformer.parallel import SequenceParallelConfig, build_mesh, parallelize_graph_transformer, shard_graph

F64 = 8  # bytes per element


def _check_exact(results):
    assert len(results) >= 2
    for r in results:
        assert r["out_err"] < 1e-10 and r["grad_err"] < 1e-10, r


def _halo_sent_rows(case, world):
    """Rows each rank sends in the halo exchange, from the edge list with plain Python sets (independent)."""
    graph = _problem(case)[0]
    n = -(-case.num_nodes // world)
    sent = [set() for _ in range(world)]
    for s, d in graph.edge_index.t().tolist():
        if s // n != d // n:
            sent[s // n].add((d // n, s))
    return [len(x) for x in sent]


def _dense_bytes(case, phase):
    """Closed form per rank for one dense layer: Ulysses moves q, k, v, o; the ring moves K/V (+ dK/dV back)."""
    world, h, d = case.cp * case.hp, case.num_heads, case.head_dim
    n = -(-case.num_nodes // world)
    block = n * case.hp
    a2a = 4 * h * n * d * F64 * (case.hp - 1) // case.hp
    kv = 2 * (h // case.hp) * block * d * F64
    ring = (case.cp - 1) * kv if phase == "forward" else ((case.cp - 1) * 2 * kv + (kv if case.cp > 1 else 0))
    return a2a + ring


def test_ring2_halo_exact_and_bytes():
    case = EquivalenceCase(cp=2, hp=1, sparse_comm="halo", schedule=("sparse", "dense"))
    results = run_equivalence(case)
    _check_exact(results)
    row_bytes = 2 * case.num_heads * case.head_dim * F64  # one K row + one V row, all heads
    sent = _halo_sent_rows(case, 2)
    for r in results:
        assert r["bytes"]["layers.0"]["forward"] == sent[r["rank"]] * row_bytes
        assert r["bytes"]["layers.0"]["backward"] == r["halo_recv_rows"] * row_bytes
        for phase in ("forward", "backward"):
            assert r["bytes"]["layers.1"][phase] == _dense_bytes(case, phase)
    # Communication-light: the halo layer moves less than the dense layer on this sparse graph.
    assert all(r["bytes"]["layers.0"]["forward"] < r["bytes"]["layers.1"]["forward"] for r in results)


def test_ulysses2_exact_and_bytes():
    case = EquivalenceCase(cp=1, hp=2, sparse_comm="ring", schedule=("sparse", "dense"))
    results = run_equivalence(case)
    _check_exact(results)
    for r in results:
        for layer in ("layers.0", "layers.1"):
            for phase in ("forward", "backward"):
                assert r["bytes"][layer][phase] == _dense_bytes(case, phase)


@pytest.mark.slow
@pytest.mark.parametrize("cp,hp,sparse_comm", [(2, 2, "ring"), (2, 2, "halo"), (4, 1, "ring"), (1, 4, "halo")])
def test_four_process_layouts_exact(cp, hp, sparse_comm):
    case = EquivalenceCase(cp=cp, hp=hp, sparse_comm=sparse_comm, schedule=("sparse", "dense", "cluster"))
    results = run_equivalence(case)
    _check_exact(results)
    for r in results:
        for phase in ("forward", "backward"):
            assert r["bytes"]["layers.1"][phase] == _dense_bytes(case, phase)


def test_halo_plans_agree_across_ranks():
    """What rank r sends to p is exactly what p expects from r (3 ranks, padding: 37 nodes)."""
    case = EquivalenceCase(num_nodes=37)
    graph = _problem(case)[0]
    cfg = SequenceParallelConfig(cp=3, hp=1)
    plans = [shard_graph(graph, cfg, r).halo_plan for r in range(3)]
    for r in range(3):
        assert plans[r].send_counts[r] == 0 and plans[r].recv_counts[r] == 0
        for p in range(3):
            assert plans[r].send_counts[p] == plans[p].recv_counts[r]
    sent = _halo_sent_rows(case, 3)
    assert [sum(pl.send_counts) for pl in plans] == sent


def test_heads_not_divisible_by_hp_is_rejected():
    cfg = GraphTransformerConfig(in_dim=2, out_dim=2, hidden_dim=6, num_heads=3, num_layers=1, schedule=("dense",))
    with pytest.raises(ValueError, match="not divisible by hp=2"):
        parallelize_graph_transformer(GraphTransformer(cfg), None, SequenceParallelConfig(cp=1, hp=2))


def test_world_size_not_matching_mesh_is_rejected():
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(d, 'store')}", rank=0, world_size=1)
        try:
            with pytest.raises(ValueError, match=r"cp\(2\) \* hp\(2\) = 4 != WORLD_SIZE\(1\)"):
                build_mesh(SequenceParallelConfig(cp=2, hp=2))
        finally:
            dist.destroy_process_group()


def test_config_rejects_unknown_sparse_comm():
    with pytest.raises(ValueError, match="valid"):
        SequenceParallelConfig(sparse_comm="allgather")
    assert np.prod([2, 3]) == SequenceParallelConfig(cp=2, hp=3).world_size
