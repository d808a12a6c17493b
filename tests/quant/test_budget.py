"""The exact bit budget (quant.qat.budget): the shift gives the largest achievable stored average not above the target
(checked against a brute-force scan of shifts), no row is left on a rounding boundary, ties are spread, and a
quantized model trained with the projection holds its budget at every step."""

import pytest
import torch
from torch_geometric.data import Data

from gnn.data.loaders import GraphData
from gnn.data.splits import Split
from gnn.models import ModelConfig, build_model
from gnn.trainer import TrainConfig, train_one
from quant.qat.api import QuantConfig, attach_bit_budget, quant_penalty, quant_summary, quantize_
from quant.qat.budget import TIE_SPREAD, budget_shift, project_bits_, spread_ties, stored_average

MAX_BITS = 8


def brute_force_best(bits, weight, unsigned, target):
    """The largest stored average <= target (else the lowest one), evaluating `stored_average` between every
    pair of shifts where some row's rounded value changes (b - d = k + 1/2)."""
    points = sorted({float(b) - k - 0.5 for b in bits for k in range(1, MAX_BITS)})
    probes = [points[0] - 1.0] + [(a + b) / 2 for a, b in zip(points, points[1:], strict=False)] + [points[-1] + 1.0]
    avgs = [stored_average(bits, weight, unsigned, MAX_BITS, d) for d in probes]
    ok = [a for a in avgs if a <= target + 1e-12]
    return max(ok) if ok else min(avgs)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("target", [1.0, 1.7, 2.35, 4.0, 7.5])
def test_shift_reaches_the_largest_average_not_above_the_target(seed, target):
    g = torch.Generator().manual_seed(seed)
    r = 40
    bits = torch.rand(r, generator=g, dtype=torch.float64) * 9 - 0.5  # some below 1 and above max: clamped
    weight = torch.randint(1, 20, (r,), generator=g).double()
    unsigned = (torch.rand(r, generator=g) < 0.7).double()
    d = budget_shift(bits, weight, unsigned, target, MAX_BITS)
    got = stored_average(bits, weight, unsigned, MAX_BITS, d)
    assert got == pytest.approx(brute_force_best(bits, weight, unsigned, target), abs=1e-12)
    assert got <= target + 1e-12 or got == pytest.approx(float((1 - unsigned) @ weight / weight.sum()))
    frac = (bits - d) % 1.0
    inside = ((bits - d) > 1.0) & ((bits - d) < MAX_BITS)
    assert ((frac[inside] - 0.5).abs() > 1e-9).all()  # no row on a rounding boundary


def test_equal_bits_move_together_until_spread():
    bits = torch.full((10,), 5.0, dtype=torch.float64)
    weight, unsigned = torch.ones(10, dtype=torch.float64), torch.ones(10, dtype=torch.float64)
    d = budget_shift(bits, weight, unsigned, 1.7, MAX_BITS)
    assert stored_average(bits, weight, unsigned, MAX_BITS, d) == 1.0  # all ten drop from 2 to 1 at once
    spread = spread_ties(bits, priority=torch.arange(10))
    assert (spread.diff() > 0).all() and float(spread.max() - bits.max()) < TIE_SPREAD
    d = budget_shift(spread, weight, unsigned, 1.7, MAX_BITS)
    assert stored_average(spread, weight, unsigned, MAX_BITS, d) == pytest.approx(1.7)  # seven rows keep 2 bits
    kept = torch.floor(spread - d + 0.5) == 3
    assert kept.tolist() == [False] * 3 + [True] * 7  # the highest priorities keep the extra bit


def test_top_and_floor():
    bits = torch.tensor([2.0, 3.0], dtype=torch.float64)
    w, u = torch.ones(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    assert stored_average(bits, w, u, MAX_BITS, budget_shift(bits, w, u, 7.0, MAX_BITS)) == 7.0  # raised to max
    assert stored_average(bits, w, u, MAX_BITS, budget_shift(bits, w, u, 0.2, MAX_BITS)) == 0.0  # the floor


def _graph(seed=0, n=60, f=12, c=3):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(n, f, generator=g) < 0.3).float()
    ei = torch.randint(0, n, (2, 200), generator=g)
    ei = torch.cat([ei, ei.flip(0)], dim=1)
    y = torch.randint(0, c, (n,), generator=g)
    perm = torch.randperm(n, generator=g)
    return GraphData(name="tiny", task="node", data=Data(x=x, edge_index=ei, y=y), graphs=None,
                     splits=[Split(train=perm[:30], val=perm[30:45], test=perm[45:])], num_features=f,
                     num_classes=c)


@pytest.mark.parametrize("method", ["a2q", "degree-aware"])
def test_projection_holds_the_budget_in_training(method):
    graph = _graph()
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch="gcn", in_dim=12, out_dim=3, hidden_dim=16, num_layers=3))
    quantize_(model, QuantConfig(method=method, target_bits=1.7, num_degree_buckets=8), graph.data)
    assert model._quant_projects and float(quant_penalty(model)) == 0.0
    avg = project_bits_(model, 1.7)
    assert avg == pytest.approx(quant_summary(model)["avg_bits"], abs=1e-6)
    weight_share = 1.0 / graph.data.num_nodes if method == "a2q" else 1.0  # one node / one bucket at most
    assert 1.7 - weight_share - 1e-9 <= avg <= 1.7 + 1e-9
    torch.manual_seed(0)
    fresh = build_model(ModelConfig(arch="gcn", in_dim=12, out_dim=3, hidden_dim=16, num_layers=3))
    res = train_one(fresh, graph, graph.splits[0], TrainConfig(epochs=5, quant=method, target_bits=1.7), seed=0,
                    progress=False)
    assert res.quant_summary["avg_bits"] <= 1.7 + 1e-9 and res.quant_summary["within_budget"]


def test_penalty_mode_and_graph_tasks_keep_the_penalty():
    graph = _graph()
    torch.manual_seed(0)
    model = build_model(ModelConfig(arch="gcn", in_dim=12, out_dim=3, hidden_dim=16))
    quantize_(model, QuantConfig(method="a2q", target_bits=1.7, bits_control="penalty"), graph.data)
    assert not model._quant_projects and float(quant_penalty(model)) > 0.0
    graph_model = build_model(ModelConfig(arch="gin", in_dim=12, out_dim=3, hidden_dim=16, pool="sum"))
    quantize_(graph_model, QuantConfig(method="a2q", target_bits=1.7))  # graph task: auto -> penalty
    assert not graph_model._quant_projects
    with pytest.raises(ValueError, match="bits_control='project' needs a node task"):
        quantize_(build_model(ModelConfig(arch="gin", in_dim=12, out_dim=3, hidden_dim=16, pool="sum")),
                  QuantConfig(method="a2q", target_bits=1.7, bits_control="project"))


def test_any_training_loop_holds_the_budget_through_the_optimizer_hook():
    graph = _graph(1)
    torch.manual_seed(1)
    model = build_model(ModelConfig(arch="gcn", in_dim=12, out_dim=3, hidden_dim=16))
    quantize_(model, QuantConfig(method="a2q", target_bits=2.3), graph.data)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)  # bits move by ~lr per step, the hook pulls them back
    attach_bit_budget(model, opt)
    d = graph.data
    for _ in range(4):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(d.x, d.edge_index), d.y).backward()
        opt.step()
        assert 2.3 - 1.0 / d.num_nodes - 1e-9 <= quant_summary(model)["avg_bits"] <= 2.3 + 1e-9
