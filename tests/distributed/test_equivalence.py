"""THE correctness test: with fp32 exchange and no pipelining, P-rank training equals single-process full-graph
training with the same seed (losses and parameters within 1e-5 after 20 steps on Cora, GCN and GraphSAGE; GCN
with dense and with sparse COO input features).

Dropout is 0 in these runs: dropout masks are drawn per rank, so layouts would differ in their random draws.
The same spawn also runs compressed and pipelined configs, checked against the exact byte formula.
"""

import pytest
import torch
import torch.nn.functional as F

from distributed import codecs
from distributed.halo import ExchangeConfig
from distributed.launch import spawn
from distributed.runner import DistTrainConfig, train_many
from gnn.data.partition import cached_partition_nodes, halo_rows_total
from gnn.models import GNN, ModelConfig

STEPS = 20


def reference(cora, arch: str, cfg: DistTrainConfig):
    """Single-process full-graph training, the independent reference."""
    torch.manual_seed(cfg.seed)
    d, split = cora.data, cora.splits[0]
    model = GNN(ModelConfig(arch=arch, in_dim=cora.num_features, out_dim=cora.num_classes,
                            hidden_dim=cfg.hidden_dim, num_layers=cfg.num_layers, dropout=0.0))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(d.x, d.edge_index)[split.train], d.y[split.train])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model.state_dict()


def configs(world: int) -> list[DistTrainConfig]:
    base = DistTrainConfig(dataset="cora", num_parts=world, epochs=STEPS, dropout=0.0, eval_every=STEPS,
                           hidden_dim=16, num_layers=3)
    return [DistTrainConfig(**{**base.__dict__, "arch": "gcn", "sparse_input": False}),
            DistTrainConfig(**{**base.__dict__, "arch": "sage"}),
            DistTrainConfig(**{**base.__dict__, "arch": "gcn", "exchange": ExchangeConfig(
                codec="int1", pipeline=True, sync_every=4)}),
            DistTrainConfig(**{**base.__dict__, "arch": "sage", "exchange": ExchangeConfig(
                codec="int1-2c", delta=True, refresh_every=5)}),
            DistTrainConfig(**{**base.__dict__, "arch": "gcn", "sparse_input": True}),
            # the adaptor with a budget never reached: exactly config 2's fixed rule (its bound)
            DistTrainConfig(**{**base.__dict__, "arch": "gcn", "exchange": ExchangeConfig(
                codec="int1", pipeline=True, sync_every=4, staleness_budget=1e9)})]


def check_exact(cora, results, cfgs):
    assert [r["sparse_input"] for r in results[0]][0::4] == [False, True]
    for i, arch in ((0, "gcn"), (1, "sage"), (4, "gcn")):  # 4: sparse COO input features, same math
        ref_losses, ref_state = reference(cora, arch, cfgs[i])
        for rank_result in results:
            r = rank_result[i]
            losses = [h["loss"] for h in r["history"]]
            assert losses == pytest.approx(ref_losses, abs=1e-5), arch
            state = {k.replace(".conv.", ".", 1): v for k, v in r["state_dict"].items()}
            assert state.keys() == ref_state.keys()
            for k, v in ref_state.items():
                torch.testing.assert_close(state[k], v, atol=1e-5, rtol=0, msg=f"{arch} {k}")
        assert losses[-1] < losses[0] - 0.1  # it trained


def check_bytes(cora, results, cfgs, world):
    parts = cached_partition_nodes("cora", cora.data.edge_index, cora.data.num_nodes, world, "metis", 0)
    h = halo_rows_total(parts, cora.data.edge_index)
    for i in range(len(cfgs)):
        cfg, r = cfgs[i], results[0][i]
        assert r["setup_bytes"] == h * 4 * cora.num_features  # layer-0 input, fp32, once
        fwd = codecs.row_bytes(cfg.exchange.codec, cfg.hidden_dim)
        bwd = codecs.row_bytes(cfg.exchange.backward_codec, cfg.hidden_dim)
        expected = h * (cfg.num_layers - 1) * (fwd + bwd)
        if cfg.exchange.delta:  # fp32 refresh epochs
            refresh = {e for e in range(STEPS) if e % cfg.exchange.refresh_every == 0}
            per_epoch = [h * (cfg.num_layers - 1) * ((4 * cfg.hidden_dim if e in refresh else fwd) + bwd)
                         for e in range(STEPS)]
        else:
            per_epoch = [expected] * STEPS
        if cfg.exchange.pipeline:  # the very first step also fetches synchronously (nothing stale yet)
            per_epoch[0] += h * (cfg.num_layers - 1) * fwd
        assert [x["exchange_bytes"] for x in r["history"]] == per_epoch


def check_compressed_trains(results):
    for i in (2, 3):
        losses = [x["loss"] for x in results[0][i]["history"]]
        assert losses[-1] < losses[0] - 0.1
        assert all(results[0][i]["history"][-1][k] == results[1][i]["history"][-1][k]
                   for k in ("loss", "val_acc"))
    fixed, adaptive = results[0][2]["history"], results[0][5]["history"]
    assert [h["stale_halos"] for h in fixed] == [(e + 1) % 4 != 0 for e in range(STEPS)]
    for key in ("loss", "stale_halos", "exchange_bytes"):
        assert [h[key] for h in adaptive] == [h[key] for h in fixed], key
    assert all(h["drift"] > 0 for h in adaptive[2:])  # measured from the second step's rows on


def test_two_ranks_equal_single_process(cora):
    cfgs = configs(2)
    results = spawn(train_many, 2, cfgs)
    check_exact(cora, results, cfgs)
    check_bytes(cora, results, cfgs, 2)
    check_compressed_trains(results)


@pytest.mark.slow
def test_four_ranks_equal_single_process(cora):
    cfgs = configs(4)
    results = spawn(train_many, 4, cfgs)
    check_exact(cora, results, cfgs)
    check_bytes(cora, results, cfgs, 4)
