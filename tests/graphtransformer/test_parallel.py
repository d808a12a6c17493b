"""Every sequence-parallel layout == the single-process model (outputs and gradients, fp64, 1e-10), and the bytes
the code counts == closed-form communication volumes. Workers: gloo over CPU, spawned, free ports."""

import os
import tempfile

import numpy as np
import pytest
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from distributed import codecs
from graphtransformer.comm import RingPlan
from graphtransformer.equivalence import EquivalenceCase, _problem, run_equivalence
from graphtransformer.model import GraphTransformer, GraphTransformerConfig
from graphtransformer.parallel import (
    SequenceParallelConfig,
    build_mesh,
    ddp_of,
    parallelize_graph_transformer,
    shard_graph,
    shard_rows,
)
from graphtransformer.volume import dense_forward_bytes, halo_forward_bytes

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
    w = case.ring_window or case.cp  # Double-Ring: W = cp / w windows of w ranks
    windows = case.cp // w
    if phase == "forward":  # every block but my own arrives once: (w - 1) inner hops per window, W - 1 outer hops
        return a2a + (case.cp - 1) * kv
    # backward: K/V + dK/dV on inner hops, one extra dK/dV hop home per window (w > 1), the K/V outer prefetch and
    # the dK/dV outer hop per window (W > 1)
    inner = windows * (w - 1) * 2 * kv + (windows * kv if w > 1 else 0)
    outer = (windows - 1) * kv + (windows * kv if windows > 1 else 0)
    return a2a + inner + outer


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
        plan = shard_graph(_problem(case)[0], SequenceParallelConfig(cp=2), r["rank"]).halo_plan
        assert r["bytes"]["layers.0"]["forward"] == halo_forward_bytes(plan, row_bytes // 2)  # volume.py formula
        assert r["bytes"]["layers.1"]["forward"] == dense_forward_bytes(r["rows_per_rank"], case.num_heads,
                                                                        case.head_dim, 2, 1, F64)
    # Communication-light: the halo layer moves less than the dense layer on this sparse graph.
    assert all(r["bytes"]["layers.0"]["forward"] < r["bytes"]["layers.1"]["forward"] for r in results)


@pytest.mark.parametrize("cp,hp,window", [(1, 2, 0), (2, 1, 1)])
def test_two_process_ring_layouts_exact_and_bytes(cp, hp, window):
    """Ulysses 2, and the Double-Ring with window 1 (no inner ring: every K/V block and its dK/dV travel on the
    outer ring, prefetch + gradient hop); sparse layers use the ring too, so both layers follow the closed form."""
    case = EquivalenceCase(cp=cp, hp=hp, sparse_comm="ring", schedule=("sparse", "dense"), ring_window=window)
    results = run_equivalence(case)
    _check_exact(results)
    for r in results:
        for layer in ("layers.0", "layers.1"):
            for phase in ("forward", "backward"):
                assert r["bytes"][layer][phase] == _dense_bytes(case, phase)
            n = r["rows_per_rank"]  # graphtransformer.volume (the benchmarks' formula) agrees with the counter
            assert r["bytes"][layer]["forward"] == dense_forward_bytes(n, case.num_heads, case.head_dim, cp, hp, F64)


@pytest.mark.slow
@pytest.mark.parametrize("cp,hp,sparse_comm,window", [(2, 2, "ring", 0), (2, 2, "halo", 0), (4, 1, "ring", 0),
                                                       (1, 4, "halo", 0), (4, 1, "ring", 2)])
def test_four_process_layouts_exact(cp, hp, sparse_comm, window):
    case = EquivalenceCase(cp=cp, hp=hp, sparse_comm=sparse_comm, schedule=("sparse", "dense", "cluster"),
                           ring_window=window)
    results = run_equivalence(case)
    _check_exact(results)
    for r in results:
        for phase in ("forward", "backward"):
            assert r["bytes"]["layers.1"][phase] == _dense_bytes(case, phase)


@pytest.mark.parametrize("size,window", [(1, 1), (4, 1), (4, 2), (4, 4), (6, 3), (8, 2)])
def test_ring_plan_visits_every_block_once_and_peers_match(size, window):
    plans = [RingPlan(size, window, r) for r in range(size)]
    for p in plans:
        visited = [p.owner(j, i) for j in range(p.num_windows) for i in range(p.window)]
        assert sorted(visited) == list(range(size)) and visited[0] == p.rank
        # whom I send to receives from me, and whom I receive from sends to me (inner and outer ring)
        assert plans[p.inner_peers()[0]].inner_peers()[1] == p.rank == plans[p.inner_peers()[1]].inner_peers()[0]
        assert plans[p.outer_peers()[0]].outer_peers()[1] == p.rank == plans[p.outer_peers()[1]].outer_peers()[0]
        assert p.inner_peers()[0] // window == p.rank // window  # the inner ring stays inside my window
    for j in range(plans[0].num_windows):  # at every step the ranks hold distinct blocks (a permutation)
        for i in range(window):
            assert sorted(p.owner(j, i) for p in plans) == list(range(size))


def test_ring_window_must_divide_cp():
    with pytest.raises(ValueError, match="must divide cp=4"):
        SequenceParallelConfig(cp=4, ring_window=3)
    with pytest.raises(ValueError, match="must divide the ring size 4"):
        RingPlan(4, 3, 0)


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


def test_halo_codecs_compress_rows_and_gradients_with_bounded_error():
    """int8 K/V rows forward, int4 gradients back: the bytes are the codecs' (per K or V row of all heads: packed
    codes + fp16 min and step), and outputs / gradients stay near the exact single-process model without equalling
    it (the codec really ran)."""
    case = EquivalenceCase(cp=2, hp=1, sparse_comm="halo", schedule=("sparse", "dense"), halo_codec="int8",
                           halo_grad_codec="int4")
    results = run_equivalence(case)
    width = case.num_heads * case.head_dim  # values per K (or V) row
    sent = _halo_sent_rows(case, 2)
    for r in results:
        assert r["bytes"]["layers.0"]["forward"] == sent[r["rank"]] * 2 * codecs.row_bytes("int8", width)
        assert r["bytes"]["layers.0"]["backward"] == r["halo_recv_rows"] * 2 * codecs.row_bytes("int4", width)
        assert r["bytes"]["layers.1"]["forward"] == _dense_bytes(case, "forward")  # dense layers stay exact
    # int8: ~1/255 of a row's range per value; int4 (stochastic rounding): ~1/15 of a gradient row's range
    assert all(1e-8 < r["out_err"] < 0.01 * r["out_scale"] for r in results), results
    assert all(1e-8 < r["grad_err"] < 0.1 * r["grad_scale"] for r in results), results


@pytest.mark.parametrize("kwargs,match", [({"halo_codec": "int3"}, "unknown halo codec"),
                                          ({"halo_grad_codec": "bf16"}, "unknown halo codec"),
                                          ({"halo_codec": "int1", "sparse_comm": "ring"}, "sparse_comm='halo'")])
def test_config_rejects_bad_halo_codecs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SequenceParallelConfig(cp=2, **kwargs)


def test_config_rejects_unknown_sparse_comm():
    with pytest.raises(ValueError, match="valid"):
        SequenceParallelConfig(sparse_comm="allgather")
    assert np.prod([2, 3]) == SequenceParallelConfig(cp=2, hp=3).world_size


def test_fsdp2_and_activation_checkpointing_step_equals_single_process():
    """FSDP2 (params, grads, AdamW state sharded over 2 ranks) + a checkpointed sparse (halo) layer + ring dense
    layer: outputs, gradients and parameters after one AdamW step equal the single-process step (float64)."""
    case = EquivalenceCase(cp=2, hp=1, sparse_comm="halo", schedule=("sparse", "dense"), fsdp=True,
                           checkpoint_layers=(0,), optimizer_step=True)
    results = run_equivalence(case)
    _check_exact(results)
    for r in results:
        assert r["sharded"] > 0 and r["param_err"] < 1e-10 and r["grad_sync"] is None, r  # FSDP2: no DDP


def test_replicated_gradients_are_summed_by_ddp_buckets():
    """Without FSDP2, PyTorch's DDP engine sums the replicated gradients during backward (the summing comm hook,
    fewer bucketed all-reduces than parameters), and with a checkpointed layer a training step (outputs, gradients,
    one AdamW step) still equals the single-process step (float64)."""
    case = EquivalenceCase(cp=2, hp=1, sparse_comm="halo", schedule=("sparse", "dense"), checkpoint_layers=(0,),
                           optimizer_step=True)
    results = run_equivalence(case)
    _check_exact(results)
    for r in results:
        sync = r["grad_sync"]
        assert r["sharded"] == 0 and r["param_err"] < 1e-10, r
        assert sync["engine"] == "DistributedDataParallel" and sync["comm_hook"] == "_sum_allreduce_hook", sync
        assert 1 <= sync["all_reduces"] < sync["params"], sync


def test_replicated_model_keeps_its_type_and_state_dict_names():
    """DDP (``replicate``) leaves the model a GraphTransformer whose state dict, plain and DCP's, has the unwrapped
    names (no ``module.`` prefix): checkpoints of replicated and single-process runs share their keys."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    cfg = GraphTransformerConfig(in_dim=2, out_dim=2, hidden_dim=4, num_heads=2, num_layers=1, schedule=("dense",),
                                 pe_dim=0)
    names = list(GraphTransformer(cfg).state_dict())
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(d, 'store')}", rank=0, world_size=1)
        try:
            sp = SequenceParallelConfig(checkpoint_layers=(0,))
            model = parallelize_graph_transformer(GraphTransformer(cfg), build_mesh(sp), sp)
            graph = _problem(EquivalenceCase(num_nodes=5))[0]
            model(torch.randn(5, 2), shard_graph(graph, sp, 0)).sum().backward()
            assert isinstance(model, GraphTransformer) and isinstance(ddp_of(model), DistributedDataParallel)
            assert list(model.state_dict()) == names and sorted(get_model_state_dict(model)) == sorted(names)
        finally:
            dist.destroy_process_group()


def test_fsdp2_float32_step_on_gloo():
    """float32 gradients: FSDP2 with a custom divide factor would use PREMUL_SUM, which gloo rejects; the step must
    run and match the single-process step to fp32 precision."""
    case = EquivalenceCase(cp=1, hp=2, sparse_comm="ring", schedule=("sparse", "dense"), fsdp=True,
                           checkpoint_layers=(1,), optimizer_step=True, dtype="float32")
    results = run_equivalence(case)
    for r in results:
        assert r["out_err"] < 1e-5 and r["grad_err"] < 1e-5 and r["param_err"] < 1e-5 and r["sharded"] > 0, r


@pytest.mark.slow
@pytest.mark.parametrize("cp,hp,sparse_comm,ckpt", [(1, 2, "ring", (0, 1)), (2, 2, "halo", (1,))])
def test_fsdp2_checkpointing_other_layouts(cp, hp, sparse_comm, ckpt):
    case = EquivalenceCase(cp=cp, hp=hp, sparse_comm=sparse_comm, schedule=("sparse", "dense"), fsdp=True,
                           checkpoint_layers=ckpt, optimizer_step=True)
    results = run_equivalence(case)
    _check_exact(results)
    assert all(r["sharded"] > 0 and r["param_err"] < 1e-10 for r in results), results


def test_padding_rows_are_zero_and_masked():
    """N = 37 over 4 ranks: 40 padded rows; padded rows carry zero features/degree, no edges, and are invalid keys."""
    case = EquivalenceCase(num_nodes=37)
    graph = _problem(case)[0]
    cfg = SequenceParallelConfig(cp=2, hp=2)
    last = shard_graph(graph, cfg, rank=3)
    assert (last.num_padded, last.rows_per_rank) == (40, 10) and last.row_slice == slice(30, 40)
    x = torch.arange(37.0).unsqueeze(1)
    assert shard_rows(x, last)[:, 0].tolist() == [30, 31, 32, 33, 34, 35, 36, 0, 0, 0]
    assert last.degree[7:].eq(0).all()
    assert not (last.halo_edges[1] >= 7).any()  # no edge targets a padded row
    valid = torch.cat([m[0] for m in last.ring_key_valid])  # (cp * block,) = padded key positions
    assert valid.tolist() == [True] * 37 + [False] * 3


def test_mesh_shape_not_matching_config_is_rejected():
    cfg = GraphTransformerConfig(in_dim=2, out_dim=2, hidden_dim=4, num_heads=2, num_layers=1, schedule=("dense",))
    with tempfile.TemporaryDirectory() as d:
        dist.init_process_group("gloo", init_method=f"file://{os.path.join(d, 'store')}", rank=0, world_size=1)
        try:
            mesh = build_mesh(SequenceParallelConfig(cp=1, hp=1))
            with pytest.raises(ValueError, match=r"mesh shape \(1, 1\) != \(cp=2, hp=1\)"):
                parallelize_graph_transformer(GraphTransformer(cfg), mesh, SequenceParallelConfig(cp=2, hp=1))
            with pytest.raises(ValueError, match="out of range"):
                parallelize_graph_transformer(GraphTransformer(cfg), mesh,
                                              SequenceParallelConfig(checkpoint_layers=(3,)))
        finally:
            dist.destroy_process_group()
