"""GIN and GraphSAGE exports on the accelerator model (hw/aggregate_first.py): bit-exact on every preset, the layer
CSR and passes the golden models define, combination cycles equal to a closed form computed from the exported
codes, the roofline below the simulation, and the functional check catching a wrong intermediate."""

from dataclasses import replace

import numpy as np
import pytest

from hw.aggregate_first import AggregateFirstLayer
from hw.analytic import roofline
from hw.combination import bitserial_cycles
from hw.config import ablation_variants, mega, preset
from hw.functional import FunctionalMismatch, check_workload
from hw.report import run_simulation
from hw.scheduler import Simulator, tile_nodes
from hw.timing import requant_cycles
from hw.workload import workload_from_export
from quant.export import export_model
from quant.qgraph import load


@pytest.fixture(scope="module")
def exports(tmp_path_factory, arch_cases):
    gin = convert = arch_cases
    root = tmp_path_factory.mktemp("agg_first")
    graph = gin.tiny_graph(6)
    models = {"gin": gin.quantized_gin(graph, "degree-aware", seed=6),
              "gin_fixed_hidden": gin.quantized_gin(graph, "a2q", seed=6, quantize_mlp_hidden=False),
              "sage": convert.quantized_model(graph, "a2q", seed=6, arch="sage")}
    return {k: export_model(m, graph, root / f"{k}.qgraph") for k, m in models.items()}, graph


@pytest.mark.parametrize("name", ["gin", "gin_fixed_hidden", "sage"])
def test_every_preset_simulates_bit_exact_and_aggregation_first(exports, name):
    paths, graph = exports
    wl = workload_from_export(str(paths[name]))
    n, e = graph.data.num_nodes, graph.data.edge_index.shape[1]
    assert all(isinstance(lt, AggregateFirstLayer) for lt in wl.layers)
    assert wl.num_edges == (e + n if name.startswith("gin") else e)  # GIN sums a self loop, GraphSAGE does not
    configs = {**{k: preset(k) for k in ("mega", "hygcn", "gcnax")}, **ablation_variants()}
    for cfg in configs.values():
        r = run_simulation(wl, cfg)
        assert r["functional_check"] == ["bit-exact"] * len(wl.layers), cfg.name
        assert r["total_cycles"] >= roofline(wl, cfg)["total_lower_bound"], cfg.name
        # aggregation-first on a combination-first preset too: no XW stream, no Condense-Edge pass
        assert not any(".xw" in k for k in r["dram"]["bytes_by_tensor"]), cfg.name
        assert r["stages"]["writeback_c"]["tiles"] == 0 and r["stages"]["condense"]["busy_cycles"] == 0
        assert not any(k.split(".")[1] in ("agg", "hid") for k in r["dram"]["bytes_by_tensor"] if "." in k)
    assert r["workload"]["layers"] == [lt.dims for lt in wl.layers]


def test_passes_follow_the_golden_models(exports):
    paths, _ = exports
    gin, fixed, sage = (workload_from_export(str(paths[k])) for k in ("gin", "gin_fixed_hidden", "sage"))
    assert [cp.name for cp in gin.layers[0].passes] == ["aggregate @ W1", "hidden @ W2"]
    assert [cp.requant_after for cp in gin.layers[0].passes] == [True, False]
    assert [cp.name for cp in sage.layers[0].passes] == ["aggregate @ W_neigh", "input @ W_root"]
    assert np.array_equal(sage.layers[0].passes[1].codes, sage.layers[0].x_codes)
    assert np.all(fixed.layers[0].passes[1].bits == 16) and np.all(gin.layers[0].passes[1].bits <= 8)
    assert "16-bit fixed-point hidden" in fixed.bits_source and "16-bit" not in gin.bits_source
    q = load(paths["gin"])
    assert np.array_equal(gin.layers[1].x_codes, q["layer0.out"])  # layers chain through the exported outputs
    assert np.all(gin.layers[1].x_bits == q["layer1.x_bits"].max())  # the per-channel input, one width per node


@pytest.mark.parametrize("name", ["gin_fixed_hidden", "sage"])
def test_combination_cycles_equal_the_closed_form_from_the_exported_codes(exports, name):
    paths, _ = exports
    q = load(paths[name])
    wl = workload_from_export(q)
    cfg = replace(mega(), aggregation_buffer_kib=1)  # small tiles: several per layer
    r = run_simulation(wl, cfg, check=False)
    want = 0
    for li, lt in enumerate(wl.layers):
        p = f"layer{li}."
        n, f_in, _ = lt.dims
        # independent of the workload's passes: the exported arrays and the golden models' definitions
        if name == "sage":
            inputs = [(q[p + "agg_codes"], q[p + "agg_bits"], q[p + "wn_codes"].shape[0], False),
                      (q[p + "x_codes"], q[p + "x_bits"], q[p + "wr_codes"].shape[0], False)]
        else:
            inputs = [(q[p + "agg_codes"], q[p + "agg_bits"], q[p + "w1_codes"].shape[0], True),
                      (q[p + "hid_codes"], q[p + "hid_bits"], q[p + "w2_codes"].shape[0], False)]
        tn = tile_nodes(cfg, f_in)
        for lo in range(0, n, tn):
            hi = min(n, lo + tn)
            for codes, bits, f_out, requant in inputs:
                work = int((np.count_nonzero(codes[lo:hi], axis=1) * bits[lo:hi].astype(np.int64)).sum())
                want += bitserial_cycles(cfg, work, f_out)
                want += requant_cycles((hi - lo) * f_out) // cfg.num_requant_units if requant else 0
    assert r["stages"]["combination"]["busy_cycles"] == want


def test_weights_over_the_weight_buffer_stream_once_per_batch_of_tiles(tmp_path, arch_cases):
    """Weights that do not fit are re-read once per batch of tiles whose matmul inputs fit the combination buffer
    together (not once per tile); counted here from the exported arrays alone."""
    gin = arch_cases
    graph = gin.tiny_graph(7)
    q = load(export_model(gin.quantized_gin(graph, "a2q", seed=7, hidden=64), graph, tmp_path / "wide.qgraph"))
    wl = workload_from_export(q)
    cfg = replace(mega(), weight_buffer_kib=1, aggregation_buffer_kib=1, combination_buffer_kib=1)
    r = run_simulation(wl, cfg)
    assert r["functional_check"] == ["bit-exact", "bit-exact"]
    useful, batches = 0, []
    for li in range(2):
        p = f"layer{li}."
        w1, w2, agg, hid = (q[p + k] for k in ("w1_codes", "w2_codes", "agg_codes", "hid_codes"))
        w_bytes = -(-w1.size * 4 // 8) + -(-w2.size * 4 // 8)
        staged = (-(-agg.shape[1] * q[p + "agg_bits"].astype(np.int64) // 8)
                  - (-hid.shape[1] * q[p + "hid_bits"].astype(np.int64) // 8))  # (N,) packed matmul inputs
        tn = tile_nodes(cfg, agg.shape[1])
        tiles = -(-agg.shape[0] // tn)
        if w_bytes <= 1024:
            useful += w_bytes
            continue
        per_tile = max(int(staged[lo:lo + tn].sum()) for lo in range(0, agg.shape[0], tn))
        batches.append(1024 // per_tile)
        useful += -(-tiles // batches[-1]) * w_bytes
    assert batches and all(1 < b < 20 for b in batches)  # the case exercised: batched, several batches
    assert r["dram"]["bytes_by_tensor"]["weights"] >= useful  # moved bytes include the access granularity
    sim = Simulator(cfg)
    sim.run(wl)
    assert sim.dram.stats.useful_bytes_by_tensor["weights"] == useful


def test_functional_check_names_a_wrong_pass_input_or_output(exports):
    paths, _ = exports
    wl = workload_from_export(str(paths["gin"]))
    lt = wl.layers[1]
    hidden = lt.passes[1].codes.copy()
    hidden[3, 2] += 1
    bad = replace(wl, layers=(wl.layers[0], replace(lt, passes=(lt.passes[0], replace(lt.passes[1], codes=hidden)))))
    with pytest.raises(FunctionalMismatch, match="layer 1: input of combination pass 'hidden @ W2'.*node 3, feature 2"):
        check_workload(bad)
    out = lt.out_codes.copy()
    out[0, 1] += 1
    with pytest.raises(FunctionalMismatch, match="layer 1: integer output"):
        check_workload(replace(wl, layers=(wl.layers[0], replace(lt, out_codes=out))))
    assert check_workload(wl) == ["bit-exact", "bit-exact"]
    assert check_workload(wl, max_macs=1) == ["stream", "stream"]  # too large to recompute: the stream is checked


def test_cli_refuses_dataset_flags_with_an_export(exports, capsys):
    from hw.simulate import main as simulate

    paths, _ = exports
    for flags in (["--order", "metis"], ["--hidden", "64"]):
        with pytest.raises(SystemExit):
            simulate([str(paths["sage"]), *flags, "--no-check"])
        assert "an export keeps its trained widths and node order" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        simulate(["cora", "--hidden", "0"])
    assert "must be >= 1" in capsys.readouterr().err


def test_unknown_arch_is_refused():
    with pytest.raises(ValueError, match="valid: gin, sage"):
        AggregateFirstLayer(arch="gat", x_codes=np.zeros((2, 2)), x_bits=np.ones(2), passes=(),
                            out_codes=np.zeros((2, 2)), out_bits=None, w_bits=4, golden=None)
