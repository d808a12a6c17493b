"""Training extensions (gnn/hooks.py): the trainer drives any registered extension at its fixed points, finds the
installed ones through the entry point group, and names the registered methods when asked for an unknown one."""

from dataclasses import dataclass, field

import pytest
import torch
from torch import nn

from gnn import hooks
from gnn.data.synthetic import sbm_graph
from gnn.models import ModelConfig, build_model
from gnn.trainer import TrainConfig, seed_everything, train_one


@dataclass(eq=False)
class Recorder:
    """A toy extension: an extra learned scale on the output (own lr), a penalty on it, a clamp after each step."""

    learns_bits: bool = False
    calls: list = field(default_factory=list)

    def validate(self, cfg):
        self.calls.append("validate")
        if cfg.target_bits > 100:
            raise ValueError("target_bits too high for the recorder")

    def prepare(self, model, graph, cfg):
        self.calls.append("prepare")
        model.scale = nn.Parameter(torch.ones(()))
        model.register_forward_hook(lambda m, args, out: out * m.scale)
        return model

    def param_groups(self, model, cfg):
        return [{"params": [model.scale], "lr": 0.5, "weight_decay": 0.0, "name": "scale"}]

    def penalty(self, model):
        return 0.1 * (model.scale - 1.0) ** 2

    def after_step(self, model):
        self.calls.append("after_step")
        with torch.no_grad():
            model.scale.clamp_(0.5, 2.0)

    def average_bits(self, model):
        return None

    def summary(self, model):
        return {"scale": float(model.scale.detach())}


@pytest.fixture
def registry(monkeypatch):
    """The registry with the installed extensions, restored afterwards."""
    hooks.registered()
    monkeypatch.setattr(hooks, "_registry", dict(hooks._registry))
    return hooks


def test_trainer_drives_a_registered_extension(registry):
    ext = Recorder()
    registry.register("recorder", ext)
    graph = sbm_graph(80, num_classes=3, avg_degree=5.0, num_features=8, seed=0)
    seed_everything(0)
    model = build_model(ModelConfig(arch="gcn", in_dim=graph.num_features, out_dim=graph.num_classes))
    cfg = TrainConfig(epochs=3, quant="recorder")
    r = train_one(model, graph, graph.splits[0], cfg, seed=0, progress=False)
    assert ext.calls == ["validate", "prepare"] + ["after_step"] * 3  # full batch: one step per epoch
    assert set(r.quant_summary) == {"scale"} and 0.5 <= r.quant_summary["scale"] <= 2.0
    with pytest.raises(ValueError, match="TrainConfig: target_bits too high for the recorder"):
        TrainConfig(quant="recorder", target_bits=101.0)


def test_unknown_method_lists_the_registered_ones(registry):
    registry.register("recorder", Recorder())
    with pytest.raises(ValueError, match=r"unknown quant 'int3'; valid: none, .*recorder"):
        TrainConfig(quant="int3")
    assert hooks.extension_for("none") is None and "recorder" in hooks.methods()


def test_register_refuses_fp32_incomplete_and_silent_replacement(registry):
    with pytest.raises(ValueError, match="FP32"):
        registry.register("none", Recorder())
    with pytest.raises(TypeError, match="TrainingExtension"):
        registry.register("half", object())
    registry.register("recorder", Recorder())
    with pytest.raises(ValueError, match="already registered"):
        registry.register("recorder", Recorder())
    registry.register("recorder", Recorder(), replace=True)


def test_empty_registry_says_how_to_install(monkeypatch):
    monkeypatch.setattr(hooks, "_registry", {})
    monkeypatch.setattr(hooks, "_entry_points_loaded", True)  # as if no entry point were installed
    with pytest.raises(ValueError, match="valid: none .*no training extension is registered"):
        hooks.get("a2q")


def test_summary_sees_forward_statistics_of_the_selected_model(registry, monkeypatch):
    """The summary runs after one evaluation pass of the restored best model (node tasks), so what forward passes
    record (the hardware cost's non-zero codes, for one) describes it and not the last epoch's model."""
    import gnn.trainer as trainer

    class Seen(Recorder):
        def prepare(self, model, graph, cfg):
            model = super().prepare(model, graph, cfg)
            model.register_forward_hook(lambda m, args, out: setattr(m, "seen", float(m.scale.detach())))
            return model

        def summary(self, model):
            return {"scale": float(model.scale.detach()), "seen": model.seen}

    registry.register("seen", Seen())
    monkeypatch.setattr(trainer, "_is_better", lambda val_acc, val_loss, best_acc, *a: best_acc < 0)  # epoch 1
    graph = sbm_graph(80, num_classes=3, avg_degree=5.0, num_features=8, seed=0)
    seed_everything(0)
    model = build_model(ModelConfig(arch="gcn", in_dim=graph.num_features, out_dim=graph.num_classes))
    r = train_one(model, graph, graph.splits[0], TrainConfig(epochs=4, quant="seen"), seed=0, progress=False)
    assert r.best_epoch == 1 and r.quant_summary["seen"] == r.quant_summary["scale"]
