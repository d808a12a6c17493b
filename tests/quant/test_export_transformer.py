"""Graph-transformer export: the quantized tensors of a trained model, written, loaded, verified, read by hw."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gnn.data.synthetic import sbm_graph
from gnn.ops import in_degree
from graphtransformer.model import GraphTransformer
from graphtransformer.quantize import train_quantized_seed
from graphtransformer.training import TrainConfig, model_config, prepare
from hw.tensor_traffic import feature_traffic
from hw.timing import decoder_stream_cycles
from quant.formats import adaptive_package
from quant.qat.a2q import A2QQuantizer
from quant.qat.config import QuantConfig
from quant.qat.degree_aware import degree_bucket
from quant.qgraph import ExportError, load

CFG = TrainConfig(attention="interleaved", num_layers=2, hidden_dim=16, num_heads=2, dropout=0.0, input_dropout=0.0,
                  pe="none", max_degree=0, epochs=3, patience=3)


def _export(tmp_path: Path, method: str):
    gd = sbm_graph(90, num_classes=3, avg_degree=5, num_features=10, seed=1)
    graph, pe = prepare(gd.data, CFG)
    torch.manual_seed(0)
    model = GraphTransformer(model_config(CFG, gd.num_features, gd.num_classes))
    out = tmp_path / f"gt_{method}.qgraph"
    record = train_quantized_seed(model, graph, pe, gd.data, gd.splits[0], CFG, 0,
                                  QuantConfig(method=method, target_bits=4), export_to=str(out), dataset="sbm")
    return gd, model, Path(record["export"])


@pytest.mark.parametrize("method", ["a2q", "degree-aware"])
def test_export_dequantizes_to_the_models_tensors(tmp_path, method):
    gd, model, path = _export(tmp_path, method)
    q = load(path)
    assert q.is_graph_transformer and q.manifest["model"]["quant_method"] == method
    q.verify()
    # An independent evaluation forward: every node quantizer's output equals codes * step of the export.
    outputs = {}
    hooks = [m.register_forward_hook(lambda mod, a, o, n=n: outputs.__setitem__(n, o.detach()))
             for n, m in model.named_modules() if isinstance(m, A2QQuantizer) and m.kind == "node"]
    graph, _ = prepare(gd.data, CFG)
    model.eval()
    with torch.no_grad():
        logits = model(gd.data.x.float(), graph)
    for h in hooks:
        h.remove()
    names = [p["name"] for p in q.manifest["points"]]
    assert len(names) == len(outputs) == 2 * 4  # per layer: input, query, key, value
    for name in names:
        base = f"point.{name}."
        deq = q[base + "x_codes"].astype(np.float64) * q[base + "x_steps"][:, None]
        want = outputs[name.removeprefix("model.")].double().numpy()
        np.testing.assert_allclose(deq, want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(q["logits"], logits.double().numpy(), rtol=1e-5, atol=1e-6)
    if method == "degree-aware":
        name = names[0]
        deg = in_degree(gd.data.edge_index, gd.data.num_nodes)
        table = np.asarray(q[f"point.{name}.degree_step"])
        buckets = len(table)
        idx = degree_bucket(deg, buckets, q.manifest["points"][0]["degree_bucket_scheme"]).numpy()
        np.testing.assert_array_equal(q[f"point.{name}.x_steps"], table[idx])


def test_hw_reads_the_exported_streams(tmp_path):
    _, _, path = _export(tmp_path, "a2q")
    q = load(path)
    rows = feature_traffic(path)
    assert [r["name"] for r in rows] == [p["name"] for p in q.manifest["points"]]
    for r in rows:
        base = f"point.{r['name']}."
        codes, bits = np.asarray(q[base + "x_codes"]), np.asarray(q[base + "x_bits"]).astype(np.int64)
        assert r["decoder_cycles"] == decoder_stream_cycles(adaptive_package.encode(codes, bits)) > 0
        assert r["packed_bytes"] < r["fp32_bytes"]


def test_corrupted_array_and_wrong_methods_are_refused(tmp_path):
    _, _, path = _export(tmp_path, "degree-aware")
    manifest = json.loads((path / "manifest.json").read_text())
    name = next(n for n in manifest["arrays"] if n.endswith("q_key.x_ap.words"))
    f = path / manifest["arrays"][name]["file"]
    raw = bytearray(f.read_bytes())
    raw[-1] ^= 0xFF
    f.write_bytes(bytes(raw))
    with pytest.raises(ExportError, match=name.replace(".", r"\.")):
        load(path)
    with pytest.raises(ExportError, match="Degree-Quant"):
        _export(tmp_path, "dq-int8")


def test_gcn_only_readers_refuse_a_transformer_export(tmp_path):
    _, _, path = _export(tmp_path, "a2q")
    with pytest.raises(ExportError, match="not a GCN integer path"):
        load(path).to_quantized_gcn()


def test_train_cli_export_needs_learned_bits(tmp_path, monkeypatch, refusal):
    import sys

    from graphtransformer import train

    monkeypatch.setattr(sys, "argv", ["graphtransformer.train", "--export", str(tmp_path / "x.qgraph")])
    assert "--quant a2q" in refusal(train.main)
