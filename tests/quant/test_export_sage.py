"""GraphSAGE .qgraph exports (quant.archs.sage.export): the degree tables of both quantized tensors, the input and the
neighbour mean. What every architecture's export must satisfy (round trip, bit-exact verify, tampered and missing
arrays named, refusal by the GCN-only consumers, the accelerator model and the pipeline, the CLI on a real trained
run) is test_export_archs.py."""

from arch_cases import export_fixture

from quant.qgraph import load

exported = export_fixture("sage")


def test_inputs_and_neighbour_means_take_degree_tables(exported):
    q = load(exported[0])
    layers = q.manifest["layers"]
    assert [lay["agg_scheme"] for lay in layers] == ["degree", "degree"]
    assert layers[0]["x_scheme"] == "input" and layers[1]["x_scheme"] == "degree"
    assert "layer0.agg_degree_bits" in q.arrays and "layer1.degree_step" in q.arrays
