"""A trained-style quant export (per-channel XW steps) drives the cycle model, bit-exact on every layer."""

import pytest

from hw.config import preset
from hw.report import run_simulation
from hw.workload import workload_from_export
from quant.export import export_model
from quant.qgraph import load


@pytest.mark.parametrize("method", ["a2q", "degree-aware"])
def test_export_simulates_bit_exact(tmp_path, arch_cases, method):
    helpers = arch_cases
    graph = helpers.tiny_graph(1)
    model = helpers.quantized_model(graph, method, seed=1)
    path = export_model(model, graph, tmp_path / "tiny.qgraph")
    wl = workload_from_export(str(path))
    assert wl.bits_source.startswith("export")
    for layer in wl.layers:
        assert layer.xw_bits.shape == (graph.data.num_nodes,)  # per-node rows, whatever the XW granularity
    result = run_simulation(wl, preset("mega"), check=True)
    assert result["functional_check"] == ["bit-exact"] * len(wl.layers)
    assert result["total_cycles"] > 0
    again = workload_from_export(load(path))  # an already loaded export gives the same workload
    assert again.name == wl.name and (again.indices == wl.indices).all()
    assert all((a.x_codes == b.x_codes).all() for a, b in zip(again.layers, wl.layers, strict=True))
