"""Training loop on a small synthetic graph: learns well above chance; CLI has --help."""

import subprocess
import sys
from dataclasses import replace

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


def _train_main(monkeypatch, *argv: str) -> None:
    """``python -m graphtransformer.train ARGV`` in this process (test_train_cli_help runs a real one)."""
    from graphtransformer import train

    monkeypatch.setattr(sys, "argv", ["graphtransformer.train", *argv])
    train.main()


def test_train_cli_quantized_run_reports_bits(tmp_path, monkeypatch):
    out_json = tmp_path / "gt.json"
    _train_main(monkeypatch, "--dataset", "cora", "--quant", "degree-aware", "--target-bits", "4", "--epochs", "3",
                "--patience", "3", "--layers", "2", "--hidden", "16", "--heads", "2", "--out", str(out_json))
    import json

    result = json.loads(out_json.read_text())
    assert result["quant"] == "degree-aware"
    bits = result["seeds"][0]["final_avg_bits"]
    assert 0.0 < bits <= 8.0  # learned per-degree feature bits, without the sign bit


def test_train_cli_refuses_distributed_quantization(monkeypatch, refusal):
    assert "single-process only" in refusal(lambda: _train_main(monkeypatch, "--quant", "a2q", "--cp", "2"))


def test_weight_average_matches_the_recurrence_and_swaps_back():
    """w_ema after k updates = d^k w0 + sum_i (1 - d) d^(k-i) w_i (float64 by hand); swapped() restores the weights."""
    from graphtransformer.training import WeightAverage

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).double()
    ema = WeightAverage(model, decay=0.8)
    expected = [p.detach().clone() for p in model.parameters()]
    for _ in range(4):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update()
        expected = [0.8 * e + 0.2 * p.detach() for e, p in zip(expected, model.parameters(), strict=True)]
    trained = [p.detach().clone() for p in model.parameters()]
    with ema.swapped():
        for p, e in zip(model.parameters(), expected, strict=True):
            torch.testing.assert_close(p, e, rtol=0, atol=1e-12)
    for p, t in zip(model.parameters(), trained, strict=True):
        assert torch.equal(p, t)


def _setup(gd, cfg):
    """(attention graph, PE, single-process rows, a builder of the seeded model) for ``cfg`` on ``gd``."""
    graph, pe = prepare(gd.data, cfg)

    def build():
        torch.manual_seed(0)
        return GraphTransformer(model_config(cfg, gd.num_features, gd.num_classes))

    return graph, pe, single_process_rows(graph), build


def test_training_with_weight_average_selects_on_the_averaged_weights():
    """The run with ema_decay trains the same raw weights as the run without, and its selected record is the best
    epoch of the averaged weights, recomputed here from the raw weights recorded after every step."""
    from graphtransformer.training import evaluate, is_better, make_optimizer, node_features

    gd = sbm_graph(80, num_classes=4, avg_degree=6, num_features=8, seed=0)
    cfg = TrainConfig(attention="sparse", num_layers=2, hidden_dim=16, num_heads=2, dropout=0.0, input_dropout=0.0,
                      optimizer="adamw", lr=1e-2, epochs=10, patience=10, ema_decay=0.7)
    _, pe, rows, build = _setup(gd, cfg)
    averaged_model = build()
    record = train_seed(averaged_model, gd.data, gd.splits[0], pe, rows, cfg, seed=0)

    raw_model = build()
    initial = [p.detach().clone() for p in raw_model.parameters()]
    opt = make_optimizer(raw_model, cfg)
    after_step = []
    step = opt.step
    opt.step = lambda: (step(), after_step.append([p.detach().clone() for p in raw_model.parameters()]))
    train_seed(raw_model, gd.data, gd.splits[0], pe, rows, replace(cfg, ema_decay=0.0), seed=0, opt=opt)
    for a, b in zip(averaged_model.parameters(), raw_model.parameters(), strict=True):
        assert torch.equal(a, b)  # the average never feeds back into training

    x = node_features(gd.data.x, rows)
    masks = {k: torch.zeros(gd.data.num_nodes, dtype=torch.bool) for k in ("val", "test")}
    masks["val"][gd.splits[0].val] = True
    masks["test"][gd.splits[0].test] = True
    average, best = initial, {"val_acc": -1.0, "val_loss": float("inf")}
    for epoch, weights in enumerate(after_step):
        average = [0.7 * a + 0.3 * w for a, w in zip(average, weights, strict=True)]
        with torch.no_grad():
            for p, a in zip(raw_model.parameters(), average, strict=True):
                p.copy_(a)
        ev = evaluate(raw_model, x, gd.data.y, pe, rows, masks)
        if is_better(*ev["val"], best):
            best = {"epoch": epoch, "val_acc": ev["val"][0], "val_loss": ev["val"][1], "test_acc": ev["test"][0]}
    assert record["epoch"] == best["epoch"] and record["test_acc"] == best["test_acc"]
    assert abs(record["val_loss"] - best["val_loss"]) < 1e-5


def test_ema_decay_out_of_range_is_refused():
    import pytest

    with pytest.raises(ValueError, match="ema_decay"):
        TrainConfig(ema_decay=1.0)


def test_train_cli_refuses_distributed_weight_average(monkeypatch, refusal):
    err = refusal(lambda: _train_main(monkeypatch, "--ema-decay", "0.9", "--cp", "2"))
    assert "--ema-decay is single-process only" in err


def test_label_smoothing_trains_on_smoothed_targets():
    """One SGD step (lr 1) of train_seed with label_smoothing = 0.2 equals the step on the hand-written loss
    -sum_c t_c log p_c, t = 0.8 one-hot + 0.2 / C, averaged over the training nodes."""
    from graphtransformer.training import node_features

    gd = sbm_graph(60, num_classes=3, avg_degree=5, num_features=6, seed=1)
    cfg = TrainConfig(attention="sparse", num_layers=1, hidden_dim=8, num_heads=2, dropout=0.0, input_dropout=0.0,
                      epochs=1, patience=1, label_smoothing=0.2)
    graph, pe, rows, build = _setup(gd, cfg)
    model = build()
    train_seed(model, gd.data, gd.splits[0], pe, rows, cfg, seed=0, opt=torch.optim.SGD(model.parameters(), lr=1.0))
    ref = build()
    train = gd.splits[0].train
    log_p = ref(node_features(gd.data.x, rows), graph, pe=pe, step=0)[train].log_softmax(-1)  # (T, C)
    target = torch.full_like(log_p, 0.2 / 3)
    target[torch.arange(train.numel()), gd.data.y[train]] += 0.8
    (-(target * log_p).sum() / train.numel()).backward()
    for p, r in zip(model.parameters(), ref.parameters(), strict=True):
        expected = r.detach() if r.grad is None else r.detach() - r.grad
        torch.testing.assert_close(p.detach(), expected, rtol=1e-5, atol=1e-6)
    assert any(r.grad is not None and r.grad.abs().sum() > 0 for r in ref.parameters())


def test_bad_label_smoothing_is_refused():
    import pytest

    with pytest.raises(ValueError, match="label_smoothing"):
        TrainConfig(label_smoothing=1.0)


def test_train_cli_refuses_zero_seeds(monkeypatch, capsys):
    import pytest

    from graphtransformer import train

    monkeypatch.setattr(sys, "argv", ["graphtransformer.train", "--seeds", "0"])
    with pytest.raises(SystemExit) as exc:
        train.main()
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("error: --seeds 0") and err.count("\n") == 1
