"""Reference model: kernel equivalence through the whole model, interleave schedule, validation."""

import pytest
import torch

from graphtransformer.cluster import ClusterConfig
from graphtransformer.model import (
    GraphTransformer,
    GraphTransformerConfig,
    attention_graph,
    interleaved_schedule,
    layer_kinds,
)


def _setup(schedule, dense_every=0, n=30):
    g = torch.Generator().manual_seed(0)
    a = torch.rand(n, n, generator=g) < 0.15
    dst, src = torch.nonzero(a | a.T, as_tuple=True)
    graph = attention_graph(torch.stack([src, dst]), n, max_degree=8, cluster=ClusterConfig(num_clusters=3))
    cfg = GraphTransformerConfig(in_dim=5, out_dim=3, hidden_dim=8, num_heads=2, num_layers=len(schedule),
                                 schedule=schedule, dense_every=dense_every, dropout=0.0, pe_dim=2, max_degree=8)
    torch.manual_seed(1)
    model = GraphTransformer(cfg).double()
    x = torch.randn(n, 5, dtype=torch.float64, generator=g)
    pe = torch.randn(n, 2, dtype=torch.float64, generator=g)
    return model, graph, x, pe


def test_interleaved_schedule_shape():
    assert interleaved_schedule(3) == ("sparse", "sparse", "dense")
    assert interleaved_schedule(6, 2) == ("sparse", "dense") * 3


def test_per_step_switching_alternates():
    sched = ("sparse", "sparse", "dense")
    kinds = [layer_kinds(sched, step, dense_every=3) for step in range(9)]
    dense_steps = [s for s, k in enumerate(kinds) if k == ("dense",) * 3]
    assert dense_steps == [2, 5, 8]  # TorchGT's released loop would give [] (its counter never advances)
    assert all(kinds[s] == sched for s in range(9) if s not in dense_steps)
    assert layer_kinds(sched, None, 3) == sched  # evaluation uses the layer schedule


def test_model_output_follows_the_schedule():
    """A dense step must produce the all-dense model's output, and a normal step the (s, s, d) one."""
    model, graph, x, pe = _setup(("sparse", "sparse", "dense"), dense_every=2)
    ref_dense, _, _, _ = _setup(("dense", "dense", "dense"))
    ref_dense.load_state_dict(model.state_dict())
    ref_sched, _, _, _ = _setup(("sparse", "sparse", "dense"))
    ref_sched.load_state_dict(model.state_dict())
    assert torch.allclose(model(x, graph, pe, step=1), ref_dense(x, graph, pe), atol=1e-12)
    assert torch.allclose(model(x, graph, pe, step=0), ref_sched(x, graph, pe), atol=1e-12)
    assert not torch.allclose(model(x, graph, pe, step=0), model(x, graph, pe, step=1), atol=1e-6)


def test_cluster_and_sparse_models_agree_with_gradients():
    m1, graph, x, pe = _setup(("sparse", "sparse"))
    m2, _, _, _ = _setup(("cluster", "cluster"))
    m2.load_state_dict(m1.state_dict())
    out1, out2 = m1(x, graph, pe), m2(x, graph, pe)
    assert (out1 - out2).abs().max() < 1e-10
    out1.square().sum().backward()
    out2.square().sum().backward()
    for (name, p1), p2 in zip(m1.named_parameters(), m2.parameters(), strict=True):
        assert (p1.grad - p2.grad).abs().max() < 1e-10, name


def test_permutation_equivariance():
    model, graph, x, pe = _setup(("sparse", "dense"))
    perm = torch.randperm(30, generator=torch.Generator().manual_seed(3))
    inv = torch.argsort(perm)
    pgraph = attention_graph(inv[graph.edge_index], 30, max_degree=8)
    out = model(x, graph, pe)
    out_p = model(x[perm], pgraph, pe[perm])
    assert (out[perm] - out_p).abs().max() < 1e-10


def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match="valid"):
        GraphTransformerConfig(in_dim=1, out_dim=1, num_layers=1, schedule=("full",))
    with pytest.raises(ValueError, match="divisible"):
        GraphTransformerConfig(in_dim=1, out_dim=1, hidden_dim=10, num_heads=4, num_layers=1, schedule=("dense",))
    with pytest.raises(ValueError, match="one attention kind per layer"):
        GraphTransformerConfig(in_dim=1, out_dim=1, num_layers=2, schedule=("dense",))


def test_attention_only_layers_without_ffn():
    """ffn_ratio=0: no FFN parameters, and each layer is exactly the attention block (h + Attn(LN(h)) for dense,
    Attn(LN(h)) for topology layers without the sparse residual); gradients reach every remaining parameter."""
    schedule = ("sparse", "dense")
    n = 30
    model, graph, x, pe = _setup(schedule, n=n)
    cfg = GraphTransformerConfig(**{**model.cfg.__dict__, "ffn_ratio": 0, "sparse_residual": False})
    torch.manual_seed(1)
    model = GraphTransformer(cfg).double()
    assert not any("ffn" in name or "norm2" in name for name, _ in model.named_parameters())
    h = model.input(x) + model.degree(graph.degree.clamp_max(cfg.max_degree)) + model.pe(pe)
    for layer, kind in zip(model.layers, schedule, strict=True):
        a = layer.attn(layer.norm1(h), graph, kind)
        h = h + a if kind == "dense" else a
    model.eval()
    out = model(x, graph, pe)
    torch.testing.assert_close(out, model.head(model.norm(h)), rtol=0, atol=1e-12)
    out.square().sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="ffn_ratio"):
        GraphTransformerConfig(in_dim=1, out_dim=1, num_layers=1, schedule=("dense",), ffn_ratio=-1)


def test_without_degree_embedding_the_input_is_the_feature_projection_only():
    """degree_embedding=False: no degree parameters, the layers start from input(x) (+ pe), and the output does not
    depend on the degrees (with max_degree=0 the embedding would be one learned vector added to every node)."""
    schedule = ("sparse", "dense")
    model, graph, x, pe = _setup(schedule)
    cfg = GraphTransformerConfig(**{**model.cfg.__dict__, "degree_embedding": False})
    torch.manual_seed(1)
    model = GraphTransformer(cfg).double().eval()
    assert model.degree is None and not any("degree" in name for name, _ in model.named_parameters())
    h = model.input(x) + model.pe(pe)
    for layer, kind in zip(model.layers, schedule, strict=True):
        h = layer(h, graph, kind)
    out = model(x, graph, pe)
    torch.testing.assert_close(out, model.head(model.norm(h)), rtol=0, atol=1e-12)
    other = type(graph)(graph.num_nodes, graph.edge_index, torch.zeros_like(graph.degree))
    torch.testing.assert_close(model(x, other, pe), out, rtol=0, atol=0)


def test_branch_activation_applies_to_every_attention_branch():
    """branch_activation='elu': each layer is h + ELU(Attn(LN(h))) (dense) or ELU(Attn(LN(h))) (topology layers
    without the residual), recomputed by hand in float64; an unknown name is refused."""
    schedule = ("sparse", "dense")
    model, graph, x, pe = _setup(schedule, n=30)
    cfg = GraphTransformerConfig(**{**model.cfg.__dict__, "ffn_ratio": 0, "sparse_residual": False,
                                    "branch_activation": "elu"})
    torch.manual_seed(1)
    model = GraphTransformer(cfg).double()
    model.eval()
    h = model.input(x) + model.degree(graph.degree.clamp_max(cfg.max_degree)) + model.pe(pe)
    for layer, kind in zip(model.layers, schedule, strict=True):
        a = torch.nn.functional.elu(layer.attn(layer.norm1(h), graph, kind))
        h = h + a if kind == "dense" else a
    torch.testing.assert_close(model(x, graph, pe), model.head(model.norm(h)), rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="branch_activation"):
        GraphTransformerConfig(in_dim=1, out_dim=1, num_layers=1, schedule=("dense",), branch_activation="relu6")



@pytest.mark.parametrize("sparse_residual, ffn_ratio", [(False, 0), (True, 2)])
def test_layer_scale_multiplies_every_residual_branch(sparse_residual, ffn_ratio):
    """layer_scale=s: h + gamma * branch for each residual branch (gamma per channel, starting at s), recomputed by
    hand in float64 after gamma is moved off its start; gamma learns; off (0) adds no parameters; < 0 is refused."""
    schedule = ("sparse", "dense")
    model, graph, x, pe = _setup(schedule, n=30)
    cfg = GraphTransformerConfig(**{**model.cfg.__dict__, "ffn_ratio": ffn_ratio, "sparse_residual": sparse_residual,
                                    "layer_scale": 0.1})
    torch.manual_seed(1)
    model = GraphTransformer(cfg).double()
    gammas = {n: p for n, p in model.named_parameters() if "gamma" in n}
    assert len(gammas) == len(schedule) * (2 if ffn_ratio else 1)
    assert all(torch.equal(g.float(), torch.full(g.shape, 0.1)) for g in gammas.values())
    with torch.no_grad():
        for g in gammas.values():
            g.uniform_(0.05, 0.5)
    model.eval()
    h = model.input(x) + model.degree(graph.degree.clamp_max(cfg.max_degree)) + model.pe(pe)
    for layer, kind in zip(model.layers, schedule, strict=True):
        a = layer.attn(layer.norm1(h), graph, kind)
        h = h + layer.gamma_attn * a if kind == "dense" or sparse_residual else a
        if ffn_ratio:
            h = h + layer.gamma_ffn * layer.ffn(layer.norm2(h))
    out = model(x, graph, pe)
    torch.testing.assert_close(out, model.head(model.norm(h)), rtol=0, atol=1e-12)
    out.square().sum().backward()
    used = {n for n in gammas if sparse_residual or "ffn" in n or schedule[int(n.split(".")[1])] == "dense"}
    assert all(gammas[n].grad is not None and gammas[n].grad.abs().sum() > 0 for n in used)
    assert all(gammas[n].grad is None for n in set(gammas) - used)  # a GAT-like topology layer has no residual
    plain = GraphTransformer(GraphTransformerConfig(**{**cfg.__dict__, "layer_scale": 0.0}))
    assert not any("gamma" in n for n, _ in plain.named_parameters())
    with pytest.raises(ValueError, match="layer_scale"):
        GraphTransformerConfig(**{**cfg.__dict__, "layer_scale": -0.1})
