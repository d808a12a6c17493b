"""GIN .qgraph exports (quant.archs.gin.export): the per-channel hidden inputs and degree-table hidden activation, the
16-bit fixed-point hidden activation (round trip, tampering, storage), the CLI with and without the hidden quantizer,
and the pipeline that quantizes it. What every architecture's export must satisfy (round trip, bit-exact verify,
tampered and missing arrays named, refusal by the GCN-only consumers, the accelerator model and the pipeline's
simulation) is test_export_archs.py."""

import json

import numpy as np
import pytest
from arch_cases import cli_train_and_export, export_fixture, quantized_gin, rewrite, tiny_graph

from quant.archs.gin.integer import gin_forward_int
from quant.export import export_model
from quant.qgraph import ExportError, load

exported = export_fixture("gin")


def test_hidden_inputs_per_channel_and_hidden_activation_by_degree(exported):
    q = load(exported[0])
    m = q.manifest
    assert [(lay["x_scheme"], lay["x_step_scheme"]) for lay in m["layers"]] == [("input", "node"),
                                                                                ("channel", "channel")]
    assert [(lay["agg_scheme"], lay["hid_scheme"]) for lay in m["layers"]] == [("degree", "degree")] * 2
    assert "layer0.hid_degree_bits" in q.arrays and "layer1.x_packed_flat" in q.arrays
    st = m["metrics"]["storage"]
    assert [(s["layer"], s["tensor"]) for s in st["layers"]][:3] == [(0, "input"), (0, "aggregate"), (0, "hidden")]


def test_fixed_point_hidden_round_trip_and_tampering(tmp_path):
    graph = tiny_graph(5)
    model = quantized_gin(graph, "a2q", seed=5, quantize_mlp_hidden=False)
    q = load(export_model(model, graph, tmp_path / "fixed.qgraph"))
    q.verify()
    assert [lay["hid_scheme"] for lay in q.manifest["layers"]] == ["fixed", "fixed"]
    assert q["layer1.hid_codes"].dtype == np.int16 and np.abs(q["layer1.hid_codes"]).max() == 2**15 - 1
    outs, logits = gin_forward_int(q.integer_model(), q["graph.edge_index"])
    np.testing.assert_array_equal(logits, q["logits"])
    st = q.manifest["metrics"]["storage"]
    hidden = [r for r in st["layers"] if r["tensor"] == "hidden"]
    assert [(r["x_scheme"], r["avg_bits"], r["bits_table_bytes"]) for r in hidden] == [("fixed", 16.0, 0)] * 2
    assert all(r["feature_bytes"] == q["layer0.hid_codes"].size * 2 for r in hidden)
    assert st["learned_avg_bits_with_sign"] < 8  # the fixed-point hidden is not a learned bitwidth

    def tamper(arrays):
        arrays["layer0.hid_codes"].flat[5] += 1

    with pytest.raises(ExportError, match="'layer0.hid_codes'"):
        load(rewrite(q, tmp_path / "bad.qgraph", tamper)).verify()


def test_cli_exports_trained_gin_runs_with_and_without_the_hidden_quantizer(tmp_path):
    plain = cli_train_and_export(tmp_path, "gin", "plain")  # the grid's recipe: hidden activation in 16-bit fixed point
    assert [lay["hid_scheme"] for lay in plain.manifest["layers"]] == ["fixed", "fixed"]
    assert plain["layer0.hid_codes"].dtype == np.int16 and "layer0.hid_packed.payload" not in plain.arrays
    hidden_rows = [r for r in plain.manifest["metrics"]["storage"]["layers"] if r["tensor"] == "hidden"]
    assert all(r["feature_bytes"] == 2 * 2708 * plain["layer0.w1_codes"].shape[0] for r in hidden_rows)
    quantized = cli_train_and_export(tmp_path, "gin", "run", "--quantize-mlp-hidden")
    assert [lay["hid_scheme"] for lay in quantized.manifest["layers"]] == ["node", "node"]
    assert "layer0.hid_packed.payload" in quantized.arrays


def test_pipeline_quantizes_the_gin_hidden_activation_exports_and_simulates(tmp_path, capsys):
    from pipeline import main as pipeline

    ctx = pipeline(["--dataset", "cora", "--model", "gin", "--seeds", "1", "--epochs", "2", "--steps",
                    "train,quantize,export,simulate", "--run-dir", str(tmp_path), "--no-progress"])
    cfg = json.loads((tmp_path / "a2q" / "config.json").read_text())
    assert cfg["train"]["quantize_mlp_hidden"] is True
    q = load(ctx.export_path)
    assert q.arch == "gin" and ctx.export_path.name == "cora_gin.qgraph"
    assert "functional check ['bit-exact', 'bit-exact']" in capsys.readouterr().out and ctx.simulation is not None
