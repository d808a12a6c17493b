"""GIN .qgraph exports (quant.archs.gin.export): round trip, bit-exact recomputation, every packed stream decoded,
tampering named, required arrays, refusal by the GCN-only consumers, and the CLI on a real trained run."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from export_metrics import check_export_metrics

from quant.archs.gin import export as export_gin
from quant.qgraph import ExportError, load
from quant.export import export_model
from quant.qgraph.write import write_qgraph
from quant.archs.gin.integer import gin_forward_int

_spec = importlib.util.spec_from_file_location("_quant_test_integer_gin",
                                               Path(__file__).with_name("test_integer_gin.py"))
_gin_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gin_tests)  # tests are not a package (--import-mode=importlib)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    graph = _gin_tests.tiny_graph(4)
    model = _gin_tests.quantized_gin(graph, "degree-aware", seed=4)
    return export_model(model, graph, tmp_path_factory.mktemp("exp") / "tiny_gin.qgraph"), model, graph


def test_round_trip_recomputes_bit_exactly(exported):
    out, model, graph = exported
    q = load(out)
    q.verify()
    m = q.manifest
    assert q.arch == "gin" and m["integer_path"]["golden_model"] == "quant.archs.gin.integer"
    assert [(lay["x_scheme"], lay["x_step_scheme"]) for lay in m["layers"]] == [("input", "node"),
                                                                                ("channel", "channel")]
    assert [(lay["agg_scheme"], lay["hid_scheme"]) for lay in m["layers"]] == [("degree", "degree")] * 2
    assert set(export_gin.required_arrays(m)) <= set(q.arrays)
    assert "layer0.hid_degree_bits" in q.arrays and "layer1.x_packed_flat" in q.arrays
    outs, logits = gin_forward_int(export_gin.integer_model(q), q["graph.edge_index"])
    np.testing.assert_array_equal(outs[0], q["layer0.out"])
    np.testing.assert_array_equal(outs[0], q["layer1.x_codes"])
    np.testing.assert_array_equal(logits, q["logits"])
    check_export_metrics(q, model, graph, max_delta_pt=0.0, min_agreement=1.0)  # seed-fixed: every node agrees
    met = m["metrics"]
    st = met["storage"]
    assert st["all_in_bytes"] < st["fp32_all_in_bytes"]
    assert [(s["layer"], s["tensor"]) for s in st["layers"]][:3] == [(0, "input"), (0, "aggregate"), (0, "hidden")]
    assert st["learned_feature_bytes"] < st["learned_fp32_feature_bytes"]  # the per-node tensors are the learned ones


def test_fixed_point_hidden_round_trip_and_tampering(tmp_path):
    graph = _gin_tests.tiny_graph(5)
    model = _gin_tests.quantized_gin(graph, "a2q", seed=5, quantize_mlp_hidden=False)
    q = load(export_model(model, graph, tmp_path / "fixed.qgraph"))
    q.verify()
    assert [lay["hid_scheme"] for lay in q.manifest["layers"]] == ["fixed", "fixed"]
    assert q["layer1.hid_codes"].dtype == np.int16 and np.abs(q["layer1.hid_codes"]).max() == 2**15 - 1
    outs, logits = gin_forward_int(export_gin.integer_model(q), q["graph.edge_index"])
    np.testing.assert_array_equal(logits, q["logits"])
    st = q.manifest["metrics"]["storage"]
    hidden = [r for r in st["layers"] if r["tensor"] == "hidden"]
    assert [(r["x_scheme"], r["avg_bits"], r["bits_table_bytes"]) for r in hidden] == [("fixed", 16.0, 0)] * 2
    assert all(r["feature_bytes"] == q["layer0.hid_codes"].size * 2 for r in hidden)
    assert st["learned_avg_bits_with_sign"] < 8  # the fixed-point hidden is not a learned bitwidth
    meta = {k: v for k, v in q.manifest.items() if k not in ("format", "schema_version", "arrays")}
    arrays = {k: np.array(v) for k, v in q.arrays.items()}
    arrays["layer0.hid_codes"].flat[5] += 1
    with pytest.raises(ExportError, match="'layer0.hid_codes'"):
        load(write_qgraph(tmp_path / "bad.qgraph", arrays, meta)).verify()


def test_tampered_or_incomplete_exports_name_the_array(exported, tmp_path):
    q = load(exported[0])
    meta = {k: v for k, v in q.manifest.items() if k not in ("format", "schema_version", "arrays")}
    for name in ("layer0.hid_codes", "layer1.mid", "layer0.w1_signed"):
        arrays = {k: np.array(v) for k, v in q.arrays.items()}
        arrays[name].flat[3] = 1 - arrays[name].flat[3]
        bad = load(write_qgraph(tmp_path / f"{name}.qgraph", arrays, meta))
        with pytest.raises(ExportError, match=rf"'{name}'"):
            bad.verify()
    arrays = {k: v for k, v in q.arrays.items() if k != "layer1.bn_scale"}
    with pytest.raises(ExportError, match=r"layer1\.bn_scale"):
        load(write_qgraph(tmp_path / "incomplete.qgraph", arrays, meta))


def test_gcn_conversion_refuses_and_the_accelerator_model_simulates_a_gin_export(exported, tmp_path, capsys):
    from hw.simulate import main as simulate
    from pipeline import PipelineConfig, PipelineContext
    from pipeline.steps import rtl
    from pipeline.steps import simulate as simulate_step

    q = load(exported[0])
    with pytest.raises(ExportError, match=r"GIN export.*q.integer_model\(\)"):
        q.to_quantized_gcn()
    result = simulate([str(exported[0]), "--out", str(tmp_path)])
    assert result["functional_check"] == ["bit-exact", "bit-exact"]
    ctx = PipelineContext(PipelineConfig(run_dir=exported[0].parent, model="gin"), export_path=exported[0])
    simulate_step(ctx)
    rtl(ctx)
    assert capsys.readouterr().out.count("skipped") == 1 and ctx.simulation["speedup_vs_hygcn"] > 0
    assert ctx.rtl == {"skipped": "not a GCN"}


def test_cli_exports_trained_gin_runs_with_and_without_the_hidden_quantizer(tmp_path):
    root = Path(__file__).resolve().parents[2]

    def train_and_export(name, *extra):
        run, out = tmp_path / name, tmp_path / f"{name}.qgraph"
        cmd = [sys.executable, "-m", "gnn.train", "--dataset", "cora", "--model", "gin", "--quant", "a2q",
               "--target-bits", "4", "--seeds", "1", "--epochs", "3", "--run-dir", str(run), "--no-progress", *extra]
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
        res = subprocess.run([sys.executable, "-m", "quant.export", "--run", str(run), "--out", str(out)], cwd=root,
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
        assert "cora gin (a2q)" in res.stdout and "integer path" in res.stdout
        q = load(out)
        q.verify()
        assert json.loads((out / "manifest.json").read_text())["model"]["arch"] == "gin"
        assert q["layer0.x_codes"].shape == (2708, 1433) and q["logits"].shape == (2708, 7)
        check_export_metrics(q, max_delta_pt=0.5, min_agreement=0.98)  # 3 epochs: near-tied logits
        return q

    plain = train_and_export("plain")  # the grid's recipe: hidden activation in 16-bit fixed point
    assert [lay["hid_scheme"] for lay in plain.manifest["layers"]] == ["fixed", "fixed"]
    assert plain["layer0.hid_codes"].dtype == np.int16 and "layer0.hid_packed.payload" not in plain.arrays
    hidden_rows = [r for r in plain.manifest["metrics"]["storage"]["layers"] if r["tensor"] == "hidden"]
    assert all(r["feature_bytes"] == 2 * 2708 * plain["layer0.w1_codes"].shape[0] for r in hidden_rows)
    quantized = train_and_export("run", "--quantize-mlp-hidden")
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
