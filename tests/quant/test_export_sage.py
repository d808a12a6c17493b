"""GraphSAGE .qgraph exports (quant.archs.sage.export): round trip, bit-exact recomputation, tampering named, required
arrays, refusal by the GCN-only consumers, and the CLI on a real trained run."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from export_metrics import check_export_metrics

from quant.archs.sage import export as export_sage
from quant.qgraph import ExportError, load
from quant.export import export_model
from quant.qgraph.write import write_qgraph
from quant.archs.sage.integer import sage_forward_int

_spec = importlib.util.spec_from_file_location("_quant_test_integer_sage",
                                               Path(__file__).with_name("test_integer_sage.py"))
_sage_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sage_tests)  # tests are not a package (--import-mode=importlib)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    graph = _sage_tests.tiny_graph(4)
    model = _sage_tests.quantized_sage(graph, "degree-aware", seed=4)
    return export_model(model, graph, tmp_path_factory.mktemp("exp") / "tiny_sage.qgraph"), model, graph


def test_round_trip_recomputes_bit_exactly(exported):
    out, model, graph = exported
    q = load(out)
    q.verify()
    m = q.manifest
    assert q.arch == "sage" and m["integer_path"]["golden_model"] == "quant.archs.sage.integer"
    assert [lay["agg_scheme"] for lay in m["layers"]] == ["degree", "degree"]
    assert m["layers"][0]["x_scheme"] == "input" and m["layers"][1]["x_scheme"] == "degree"
    assert set(export_sage.required_arrays(m)) <= set(q.arrays)
    assert "layer0.agg_degree_bits" in q.arrays and "layer1.degree_step" in q.arrays
    outs, logits = sage_forward_int(export_sage.integer_model(q), q["graph.edge_index"])
    np.testing.assert_array_equal(outs[0], q["layer0.out"])
    np.testing.assert_array_equal(logits, q["logits"])
    check_export_metrics(q, model, graph, max_delta_pt=0.0, min_agreement=1.0)  # seed-fixed: every node agrees
    met = m["metrics"]
    assert met["storage"]["all_in_bytes"] < met["storage"]["fp32_all_in_bytes"]


def test_tampered_or_incomplete_exports_name_the_array(exported, tmp_path):
    q = load(exported[0])
    meta = {k: v for k, v in q.manifest.items() if k not in ("format", "schema_version", "arrays")}
    for name in ("layer0.agg_codes", "layer1.acc"):
        arrays = {k: np.array(v) for k, v in q.arrays.items()}
        arrays[name].flat[7] += 1
        bad = load(write_qgraph(tmp_path / f"{name}.qgraph", arrays, meta))
        with pytest.raises(ExportError, match=rf"'{name}'"):
            bad.verify()
    arrays = {k: v for k, v in q.arrays.items() if k != "layer1.wr_codes"}
    with pytest.raises(ExportError, match=r"layer1\.wr_codes"):
        load(write_qgraph(tmp_path / "incomplete.qgraph", arrays, meta))


def test_gcn_conversion_refuses_and_the_accelerator_model_simulates_a_graphsage_export(exported, tmp_path, capsys):
    from hw.simulate import main as simulate

    q = load(exported[0])
    with pytest.raises(ExportError, match="GraphSAGE export"):
        q.to_quantized_gcn()
    result = simulate([str(exported[0]), "--out", str(tmp_path)])
    assert result["functional_check"] == ["bit-exact", "bit-exact"]
    out = capsys.readouterr().out
    assert "GraphSAGE, aggregation-first" in out and "edges without self loops" in out


def test_cli_exports_a_trained_graphsage_run(tmp_path):
    run = tmp_path / "run"
    root = Path(__file__).resolve().parents[2]
    train = [sys.executable, "-m", "gnn.train", "--dataset", "cora", "--model", "sage", "--quant", "a2q",
             "--target-bits", "4", "--seeds", "1", "--epochs", "3", "--run-dir", str(run), "--no-progress"]
    subprocess.run(train, cwd=root, check=True, capture_output=True)
    out = tmp_path / "cora_sage.qgraph"
    res = subprocess.run([sys.executable, "-m", "quant.export", "--run", str(run), "--out", str(out)], cwd=root,
                         check=True, capture_output=True, text=True)
    assert "cora sage (a2q)" in res.stdout and "integer path" in res.stdout
    q = load(out)
    assert json.loads((out / "manifest.json").read_text())["model"]["arch"] == "sage"
    assert q["layer0.x_codes"].shape == (2708, 1433) and q["logits"].shape == (2708, 7)
    check_export_metrics(q, max_delta_pt=0.5, min_agreement=0.98)  # 3 epochs: near-tied logits


def test_pipeline_simulates_a_graphsage_export_and_skips_its_rtl(exported, capsys):
    from pipeline import PipelineConfig, PipelineContext
    from pipeline.steps import rtl, simulate

    ctx = PipelineContext(PipelineConfig(run_dir=exported[0].parent, model="sage"), export_path=exported[0])
    simulate(ctx)
    rtl(ctx)
    out = capsys.readouterr().out
    assert "functional check ['bit-exact', 'bit-exact']" in out and ctx.simulation["speedup_vs_hygcn"] > 0
    assert out.count("skipped") == 1 and ctx.rtl == {"skipped": "not a GCN"}  # the RTL engine is GCN-only
