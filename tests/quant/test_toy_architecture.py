"""Adding an architecture is one package and two registrations: the toy one of ``tests/quant/toy_arch`` (a
node-wise linear layer) trains with A2Q, exports, reads back with numpy and verifies bit-exactly, through the same
entry points as the built-in architectures (the walkthrough of docs/quant.md)."""

import numpy as np
import pytest
from arch_cases import F_IN, C, tiny_graph
from export_metrics import check_export_metrics
from toy_arch import SPEC
from toy_arch.conv import CONV

from gnn.models import CONVS, ModelConfig, build_model, register_conv, unregister_conv
from gnn.trainer import TrainConfig, seed_everything, train_one
from quant import archs
from quant.export import export_model
from quant.qat.a2q import A2QQuantizer
from quant.qgraph import ExportError, load
from quant.qgraph.write import write_qgraph


@pytest.fixture
def toy():
    register_conv(CONV)
    archs.register(SPEC)
    yield
    unregister_conv(CONV.name)
    archs.unregister(SPEC.name)


@pytest.fixture
def trained(toy):
    graph = tiny_graph(3)
    seed_everything(0)
    model = build_model(ModelConfig(arch="toy", in_dim=F_IN, out_dim=C, hidden_dim=16, num_layers=2))
    train_one(model, graph, graph.splits[0], TrainConfig(quant="a2q", target_bits=3.0, epochs=20, device="cpu"),
              seed=0, progress=False)
    return model, graph


def test_a_registered_toy_trains_exports_and_verifies(trained, tmp_path):
    model, graph = trained
    hidden_input, weight = model.convs[1].q_input, model.convs[1].lin.q_weight
    assert isinstance(hidden_input, A2QQuantizer) and hidden_input.scheme == "node"  # SPEC.point_schemes
    assert isinstance(weight, A2QQuantizer) and weight.scheme == "row"
    q = load(export_model(model, graph, tmp_path / "toy.qgraph"))
    q.verify()
    assert q.arch == "toy" and q.manifest["integer_path"]["golden_model"] == "toy_arch.integer"
    assert [m["relu"] for m in q.manifest["layers"]] == [True, False]
    check_export_metrics(q, model, graph, max_delta_pt=2.0, min_agreement=0.97)


def test_a_toy_export_is_checked_like_any_other(trained, tmp_path):
    model, graph = trained
    q = load(export_model(model, graph, tmp_path / "toy.qgraph"))
    meta = {k: v for k, v in q.manifest.items() if k not in ("format", "schema_version", "arrays")}
    arrays = {k: np.array(v) for k, v in q.arrays.items()}
    arrays["logits"].flat[3] += 1.0
    with pytest.raises(ExportError, match="'logits'"):
        load(write_qgraph(tmp_path / "tampered.qgraph", arrays, meta)).verify()
    with pytest.raises(ExportError, match="layer1.w_codes"):  # required arrays come from the toy's reader
        load(write_qgraph(tmp_path / "short.qgraph", {k: v for k, v in arrays.items() if k != "layer1.w_codes"},
                          meta))


def test_unregistering_removes_the_toy_everywhere(toy, tmp_path):
    unregister_conv("toy")
    archs.unregister("toy")
    assert "toy" not in CONVS and "toy" not in archs.ARCHS
    with pytest.raises(ValueError, match="unknown arch 'toy'"):
        ModelConfig(arch="toy", in_dim=F_IN, out_dim=C)
    with pytest.raises(ValueError, match="unknown architecture 'toy'"):
        archs.spec("toy")
