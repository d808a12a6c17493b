"""quantize_ / param groups / penalty / summary on built models of all four layer types."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch_geometric.data import Batch, Data

from gnn.conv import QuantPoint
from gnn.models import ModelConfig, build_model
from gnn.ops import in_degree
from quant.qat.a2q import A2QQuantizer
from quant.qat.api import (
    QuantConfig,
    is_quantized,
    quant_config_of,
    quant_context_of,
    quant_param_groups,
    quant_penalty,
    quant_summary,
    quantize_,
)
from quant.qat.degree_quant import DQQuantizer

ARCHS = ("gcn", "gat", "gin", "sage")
# points A2Q deliberately keeps in FP32 (quant/qat/plan.py): first-layer input; GCN/GAT aggregation output
A2Q_KEPT = {"gcn": {"convs.0.q_input", "convs.0.q_aggregate", "convs.1.q_aggregate"},
            "gat": {"convs.0.q_input", "convs.0.q_aggregate", "convs.1.q_aggregate"},
            "gin": {"convs.0.q_input", "convs.0.mlp.3", "convs.1.mlp.3"}, "sage": {"convs.0.q_input"}}
GIN_HIDDEN = {"convs.0.mlp.3", "convs.1.mlp.3"}  # FP32 unless QuantConfig(quantize_mlp_hidden=True)


def small_graph(n=60, f=12, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (4 * n,), generator=g)
    dst = torch.randint(0, n, (4 * n,), generator=g)
    ei = torch.unique(torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1), dim=1)
    return Data(x=torch.rand(n, f, generator=g), edge_index=ei, y=torch.randint(0, c, (n,), generator=g),
                num_nodes=n)


def model_for(arch, data, pool="none", c=3, head="mlp"):
    torch.manual_seed(0)
    return build_model(ModelConfig(arch=arch, in_dim=data.x.size(1), out_dim=c, hidden_dim=8, heads=2,
                                   pool=pool, norm="batch" if pool != "none" else "none", head=head))


def points(model):
    return {n for n, m in model.named_modules() if isinstance(m, QuantPoint)}


@pytest.mark.parametrize("method", ["a2q", "degree-aware", "dq-int8", "dq-int4"])
@pytest.mark.parametrize("arch", ARCHS)
def test_quantize_replaces_points_and_trains(arch, method):
    data = small_graph()
    model = model_for(arch, data)
    before = points(model)
    cfg = QuantConfig(method=method)
    quantize_(model, cfg, data)
    left = points(model)
    qs = {n: m for n, m in model.named_modules() if isinstance(m, A2QQuantizer | DQQuantizer)}
    if method.startswith("dq"):
        hidden = GIN_HIDDEN if arch == "gin" else set()
        assert left == {"convs.0.q_input"} | hidden and set(qs) == before - left  # FP32 first input by default
    else:
        assert left == A2Q_KEPT[arch] and set(qs) == before - left
        if arch == "gat":
            assert {"convs.0.q_att", "convs.0.q_score", "convs.0.q_xw"} <= set(qs)
    groups = quant_param_groups(model, cfg, 0.01)
    qparams = [p for g in groups for p in g["params"]]
    assert all(g["weight_decay"] == 0.0 for g in groups)
    assert len({id(p) for p in qparams}) == len(qparams)
    model.train()
    out = model(data.x, data.edge_index)
    assert out.shape == (60, 3) and torch.isfinite(out).all()
    loss = F.cross_entropy(out, data.y) + quant_penalty(model)
    loss.backward()
    first_weight = model.convs[0].lin.weight if arch in ("gcn", "gat") else next(model.convs[0].parameters())
    assert first_weight.grad is not None and first_weight.grad.abs().sum() > 0
    if not method.startswith("dq"):
        assert any(g["name"] == "quant_feature_bits" for g in groups)
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in qparams)
    s = quant_summary(model)
    assert s["method"] == method and s["avg_bits"] is not None
    import json
    json.dumps(s)


def test_quantized_model_differs_from_fp32_and_is_deterministic_in_eval():
    data = small_graph()
    fp = model_for("gcn", data).eval()
    q = quantize_(model_for("gcn", data), QuantConfig(method="a2q", init_bits=2), data).eval()
    with torch.no_grad():
        a, b, b2 = fp(data.x, data.edge_index), q(data.x, data.edge_index), q(data.x, data.edge_index)
    assert not torch.allclose(a, b) and torch.equal(b, b2)


@pytest.mark.parametrize("penalty_bits", ["continuous", "rounded"])
def test_memory_penalty_value(penalty_bits):
    data = small_graph()
    cfg = QuantConfig(method="a2q", target_bits=2.0, penalty_weight=0.5, penalty_bits=penalty_bits,
                      bits_control="penalty")
    model = quantize_(model_for("gcn", data), cfg, data)
    (q,) = [m for m in model.modules() if isinstance(m, A2QQuantizer) and m.learn_bits]
    assert q.unsigned and q.step.shape == (60, 1)  # layer-2 input, post-ReLU, per node
    with torch.no_grad():
        q.bits.copy_(torch.linspace(1.0, 9.0, 60).view(-1, 1))  # beyond max_bits 8: clamped
    width = 8  # hidden
    b = torch.linspace(1.0, 9.0, 60).clamp(1, 8)
    if penalty_bits == "rounded":
        b = torch.floor(b + 0.5)  # positive: half away from zero is half up
    b = b - 1  # without the sign bit
    m_kb = width * b.sum() / 8 / 1024
    target_kb = 2.0 * 60 * width / 8 / 1024
    expected = 0.5 * max(m_kb.item() - target_kb, 0.0) ** 2
    assert quant_penalty(model).item() == pytest.approx(expected, rel=1e-5)
    quant_penalty(model).backward()
    assert (q.bits.grad[:-8] > 0).all() and (q.bits.grad[-5:] == 0).all()  # clamped entries get no push
    with torch.no_grad():
        q.bits.fill_(2.0)  # 1 bit without sign < target: no penalty
    assert quant_penalty(model).item() == 0.0


def test_rounded_penalty_sees_the_stored_bits():
    """Continuous bits of 2.65 (signed, post-ReLU) meet a 1.7-bit target, but every node stores round(2.65) = 3
    signed = 2 bits: only the rounded penalty still pushes the bits down."""
    data = small_graph()
    pens = {}
    for mode in ("continuous", "rounded"):
        model = quantize_(model_for("gcn", data), QuantConfig(method="a2q", target_bits=1.7, penalty_bits=mode,
                                                               bits_control="penalty"), data)
        (q,) = [m for m in model.modules() if isinstance(m, A2QQuantizer) and m.learn_bits]
        with torch.no_grad():
            q.bits.fill_(2.65)
        pens[mode] = quant_penalty(model)
        if mode == "rounded":
            pens[mode].backward()
            assert (q.bits.grad > 0).all()  # straight-through: every node is pushed towards fewer bits
    assert pens["continuous"].item() == 0.0 and pens["rounded"].item() > 0.0
    with pytest.raises(ValueError, match="penalty_bits"):
        QuantConfig(method="a2q", penalty_bits="stored")


def test_summary_reports_bits_with_and_without_sign():
    data = small_graph()
    model = quantize_(model_for("gcn", data), QuantConfig(method="a2q", init_bits=3), data)
    s = quant_summary(model)
    assert s["avg_bits"] == pytest.approx(3.0) and s["avg_bits_with_sign"] == pytest.approx(4.0)
    assert s["compression"] == pytest.approx(32 / 3) and s["bits_histogram"] == {"3": 60 * 8}
    assert set(s["fixed_bits"].values()) == {4}  # weights and XW at A2Q's fixed 4 bits


def test_degree_aware_shares_parameters_by_in_degree():
    data = small_graph()
    cfg = QuantConfig(method="degree-aware", num_degree_buckets=6)
    model = quantize_(model_for("sage", data), cfg, data)
    q = model.convs[1].q_input
    assert q.scheme == "degree" and q.bits.shape == (6, 1)
    with torch.no_grad():
        q.bits.copy_(torch.tensor([[2.0], [3], [4], [5], [6], [7]]))
    bits, deg = q.row_bits()
    ref = torch.tensor([2.0, 3, 4, 5, 6, 7])[in_degree(data.edge_index, 60).clamp(max=5)]
    assert torch.equal(bits, ref) and torch.equal(deg, in_degree(data.edge_index, 60))
    table = quant_summary(model)["degree_tables"]["convs.1.q_input"]
    assert [r["bits"] for r in table] == [1, 2, 3, 4, 5, 6] and table[-1]["max_degree"] is None


@pytest.mark.parametrize("head", ["mlp", "linear-sum"])
@pytest.mark.parametrize("method", ["a2q", "degree-aware"])
def test_graph_task_uses_batch_graph(method, head):
    graphs = [small_graph(n=10 + i, f=5, seed=i) for i in range(4)]
    batch = Batch.from_data_list(graphs)
    model = model_for("gin", batch, pool="sum", c=2, head=head)
    cfg = QuantConfig(method=method, nns_pool_size=50, num_degree_buckets=8)
    quantize_(model, cfg, None)
    model.train()
    out = model(batch.x, batch.edge_index, batch.batch)
    assert out.shape == (4, 2)
    (out.sum() + quant_penalty(model)).backward()
    q = model.convs[1].q_aggregate
    assert q.scheme == ("nns" if method == "a2q" else "degree") and q.local is False
    heads = model.readout_heads if head == "linear-sum" else [model.head[0], model.head[3]]
    assert not any(isinstance(h.q_weight, QuantPoint) for h in heads)  # the head's weights are quantized too
    assert q.step.grad is not None and (q.step.grad != 0).sum() >= 1
    model.eval()
    with torch.no_grad():
        model(batch.x, batch.edge_index, batch.batch)
    s = quant_summary(model)
    assert s["avg_bits"] == pytest.approx(4.0) and sum(s["bits_histogram"].values()) > 0


@pytest.mark.parametrize("method", ["a2q", "degree-aware", "dq-int8"])
def test_graph_task_quantizers_join_the_model_device(method):
    # A graph task has no calibration forward; the new quantizers must still move to the model's device (a CUDA
    # run once failed with cuda/cpu tensors mixed). The meta device stands in for a GPU on a CPU-only machine.
    batch = Batch.from_data_list([small_graph(n=10, f=5)])
    model = model_for("gin", batch, pool="sum", c=2).to("meta")
    quantize_(model, QuantConfig(method=method, nns_pool_size=50, num_degree_buckets=8), None)
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    quant_tensors = [n for n in tensors if ".q_" in n]
    assert quant_tensors and all(t.device.type == "meta" for t in tensors.values()), \
        [n for n, t in tensors.items() if t.device.type != "meta"]


def test_dq_masks_protected_nodes_only_in_training():
    data = small_graph()
    model = quantize_(model_for("gcn", data), QuantConfig(method="dq-int4", dq_low=1.0, dq_change=0.0), data)
    q = model.convs[1].q_input
    model.train()
    model(data.x, data.edge_index)
    assert quant_context_of(model).dq_mask.all()  # p = 1: every node protected
    x = torch.rand(60, 8)
    assert torch.equal(q(x), x)  # protected rows pass in FP32
    model.eval()
    model(data.x, data.edge_index)
    assert quant_context_of(model).dq_mask is None
    assert not torch.equal(q(x), x) and len(torch.unique(q(x))) <= 16  # eval: every node at INT4


def test_dq_range_is_cumulative_percentile():
    data = small_graph()
    model = quantize_(model_for("gcn", data), QuantConfig(method="dq-int8", dq_low=0.0, dq_change=0.0), data)
    q = model.convs[0].lin.q_weight
    q.train()
    q(torch.tensor([[-1.0, 0.5]]))
    q(torch.tensor([[-0.2, 2.0]]))
    assert q.lo.item() == -1.0 and q.hi.item() == 2.0


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "a2q", "target_bits": 9.0}, "target_bits"),
    ({"method": "a2q", "target_bits": -1.0}, "target_bits"),
    ({"method": "a2q", "target_bits": math.nan}, "target_bits"),
    ({"method": "a2q", "init_bits": 0}, "init_bits"),
    ({"method": "a2q", "weight_bits": 12}, "weight_bits"),
    ({"method": "a2q", "max_bits": 9}, "max_bits"),
    ({"method": "a2q", "init_bits": 2.5}, "init_bits"),
    ({"method": "int2"}, "a2q, degree-aware, dq-int8, dq-int4"),
    ({"method": "a2q", "nns_range": "exact"}, "code, paper"),
])
def test_invalid_config_gives_clear_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        QuantConfig(**kwargs)


def test_per_node_parameters_reject_another_graph():
    data = small_graph()
    model = quantize_(model_for("gcn", data), QuantConfig(method="a2q"), data)
    other = small_graph(n=30)
    with pytest.raises(RuntimeError, match="transductive"):
        model(other.x, other.edge_index)
    with pytest.raises(ValueError, match="already quantized"):
        quantize_(model, QuantConfig(method="a2q"), data)


def test_short_cora_gcn_a2q_training_learns(cora):
    data, split = cora.data, cora.splits[0]
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch="gcn", in_dim=cora.num_features, out_dim=cora.num_classes))
    cfg = QuantConfig(method="a2q", target_bits=2.0, bits_control="penalty")  # A2Q's own loop, as in its code
    quantize_(model, cfg, data)
    groups = quant_param_groups(model, cfg, 0.01)
    ids = {id(p) for g in groups for p in g["params"]}
    base = [p for p in model.parameters() if id(p) not in ids]
    opt = torch.optim.Adam([{"params": base, "lr": 0.01, "weight_decay": 5e-4}] + groups)
    bits0 = quant_summary(model)["avg_bits"]
    x_sparse = data.x.to_sparse()  # the first-layer input stays FP32 (A2Q), so sparse input is exact and fast
    for _ in range(40):
        model.train()
        opt.zero_grad()
        out = model(x_sparse, data.edge_index)
        (F.cross_entropy(out[split.train], data.y[split.train]) + quant_penalty(model)).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(x_sparse, data.edge_index).argmax(-1)
    acc = (pred[split.test] == data.y[split.test]).float().mean().item()
    bits = quant_summary(model)["avg_bits"]
    assert acc > 0.7, acc  # chance is ~0.3
    assert bits < bits0 - 1.0, (bits0, bits)  # the penalty drives the bits from 4 toward the 2-bit target


@pytest.mark.parametrize("method", ["a2q", "degree-aware", "dq-int4"])
def test_trainer_integration(method):
    """gnn.trainer reaches quantize_ / quant_param_groups / quant_penalty / quant_summary through the training
    extension registered by the ``gnn.training_extensions`` entry point (quant.qat.training_hooks)."""
    from gnn.data.synthetic import sbm_graph
    from gnn.trainer import TrainConfig, train_one

    graph = sbm_graph(120, num_classes=3, avg_degree=6.0, num_features=8, seed=0)
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch="gcn", in_dim=graph.num_features, out_dim=graph.num_classes))
    res = train_one(model, graph, graph.splits[0], TrainConfig(epochs=3, quant=method, target_bits=3.0),
                    seed=0, progress=False)
    assert res.quant_summary["method"] == method and res.quant_summary["avg_bits"] is not None
    model.eval()  # quantized in place and loaded with the selected state: it gives the reported accuracies
    with torch.no_grad():
        pred = model(graph.data.x, graph.data.edge_index).argmax(-1)
    for idx, reported in ((graph.splits[0].val, res.val_acc), (graph.splits[0].test, res.test_acc)):
        assert reported == int((pred[idx] == graph.data.y[idx]).sum()) / idx.numel()


def test_training_extensions_registered_through_the_entry_point():
    """Every method of quant.qat.config.METHODS is a gnn training extension, found by gnn.hooks through the installed
    entry point (no import of quant by name), and validates a TrainConfig through its QuantConfig."""
    from importlib.metadata import entry_points

    from gnn import hooks
    from gnn.trainer import TrainConfig
    from quant.qat.config import METHODS
    from quant.qat.training_hooks import QuantExtension

    assert [ep.value for ep in entry_points(group=hooks.ENTRY_POINT_GROUP) if ep.name == "quant"] == \
        ["quant.qat.training_hooks:register"]
    assert hooks.methods() == ("none", *METHODS)
    for method in METHODS:
        assert hooks.get(method) == QuantExtension(method)
        assert hooks.get(method).learns_bits == (method in ("a2q", "degree-aware"))
    with pytest.raises(ValueError, match="target_bits=9.0 is invalid"):
        TrainConfig(quant="a2q", target_bits=9.0)  # QuantConfig's rule, at configuration time
    with pytest.raises(ValueError, match="penalty_weight=nan must be a finite number"):
        TrainConfig(quant="a2q", penalty_weight=float("nan"))


def test_public_accessors_of_a_quantized_model():
    data = small_graph()
    model = model_for("gcn", data)
    assert not is_quantized(model)
    with pytest.raises(ValueError, match="not quantized"):
        quant_config_of(model)
    with pytest.raises(ValueError, match="not quantized"):
        quant_context_of(model)
    cfg = QuantConfig(method="a2q")
    quantize_(model, cfg, data)
    assert is_quantized(model) and quant_config_of(model) is cfg
    assert quant_context_of(model).fixed_num_nodes == data.num_nodes


@pytest.mark.parametrize("method", ["a2q", "degree-aware", "dq-int4"])
def test_gin_mlp_hidden_quantized_on_request_only(method):
    data = small_graph()
    model = model_for("gin", data)
    quantize_(model, QuantConfig(method=method, quantize_mlp_hidden=True), data)
    qs = {n: m for n, m in model.named_modules() if isinstance(m, A2QQuantizer | DQQuantizer)}
    assert GIN_HIDDEN <= set(qs) and not (GIN_HIDDEN & points(model))
    if method != "dq-int4":
        q = qs["convs.0.mlp.3"]
        assert q.unsigned and q.scheme == ("degree" if method == "degree-aware" else "node")
    model.train()
    loss = F.cross_entropy(model(data.x, data.edge_index), data.y) + quant_penalty(model)
    loss.backward()
    step = getattr(qs["convs.1.mlp.3"], "step", None)
    assert step is None or (step.grad is not None and step.grad.abs().sum() > 0)
    with pytest.raises(ValueError, match="no MLP hidden quantization point"):
        quantize_(model_for("sage", data), QuantConfig(method=method, quantize_mlp_hidden=True), data)


@pytest.mark.parametrize("arch, field, ok", [("gcn", "xw_bits", True), ("gin", "xw_bits", True),
                                             ("gat", "xw_bits", False), ("sage", "xw_bits", False),
                                             ("gat", "attention_bits", True), ("gcn", "edge_bits", False),
                                             ("sage", "weight_bits", True)])
def test_a_fixed_bitwidth_without_a_point_to_act_on_is_refused(arch, field, ok):
    """``xw_bits`` acts on per-channel points (GCN's XW, GIN's input), ``attention_bits`` / ``edge_bits`` on GAT's
    per-head points; set on a model without such a point it would be ignored, so quantize_ refuses it."""
    data = small_graph()
    model = model_for(arch, data)
    cfg = QuantConfig(method="a2q", **{field: 6})
    if ok:
        quantize_(model, cfg, data)
        widths = {int(q.rounded_bits().max()) for q in model.modules() if getattr(q, "scheme", None) in
                  ("row", "channel", "head")}
        assert 6 in widths
    else:
        with pytest.raises(ValueError, match=f"{field}=6 has no quantization point"):
            quantize_(model, cfg, data)


@pytest.mark.parametrize("arch,target,warns", [("gat", 1.7, True), ("gat", 2.0, False), ("gcn", 1.7, False)])
def test_all_signed_model_under_two_bits_warns(arch, target, warns, recwarn):
    """GAT learns bits on signed tensors only: under a 2-bit target its rows fall to b = 1, all zeros; say so."""
    data = small_graph()
    quantize_(model_for(arch, data), QuantConfig(method="a2q", target_bits=target), data)
    hits = [w for w in recwarn if "is signed" in str(w.message)]
    assert len(hits) == int(warns)
    if warns:
        assert "target_bits=1.7 < 2" in str(hits[0].message) and "at least 2 bits" in str(hits[0].message)
