"""Training loop on a small synthetic graph: learns well above chance; CLI has --help."""

import subprocess
import sys

import torch

from gnn.data.synthetic import sbm_graph
from graphtransformer.model import GraphTransformer
from graphtransformer.training import TrainConfig, model_config, prepare, single_process_rows, train_seed


def test_interleaved_model_learns_sbm():
    gd = sbm_graph(80, num_classes=4, avg_degree=6, num_features=8, seed=0)
    cfg = TrainConfig(attention="interleaved", num_layers=3, hidden_dim=16, num_heads=2, dropout=0.0, pe_dim=4,
                      input_dropout=0.0, sparse_residual=True, pe="laplacian", max_degree=64, optimizer="adamw",
                      lr=1e-2, epochs=25, patience=25)
    graph, pe = prepare(gd.data, cfg)
    torch.manual_seed(0)
    model = GraphTransformer(model_config(cfg, gd.num_features, gd.num_classes))
    record = train_seed(model, gd.data, gd.splits[0], pe, single_process_rows(graph), cfg, seed=0)
    assert record["val_acc"] > 0.6 and record["test_acc"] > 0.5  # chance = 0.25
    assert 0 <= record["epoch"] < 25


def test_train_cli_help():
    out = subprocess.run([sys.executable, "-m", "graphtransformer.train", "--help"], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "--attention" in out.stdout and "--cp" in out.stdout


def test_weight_decay_only_on_projection_matrices():
    from graphtransformer.training import decay_groups

    cfg = TrainConfig(hidden_dim=8, num_heads=2, pe_dim=2)
    model = GraphTransformer(model_config(cfg, 5, 3))
    decay, rest = decay_groups(model, 5e-4)
    names = {id(p): n for n, p in model.named_parameters()}
    assert decay["weight_decay"] == 5e-4 and rest["weight_decay"] == 0.0
    assert {names[id(p)] for p in decay["params"]} == {n for n, p in model.named_parameters()
                                                       if n.endswith("weight") and p.ndim == 2 and n != "degree.weight"}
    assert "degree.weight" in {names[id(p)] for p in rest["params"]}
    assert len(decay["params"]) + len(rest["params"]) == len(list(model.parameters()))


def test_train_cli_quantized_run_reports_bits(tmp_path):
    out_json = tmp_path / "gt.json"
    cmd = [sys.executable, "-m", "graphtransformer.train", "--dataset", "cora", "--quant", "degree-aware",
           "--target-bits", "4", "--epochs", "3", "--patience", "3", "--layers", "2", "--hidden", "16",
           "--heads", "2", "--out", str(out_json)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    result = json.loads(out_json.read_text())
    assert result["quant"] == "degree-aware"
    bits = result["seeds"][0]["final_avg_bits"]
    assert 0.0 < bits <= 8.0  # learned per-degree feature bits, without the sign bit


def test_train_cli_refuses_distributed_quantization():
    out = subprocess.run([sys.executable, "-m", "graphtransformer.train", "--quant", "a2q", "--cp", "2"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "single-process only" in out.stderr
