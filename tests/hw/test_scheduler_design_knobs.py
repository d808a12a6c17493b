"""The scheduler's design knobs that describe the RTL top: streamed requantization constants, edge record
bytes and single-buffered engines, each checked against the bytes and cycles it must add."""

from dataclasses import replace

import numpy as np
import pytest

from hw.config import ConfigError, mega, preset
from hw.requant_constants import output_stage_constant_bits, xw_constant_bits
from hw.scheduler import Simulator


def _run(workload, cfg, **layer_flags):
    wl = workload if not layer_flags else replace(
        workload, layers=tuple(replace(lt, **layer_flags) for lt in workload.layers))
    sim = Simulator(cfg)
    total = sim.run(wl)
    return sim, total, wl


def _useful(sim, tensor: str) -> int:
    return sum(v for k, v in sim.dram.stats.useful_bytes_by_tensor.items() if k == tensor)


@pytest.mark.parametrize("agg, bias_row", [(False, False), (True, True)])
def test_requant_constants_stream_every_nodes_constants_once(workload, agg, bias_row):
    base, base_total, _ = _run(workload, mega(), agg_requant=agg, bias_per_row=bias_row)
    sim, total, wl = _run(workload, replace(mega(), requant_constants=True), agg_requant=agg, bias_per_row=bias_row)
    for li, lt in enumerate(wl.layers):
        n, _, f_out = lt.dims
        xw = n * -(-xw_constant_bits(f_out) // 8)
        out = n * -(-output_stage_constant_bits(f_out, agg_requant=agg, bias_per_row=bias_row,
                                                out_requant=lt.out_bits is not None) // 8)
        assert _useful(sim, f"L{li}.xw_constants.constants") == xw
        assert _useful(sim, f"L{li}.out_constants.constants") == out
        assert _useful(base, f"L{li}.xw_constants.constants") == 0
    extra = sim.dram.stats.total_bytes - base.dram.stats.total_bytes
    assert extra >= sum(lt.dims[0] * xw_constant_bits(lt.dims[2]) // 8 for lt in wl.layers)
    assert total > base_total


def test_output_stage_constants_follow_the_layer():
    """q_aggregate and the next-layer requant carry per-lane mult + shift and one code width; a per-row bias is
    32 bits per lane; the last layer of a GCN without q_aggregate and with a shared bias streams none."""
    assert output_stage_constant_bits(7, agg_requant=False, bias_per_row=False, out_requant=False) == 0
    one = output_stage_constant_bits(16, agg_requant=False, bias_per_row=False, out_requant=True)
    assert one == 16 * (31 + 6) + 4
    both = output_stage_constant_bits(16, agg_requant=True, bias_per_row=True, out_requant=True)
    assert both == 2 * one + 16 * 32
    assert xw_constant_bits(16) == 16 * (31 + 6 + 4)


def test_edge_bytes_set_the_edge_stream(workload):
    four, _, _ = _run(workload, mega())
    eight, _, _ = _run(workload, replace(mega(), edge_bytes=8))
    edges = workload.indices.size
    # per layer: every edge once, a 4-byte pointer per row plus one per tile; only the edge records grow
    assert _useful(eight, "edges") - _useful(four, "edges") == 4 * edges * len(workload.layers)


def test_single_buffered_engines_are_slower(workload):
    small = replace(mega(), aggregation_buffer_kib=2)  # many tiles a layer, so that queues matter
    two, t2, _ = _run(workload, small)
    one, t1, _ = _run(workload, replace(small, engine_buffers=1))
    assert two.stats["load_x"].tiles > 4 and t1 > t2
    assert one.dram.stats.total_bytes == two.dram.stats.total_bytes  # same traffic, less overlap


def test_requant_constants_refused_on_an_aggregation_first_layer(workload):
    with pytest.raises(ConfigError, match="aggregation-first"):
        Simulator(replace(preset("hygcn"), requant_constants=True)).run(workload)


@pytest.mark.parametrize("kw, msg", [({"edge_bytes": 0}, "edge_bytes"), ({"engine_buffers": 0}, "engine_buffers"),
                                     ({"dram_row_miss_cycles": -1}, "dram_row_miss_cycles")])
def test_knob_ranges(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        replace(mega(), **kw)


def test_a_memory_without_row_misses_is_allowed_and_faster(workload):
    _, base, _ = _run(workload, mega())
    _, flat, _ = _run(workload, replace(mega(), dram_row_miss_cycles=0))
    assert flat < base


@pytest.mark.parametrize("method", ["a2q", "degree-aware"])
def test_constant_widths_hold_the_integer_paths_constants(tmp_path, arch_cases, method):
    """Every multiplier and shift of an exported GCN's integer path fits the widths the scheduler charges and the
    RTL packs."""
    from hw.requant_constants import MULT_BITS, SHIFT_BITS
    from quant.archs.gcn.integer import gcn_graph, layer_constants
    from quant.export import export_model
    from quant.qgraph import load

    graph = arch_cases.tiny_graph(2)
    q = load(export_model(arch_cases.quantized_model(graph, method, seed=2), graph, tmp_path / "t.qgraph"))
    model = q.to_quantized_gcn()
    g = gcn_graph(np.asarray(q["graph.edge_index"]), model.x_codes.shape[0])
    checked = 0
    for lay in model.layers:
        k = layer_constants(lay, g)
        for mult, shift in [(k.xw_mult, k.xw_shift), (k.agg_mult, k.agg_shift), (k.out_mult, k.out_shift)]:
            if mult is None:
                continue
            assert np.min(mult) >= 0 and np.max(mult) < 2**MULT_BITS
            assert np.min(shift) >= 0 and np.max(shift) < 2**SHIFT_BITS
            checked += 1
    assert checked >= len(model.layers) + 1  # every XW requant and at least one next-layer requant


def test_cli_refuses_constants_on_aggregation_first_layers_in_one_line(tmp_path, monkeypatch, capsys,
                                                                       make_workload):
    """``python -m hw.simulate`` with a config the workload's layers cannot use: one ``error:`` line, exit 2."""
    import hw.simulate as sim_mod

    monkeypatch.setattr(sim_mod, "workload_from_graph", lambda name, hidden, order: make_workload(n=120))
    cfg = tmp_path / "c.toml"
    cfg.write_text('[accelerator]\nbase = "hygcn"\nrequant_constants = true\n')
    with pytest.raises(SystemExit) as e:
        sim_mod.main(["rand", "--config", str(cfg), "--out", str(tmp_path)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "aggregation-first" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("hw_sim_*"))  # nothing half-written
