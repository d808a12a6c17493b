"""Presets: rules on the data (GraphSAGE's learning rate is halved on dense inputs), the learned-bit recipe on node
tasks only, and the CLI names the preset in force."""

import torch
from torch_geometric.data import Data

from gnn.data.loaders import GraphData, load_dataset
from gnn.data.splits import Split
from gnn.presets import DENSE_INPUT_DENSITY, describe, feature_density, model_and_train_config


def graph(density: float, name: str = "my-graph", sparse: bool = False) -> GraphData:
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(50, 40, generator=g) < density).float()
    idx = torch.arange(50)
    return GraphData(name=name, task="node", data=Data(x=x.to_sparse() if sparse else x,
                                                       edge_index=torch.stack([idx, idx.roll(1)]),
                                                       y=torch.zeros(50, dtype=torch.long)),
                     graphs=None, splits=[Split(train=idx[:10], val=idx[10:20], test=idx[20:])], num_features=40,
                     num_classes=2)


def test_sage_learning_rate_follows_input_density(cora):
    dense, sparse = graph(0.35), graph(0.01)
    assert feature_density(dense) >= DENSE_INPUT_DENSITY > feature_density(sparse)
    assert feature_density(graph(0.35, sparse=True)) == feature_density(dense)
    assert model_and_train_config(dense, "sage")[1].lr == 0.005
    assert model_and_train_config(sparse, "sage")[1].lr == 0.01
    assert model_and_train_config(graph(0.35, name="amazon-computers"), "sage")[1].lr == 0.005  # same as by name
    assert model_and_train_config(cora, "sage")[1].lr == 0.01
    assert model_and_train_config(dense, "gcn")[1].lr == 0.01  # only GraphSAGE's root weights diverged


def test_learned_bit_preset_on_node_tasks_only(cora):
    fp32_model, fp32_train = model_and_train_config(cora, "gcn")
    model, train = model_and_train_config(cora, "gcn", "a2q")
    assert (fp32_model.hidden_dim, model.hidden_dim) == (16, 64)
    assert (train.quant, train.weight_bits, train.xw_bits, train.bits_control) == ("a2q", 8, 8, "project")
    assert train.epochs == fp32_train.epochs and model.dropout == fp32_model.dropout
    gat_model = model_and_train_config(cora, "gat", "a2q")[0]
    assert (gat_model.hidden_dim, gat_model.heads) == (8, 8)  # 64 channels over 8 heads already
    sage = model_and_train_config(cora, "sage", "degree-aware")[1]
    assert (sage.weight_bits, sage.xw_bits) == (8, 4)  # GraphSAGE has no per-channel XW point
    dq_model, dq_train = model_and_train_config(cora, "gcn", "dq-int4")
    assert dq_model == fp32_model and dq_train.quant == "dq-int4" and dq_train.weight_bits == fp32_train.weight_bits
    mutag = load_dataset("mutag")
    graph_train = model_and_train_config(mutag, "gin", "a2q")[1]
    assert graph_train.bits_control == "auto" and graph_train.weight_bits == fp32_train.weight_bits
    text = describe(cora, "gcn", "a2q")
    assert "hidden_dim 64" in text and "bits_control project" in text and "weight_bits 8" in text
    assert "for " not in describe(cora, "gcn")  # FP32: nothing changed


def test_cli_names_the_preset_and_refuses_a_penalty_weight_it_would_ignore(tmp_path, capsys, refusal):
    from gnn.train import main

    base = ["--dataset", "cora", "--model", "gcn", "--quant", "a2q", "--target-bits", "1.7", "--seeds", "1",
            "--epochs", "2", "--no-progress", "--run-dir"]
    assert "add --bits-control penalty" in refusal(lambda: main([*base, str(tmp_path / "a"), "--penalty-weight", "25"]))
    assert not (tmp_path / "a").exists()
    main([*base, str(tmp_path / "b"), "--penalty-weight", "25", "--bits-control", "penalty"])
    assert capsys.readouterr().out.startswith("preset (gnn/presets.py): gcn on cora: hidden 64")
