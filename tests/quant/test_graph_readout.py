"""Graph classifiers through the integer path: the readout's integer arithmetic against float64 (quant.readout), the
batch-norm fold, and GIN / GCN graph classifiers (A2Q with the Nearest Neighbor Strategy) exported, read back,
verified and checked by the accelerator model's functional check."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from torch import nn
from torch_geometric.data import Data

from gnn.conv.linear import Linear
from gnn.data.batching import GraphBatcher
from gnn.data.loaders import GraphData, load_graph
from gnn.data.splits import Split
from gnn.experiment import run_experiment
from gnn.models import ModelConfig, build_model
from gnn.trainer import TrainConfig
from hw.functional import FunctionalMismatch, check_workload
from hw.workload import workload_from_export
from quant.convert import check_convertible, fold_affine, norm_affine, per_node
from quant.export import export_model, export_run
from quant.qat.api import QuantConfig, quantize_
from quant.qgraph import ExportError, QGraph, load
from quant.readout import (
    QuantizedReadout,
    ReadoutLinear,
    check_graph_ptr,
    pool_int,
    readout_int,
    readout_reference,
)

F_IN, C, G = 5, 3, 24


def tiny_graphs(seed: int = 0, count: int = G) -> list[Data]:
    """Small random molecules: one-hot node types, 4..12 nodes, symmetric random edges, a label per graph."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(count):
        n = int(torch.randint(4, 13, (1,), generator=g))
        x = nn.functional.one_hot(torch.randint(0, F_IN, (n,), generator=g), F_IN).float()
        ei = torch.randint(0, n, (2, 2 * n), generator=g)
        ei = torch.cat([ei, ei.flip(0)], dim=1)
        out.append(Data(x=x, edge_index=ei, y=torch.randint(0, C, (1,), generator=g)))
    return out


def graph_data(graphs: list[Data]) -> GraphData:
    idx = torch.arange(len(graphs))
    split = Split(train=idx[:12], val=idx[12:16], test=idx[16:])
    return GraphData(name="tiny-graphs", task="graph", data=None, graphs=graphs, splits=[split], num_features=F_IN,
                     num_classes=C)


def graph_model(arch: str, seed: int = 0) -> nn.Module:
    """A quantized graph classifier (the gnn.presets shapes, narrower) with NNS pools, learned bits and batch-norm
    statistics randomised as after training (some negative scales)."""
    torch.manual_seed(seed)
    kw = ({"hidden_dim": 8, "num_layers": 3, "norm": "batch", "pool": "sum", "readout_input": True,
           "head": "linear-sum"} if arch == "gin" else
          {"hidden_dim": 8, "num_layers": 2, "norm": "batch", "pool": "mean", "head": "mlp"})
    model = build_model(ModelConfig(arch=arch, in_dim=F_IN, out_dim=C, dropout=0.0, **kw))
    quantize_(model, QuantConfig(method="a2q", target_bits=2.0, nns_pool_size=16), None)
    batch = next(iter(GraphBatcher(tiny_graphs(seed + 1), torch.arange(G), batch_size=G)))
    model.train()
    with torch.no_grad():
        model(batch.x, batch.edge_index, batch.batch)  # calibrates every quantizer (NNS pools: log-spaced)
        for m in model.modules():
            if isinstance(m, nn.BatchNorm1d):
                m.running_mean.normal_(0, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(-1.5, 1.5)
                m.bias.normal_(0, 0.2)
            if getattr(m, "learn_bits", False):
                m.bits.uniform_(2.6, 6.4)
    model.eval()
    return model


def fake_quant_logits(model: nn.Module, graphs: list[Data], index: torch.Tensor) -> np.ndarray:
    batch = next(iter(GraphBatcher(graphs, index, batch_size=int(index.numel()))))
    with torch.no_grad():
        return model(batch.x, batch.edge_index, batch.batch).double().numpy()


# ------------------------------------------------------------------------------------------ the readout alone


def _random_readout(rng, head: str, pool: str, widths: list[int]) -> QuantizedReadout:
    def lin(f_in, f_out):
        return ReadoutLinear(w_codes=rng.integers(-7, 8, (f_out, f_in)), w_steps=rng.uniform(0.01, 0.1, f_out),
                             w_bits=4, bias=rng.normal(0, 0.3, f_out))

    linears = [lin(w, C) for w in widths] if head == "linear-sum" else [lin(sum(widths), 6), lin(6, C)]
    return QuantizedReadout(pool=pool, head=head, readout_input=False, linears=tuple(linears))


@pytest.mark.parametrize("head", ["linear-sum", "mlp"])
@pytest.mark.parametrize("pool", ["sum", "mean"])
def test_readout_int_matches_float64(head, pool):
    rng = np.random.default_rng(0)
    ptr = np.array([0, 3, 3, 10, 18])  # an empty graph among them
    n, widths = ptr[-1], [4, 6]
    tensors = [(rng.integers(0, 2**20, (n, 4)), rng.uniform(1e-5, 1e-3, (n, 1))),  # per node
               (rng.integers(-2**18, 2**18, (n, 6)), rng.uniform(1e-4, 1e-2, (1, 6)))]  # per channel
    ro = _random_readout(rng, head, pool, widths)
    got = readout_int(ro, tensors, ptr)
    want = readout_reference(ro, [acc * unit for acc, unit in tensors], ptr)
    assert got["logits"].shape == (4, C)
    # each node's value is rounded to the pooled unit P (the largest unit: 1e-3 here) and the MLP head's hidden
    # rescale has 15-bit multipliers (relative error 2^-16): a few 1e-5 of the largest logit
    np.testing.assert_allclose(got["logits"], want, rtol=0, atol=1e-4 * np.abs(want).max())
    assert not np.array_equal(got["logits"][0], got["logits"][2])


def test_pool_int_rounds_each_node_to_the_pooled_unit():
    """With power-of-two units every ratio ``unit / P`` is exact in float64, so the specification (each value
    rounded half away to the pooled unit P, summed, a mean divided with the same rounding) is computable exactly."""
    rng = np.random.default_rng(1)
    ptr = np.array([0, 2, 7, 8])
    acc = rng.integers(-5000, 5000, (8, 3))
    unit = 2.0 ** rng.integers(-12, -4, (8, 1))
    pooled, p = pool_int(acc, unit, ptr, "sum")
    assert p == unit.max()

    def haz(v):
        return np.sign(v) * np.floor(np.abs(v) + 0.5)

    want = np.add.reduceat(haz(acc * unit / p), ptr[:-1], axis=0)
    np.testing.assert_array_equal(pooled, want)
    mean, _ = pool_int(acc, unit, ptr, "mean")
    np.testing.assert_array_equal(mean, haz(want / np.diff(ptr)[:, None]))


def test_graph_ptr_must_cover_the_nodes():
    with pytest.raises(ValueError, match="graph_ptr"):
        check_graph_ptr(np.array([0, 5, 4, 9]), 9)
    with pytest.raises(ValueError, match="node count 9"):
        check_graph_ptr(np.array([0, 5, 8]), 9)


def test_fold_affine_equals_linear_then_batch_norm():
    torch.manual_seed(0)
    lin, bn = Linear(6, 4), nn.BatchNorm1d(4)
    with torch.no_grad():
        lin.bias.normal_()
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2)
        bn.weight.copy_(torch.tensor([1.5, -0.7, 0.3, -2.0]))
        bn.bias.normal_()
    bn.eval()
    codes = np.random.default_rng(0).integers(-7, 8, (4, 6)).astype(np.int8)
    steps = np.array([0.1, 0.2, 0.05, 0.4])
    x = np.random.default_rng(1).normal(size=(5, 6))
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(codes * steps[:, None]))
        want = bn(lin(torch.from_numpy(x).float())).double().numpy()
    c2, s2, b2 = fold_affine(codes, steps, lin.bias.detach().double().numpy(), *norm_affine(bn, 4, "bn"))
    assert np.all(np.abs(c2) == np.abs(codes)) and np.all(s2 > 0)
    np.testing.assert_allclose(x @ (c2 * s2[:, None]).T + b2, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="eval mode"):
        norm_affine(bn.train(), 4, "norms[0]")


# ------------------------------------------------------------------------------------------ whole classifiers


@pytest.fixture(scope="module", params=["gin", "gcn"])
def exported(request, tmp_path_factory):
    graphs = tiny_graphs()
    graph = graph_data(graphs)
    model = graph_model(request.param)
    out = export_model(model, graph, tmp_path_factory.mktemp(request.param) / "g.qgraph")
    return request.param, model, graphs, graph, load(out)


def test_graph_export_matches_the_fake_quant_model(exported):
    arch, model, graphs, graph, q = exported
    q.verify()
    test = graph.splits[0].test
    fake = fake_quant_logits(model, graphs, test)
    logits = np.asarray(q["logits"])
    assert logits.shape == (test.numel(), C) and q.is_graph_level
    assert np.abs(logits - fake).max() <= 1e-3 * np.abs(fake).max()
    np.testing.assert_array_equal(q["graph.graph_labels"], torch.cat([graphs[i].y for i in test]).numpy())
    ptr = np.asarray(q["graph.graph_ptr"])
    assert ptr.tolist() == [0, *np.cumsum([graphs[i].num_nodes for i in test]).tolist()]
    m = q.manifest["metrics"]
    assert m["prediction_agreement"] == float((logits.argmax(1) == fake.argmax(1)).mean())
    assert q.manifest["readout"]["num_readouts"] == len(model.convs) + int(model.cfg.readout_input)
    assert q.manifest["dataset"]["dataset_graph_ids"] == test.tolist()


def test_nns_steps_are_the_selection_of_the_eval_forward(exported):
    arch, model, graphs, graph, q = exported
    point = model.convs[1].q_input if arch == "gcn" else model.convs[1].q_aggregate
    assert point.scheme == "nns"
    fake_quant_logits(model, graphs, graph.splits[0].test)
    steps, _ = per_node(point, torch.zeros(int(q["graph.graph_ptr"][-1]), dtype=torch.long), "who")
    field = q["layer1.x_steps"] if arch == "gcn" else q["layer1.agg_steps"]
    np.testing.assert_array_equal(steps, field)
    with pytest.raises(ValueError, match="eval mode on those 3 nodes"):
        per_node(point, torch.zeros(3, dtype=torch.long), "who")


def test_tampered_readout_is_named(exported):
    *_, q = exported
    pooled = np.array(q["readout.pooled0"])
    pooled[0, 0] += 1
    with pytest.raises(ExportError, match="readout.pooled0"):
        QGraph(path=q.path, manifest=q.manifest, arrays={**q.arrays, "readout.pooled0": pooled}).verify()


def test_accelerator_model_checks_the_readout(exported):
    *_, q = exported
    wl = workload_from_export(q)
    assert check_workload(wl)[-1] == "readout bit-exact"
    wrong = np.array(wl.readout.logits)
    wrong[1, 2] += 1e-9
    bad = dataclasses.replace(wl, readout=dataclasses.replace(wl.readout, logits=wrong))
    with pytest.raises(FunctionalMismatch, match="graph 1, class 2"):
        check_workload(bad)


def test_node_only_converters_refuse_graph_classifiers():
    model = build_model(ModelConfig(arch="sage", in_dim=F_IN, out_dim=C, pool="mean"))
    quantize_(model, QuantConfig(method="a2q"), None)
    with pytest.raises(ValueError, match="graph classifiers export as GCN or GIN"):
        check_convertible(model, "sage", "to_quantized_sage")


def test_a_trained_fold_exports_its_own_test_graphs(tmp_path, monkeypatch):
    """A run's seed<S>_fold<K> exports the test graphs of fold K (the run's file is reloaded and checked)."""
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    graph = load_graph(tiny_graphs(3, count=30), name="tiny-graphs")
    cfg = ModelConfig(arch="gin", in_dim=F_IN, out_dim=graph.num_classes, hidden_dim=8, num_layers=2, norm="batch",
                      pool="sum", readout_input=True, head="linear-sum")
    train = TrainConfig(epochs=2, lr=0.01, batch_size=8, quant="a2q", target_bits=2.0)
    run_experiment(graph, cfg, train, [0], run_dir=tmp_path / "run", progress=False, num_folds=2)
    q = load(export_run(tmp_path / "run", tmp_path / "f1.qgraph", seed_dir="seed1_fold1"))
    q.verify()
    assert q.manifest["dataset"]["fold"] == 1
    assert q.manifest["dataset"]["dataset_graph_ids"] == graph.splits[1].test.tolist()
