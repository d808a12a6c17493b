"""The GCN .qgraph export: its contents (degree tables, both packed layouts, requant multipliers, the CSR), the
GCN-only rebuild, corrupted / truncated / missing files and manifests, schema versions, the pipeline step, and (slow)
the integer path's Cora test accuracy vs the A2Q fake-quant model it came from. What every architecture's export
must satisfy (round trip, bit-exact verify, tampered and missing arrays named, the CLI) is test_export_archs.py."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from arch_cases import export_fixture

from quant.archs.gcn.integer import gcn_forward_int
from quant.export import export_run, main
from quant.formats import adaptive_package, packing
from quant.formats.fixed_point import quantize_multiplier
from quant.qgraph import ExportError, load

exported = export_fixture("gcn")


def test_export_contents_are_consistent(exported):
    q = load(exported[0])
    n = q.manifest["dataset"]["num_nodes"]
    # degree table -> per-node values
    bucket = np.minimum(q["graph.in_degree"], q["layer1.degree_bits"].size - 1)
    np.testing.assert_array_equal(q["layer1.x_bits"], q["layer1.degree_bits"][bucket])
    np.testing.assert_array_equal(q["layer1.x_steps"], q["layer1.degree_step"][bucket])
    # both packed layouts decode to the codes
    packed = packing.PackedRows(payload=q["layer1.x_packed.payload"], bits=q["layer1.x_packed.bits"],
                                bit_offsets=q["layer1.x_packed.bit_offsets"],
                                group_byte_offsets=q["layer1.x_packed.group_byte_offsets"],
                                num_features=q["layer1.x_codes"].shape[1])
    np.testing.assert_array_equal(packing.unpack_rows(packed), q["layer1.x_codes"])
    words = adaptive_package.AdaptivePackageStream(
        words=q["layer1.x_ap.words"], bitmap=q["layer1.x_ap.bitmap"], first_node=q["layer1.x_ap.first_node"],
        first_value=q["layer1.x_ap.first_value"], num_values=q["layer1.x_ap.num_values"], num_nodes=n,
        num_features=q["layer1.x_codes"].shape[1])
    np.testing.assert_array_equal(adaptive_package.decode(words), q["layer1.x_codes"])
    # requant multipliers are quantize_multiplier of the step ratio (per node x per channel XW scale)
    ratio = q["layer0.x_steps"][:, None] * q["layer0.w_steps"][None, :] / q["layer0.xw_steps"][None, :]
    mult, shift = quantize_multiplier(ratio)
    np.testing.assert_array_equal(q["layer0.xw_mult"], mult)
    np.testing.assert_array_equal(q["layer0.xw_shift"], shift)
    # CSR of the GCN graph: one self loop per node
    assert q["graph.indptr"][-1] == q["graph.indices"].size and q["graph.indptr"].size == n + 1
    # the GCN-only rebuild gives the stored outputs bit-exactly too
    outs, logits = gcn_forward_int(q.to_quantized_gcn(), q["graph.edge_index"])
    np.testing.assert_array_equal(outs[0], q["layer0.out"])
    np.testing.assert_array_equal(logits, q["logits"])


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_corrupted_truncated_or_missing_array_names_it(exported, tmp_path):
    bad = _copy(exported[0], tmp_path / "bad.qgraph")
    f = bad / "layer1.x_steps.npy"
    raw = bytearray(f.read_bytes())
    raw[-3] ^= 0x40
    f.write_bytes(bytes(raw))
    with pytest.raises(ExportError, match=r"'layer1\.x_steps'.*SHA-256"):
        load(bad)
    trunc = _copy(exported[0], tmp_path / "trunc.qgraph")
    g = trunc / "layer0.w_codes.npy"
    g.write_bytes(g.read_bytes()[:-5])
    with pytest.raises(ExportError, match=r"'layer0\.w_codes'"):
        load(trunc)
    gone = _copy(exported[0], tmp_path / "gone.qgraph")
    (gone / "graph.indptr.npy").unlink()
    with pytest.raises(ExportError, match=r"'graph\.indptr'.*missing"):
        load(gone)
    broken = _copy(exported[0], tmp_path / "broken.qgraph")
    (broken / "manifest.json").write_text((broken / "manifest.json").read_text()[:200])
    with pytest.raises(ExportError, match="not valid JSON"):
        load(broken)


def test_schema_versions(exported, tmp_path):
    fut = _copy(exported[0], tmp_path / "future.qgraph")
    m = json.loads((fut / "manifest.json").read_text())
    m["schema_version"] = 99
    (fut / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ExportError, match="schema_version 99.*newer exporter"):
        load(fut)
    del m["arrays"]["layer1.xw_codes"]
    m["schema_version"] = 1
    (fut / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ExportError, match="layer1.xw_codes"):
        load(fut)  # never a silent partial load


def test_cli_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0 and "--run" in capsys.readouterr().out


@pytest.mark.slow
def test_cora_integer_accuracy_within_0p3_points_of_fake_quant(tmp_path):
    """Real short A2Q training on Cora (``python -m gnn.train``), export, and the issue's target."""
    run = tmp_path / "run"
    root = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "-m", "gnn.train", "--dataset", "cora", "--model", "gcn", "--quant", "a2q",
           "--target-bits", "1.7", "--seeds", "1", "--epochs", "60", "--run-dir", str(run), "--no-progress"]
    subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    q = load(export_run(run, tmp_path / "cora_gcn.qgraph"))
    q.verify()
    met = q.manifest["metrics"]
    assert met["test_acc_fake_quant"] > 0.6  # a trained model, not chance
    assert abs(met["test_acc_delta_pt"]) <= 0.3, met
    # the stored fake-quant accuracy is the checkpoint's own validation-selected test accuracy
    result = json.loads((run / "seed0_fold0" / "result.json").read_text())
    assert met["test_acc_fake_quant"] == pytest.approx(result["test_acc"], abs=1e-6)
    assert torch.is_tensor(torch.load(run / "seed0_fold0" / "best.pt", weights_only=True)["convs.0.bias"])


def test_pipeline_export_skips_other_models_and_needs_the_quantize_step(tmp_path, capsys):
    from pipeline import PipelineConfig, PipelineContext
    from pipeline.steps import export

    ctx = PipelineContext(PipelineConfig(run_dir=tmp_path, model="mlp"))
    export(ctx)
    assert "skipped" in capsys.readouterr().out and ctx.export_path is None
    with pytest.raises(FileNotFoundError, match="quantize"):
        export(PipelineContext(PipelineConfig(run_dir=tmp_path, model="gcn")))


def test_export_reloads_the_features_the_run_was_trained_on(tmp_path):
    from dataclasses import replace

    from gnn.data.loaders import load_dataset
    from gnn.experiment import run_experiment
    from gnn.presets import model_and_train_config
    from quant.convert import load_trained

    graph = load_dataset("cora", features="raw")
    model_cfg, train_cfg = model_and_train_config(graph, "gcn")
    run_experiment(graph, model_cfg, replace(train_cfg, epochs=2, quant="a2q", target_bits=4.0), [0],
                   run_dir=tmp_path, progress=False)
    assert json.loads((tmp_path / "config.json").read_text())["data"] == {"features": "raw", "split_seed": 0}
    trained = load_trained(tmp_path)
    assert trained.graph.info["features"] == "raw"
    assert torch.equal(trained.graph.data.x, graph.data.x)  # not the registry's row-normalized rows
