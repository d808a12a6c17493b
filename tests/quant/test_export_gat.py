"""GAT .qgraph exports (quant.archs.gat.export): round trip, bit-exact recomputation, every packed stream decoded,
tampering named, required arrays, refusal by the GCN-only consumers, and the CLI on a real trained run."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from export_metrics import check_export_metrics

from quant.archs.gat import export as export_gat
from quant.qgraph import ExportError, load
from quant.export import export_model
from quant.qgraph.write import write_qgraph
from quant.archs.gat.integer import gat_forward_int

_spec = importlib.util.spec_from_file_location("_quant_test_integer_gat",
                                               Path(__file__).with_name("test_integer_gat.py"))
_gat_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gat_tests)  # tests are not a package (--import-mode=importlib)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    graph = _gat_tests.tiny_graph(4)
    model = _gat_tests.quantized_gat(graph, "degree-aware", seed=4)
    return export_model(model, graph, tmp_path_factory.mktemp("exp") / "tiny_gat.qgraph"), model, graph


def test_round_trip_recomputes_bit_exactly(exported):
    out, model, graph = exported
    q = load(out)
    q.verify()
    m = q.manifest
    assert q.arch == "gat" and m["integer_path"]["golden_model"] == "quant.archs.gat.integer"
    assert [(lay["x_scheme"], lay["xw_scheme"], lay["heads"], lay["concat"]) for lay in m["layers"]] == [
        ("input", "degree", 4, True), ("degree", "degree", 4, True), ("degree", "degree", 2, False)]
    assert set(export_gat.required_arrays(m)) <= set(q.arrays)
    assert "layer1.xw_degree_bits" in q.arrays and "layer0.elu_thresholds" in q.arrays
    assert "layer2.elu_thresholds" not in q.arrays  # the last layer has no activation
    outs, logits = gat_forward_int(export_gat.integer_model(q), q["graph.edge_index"])
    np.testing.assert_array_equal(outs[0], q["layer1.x_codes"])
    np.testing.assert_array_equal(logits, q["logits"])
    check_export_metrics(q, model, graph, max_delta_pt=0.0, min_agreement=1.0)  # seed-fixed: every node agrees
    met = m["metrics"]
    st = met["storage"]
    assert st["all_in_bytes"] < st["fp32_all_in_bytes"]
    assert [(s["layer"], s["tensor"]) for s in st["layers"]][:2] == [(0, "input"), (0, "xw")]


def test_tampered_or_incomplete_exports_name_the_array(exported, tmp_path):
    q = load(exported[0])
    meta = {k: v for k, v in q.manifest.items() if k not in ("format", "schema_version", "arrays")}
    for name in ("layer0.exp_table", "layer1.coef", "layer0.elu_thresholds", "layer2.xw_codes"):
        arrays = {k: np.array(v) for k, v in q.arrays.items()}
        arrays[name].flat[3] = arrays[name].flat[3] + 1
        bad = load(write_qgraph(tmp_path / f"{name}.qgraph", arrays, meta))
        with pytest.raises(ExportError, match=rf"'{name}'"):
            bad.verify()
    arrays = {k: v for k, v in q.arrays.items() if k != "layer1.att_src_codes"}
    with pytest.raises(ExportError, match=r"layer1\.att_src_codes"):
        load(write_qgraph(tmp_path / "incomplete.qgraph", arrays, meta))


def test_gcn_consumers_refuse_a_gat_export(exported):
    from hw.simulate import main as simulate

    q = load(exported[0])
    with pytest.raises(ExportError, match=r"GAT export.*q.integer_model\(\)"):
        q.to_quantized_gcn()
    with pytest.raises(SystemExit, match="GAT export.*GCN, GIN and GraphSAGE layers"):
        simulate([str(exported[0]), "--no-check"])


def test_cli_exports_a_trained_gat_run(tmp_path):
    root = Path(__file__).resolve().parents[2]
    run = tmp_path / "run"
    train = [sys.executable, "-m", "gnn.train", "--dataset", "cora", "--model", "gat", "--quant", "a2q",
             "--target-bits", "4", "--seeds", "1", "--epochs", "3", "--run-dir", str(run), "--no-progress"]
    subprocess.run(train, cwd=root, check=True, capture_output=True)
    out = tmp_path / "cora_gat.qgraph"
    res = subprocess.run([sys.executable, "-m", "quant.export", "--run", str(run), "--out", str(out)], cwd=root,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "cora gat (a2q)" in res.stdout and "integer path" in res.stdout
    q = load(out)
    assert json.loads((out / "manifest.json").read_text())["model"]["arch"] == "gat"
    assert q["layer0.x_codes"].shape == (2708, 1433) and q["logits"].shape == (2708, 7)
    check_export_metrics(q, max_delta_pt=0.5, min_agreement=0.98)  # 3 epochs: near-tied logits
