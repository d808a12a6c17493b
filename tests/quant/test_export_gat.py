"""GAT .qgraph exports (quant.archs.gat.export): heads, the attention arrays (degree-table projected features, ELU
thresholds but in the last layer), and the accelerator model refusing a GAT export. What every architecture's export
must satisfy (round trip, bit-exact verify, every packed stream decoded, tampered and missing arrays named, refusal
by the GCN conversion, the CLI on a real trained run) is test_export_archs.py."""

import pytest
from arch_cases import export_fixture

from quant.qgraph import load

exported = export_fixture("gat")


def test_heads_and_attention_arrays(exported):
    q = load(exported[0])
    m = q.manifest
    assert [(lay["x_scheme"], lay["xw_scheme"], lay["heads"], lay["concat"]) for lay in m["layers"]] == [
        ("input", "degree", 4, True), ("degree", "degree", 4, True), ("degree", "degree", 2, False)]
    assert "layer1.xw_degree_bits" in q.arrays and "layer0.elu_thresholds" in q.arrays
    assert "layer2.elu_thresholds" not in q.arrays  # the last layer has no activation
    assert [(s["layer"], s["tensor"]) for s in m["metrics"]["storage"]["layers"]][:2] == [(0, "input"), (0, "xw")]


def test_accelerator_model_refuses_a_gat_export(exported):
    from hw.simulate import main as simulate

    with pytest.raises(SystemExit, match="GAT export.*GCN, GIN and GraphSAGE layers"):
        simulate([str(exported[0]), "--no-check"])
