"""hw/rtl/accel_top.v runs whole GCN layers from a memory image: bit-exact with quant.archs.gcn.integer (and the
export's own outputs) and cycle-exact, per phase, with hw.timing.accel_top_layer_cycles; and the CLI
``python -m hw.rtl.run`` with its errors.

Fast: random layers of every output-stage configuration (and an all-zero input) on one small build, both layers
of a tiny GCN export through the CLI. Slow: both layers of a Cora GCN trained and exported in this session.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from workload import random_gcn_layer

from hw.rtl import run as rtl_run
from hw.rtl.tile import SOURCES as ENGINE_SOURCES
from hw.rtl.top import (
    SOURCES,
    LayerMismatch,
    TopParams,
    build_image,
    check_layer,
    model_cycles,
    params_for,
    plan_comb_rows,
    plan_rows,
    rtl_phases,
    simulate_layer,
)
from hw.timing import accel_top_layer_cycles, layer_engine_cycles

QUANT_TESTS = Path(__file__).resolve().parents[2] / "quant"
ICARUS_FAST = ("test_accel_top_random_layers", "test_accel_top_runs_wait_for_the_writer", "test_run_cli_tiny_export",
               "test_run_cli_names_a_mismatch")
CONFIGS = [  # xw_scheme, q_aggregate, bias, relu, last layer (as test_layer_engine)
    ("node", False, True, True, False),
    ("channel", True, True, False, True),
    ("node", True, False, True, False),
    ("channel", False, False, False, True),
]
SMALL = {"max_nodes": 16, "max_rows": 8, "max_pkgs": 64, "max_words": 64, "max_edges": 64, "max_copies": 24,
         "latency": 20}


def _random_layer(seed: int, config, n: int = 40):
    scheme, agg, bias, relu, last = config
    return random_gcn_layer(seed, n, 12, 5, 60, psum_bits=32, frac_bits=14, xw_scheme=scheme, agg=agg, bias=bias,
                            relu=relu, last=last)


def test_accel_top_lint(lint_rtl, rtl_sources):
    top = [*ENGINE_SOURCES, "accel_top"]
    lint_rtl(rtl_sources(*top), "accel_top")
    lint_rtl(rtl_sources(*top), "accel_top",  # the Cora layer-0 build
             {"LANES": 64, "MAX_NODES": 256, "NODE_BITS": 8, "MAX_FEATURES": 1433, "FEAT_BITS": 11, "W_BITS": 8,
              "PSUM_BITS": 32, "FRAC_BITS": 14, "MAX_ROWS": 64, "MAX_PKGS": 2048, "MAX_WORDS": 2048,
              "MAX_EDGES": 2048, "MAX_COPIES": 2048, "ADDR_BITS": 22})
    lint_rtl(rtl_sources(*SOURCES), "accel_sim")


def test_plan_rows_covers_every_row_within_the_limits():
    _, _, graph = _random_layer(0, CONFIGS[0])
    indptr, indices, _ = graph
    tiles = plan_rows(graph, 12, 5, 20)
    np.testing.assert_array_equal(np.concatenate(tiles), np.arange(indptr.shape[0] - 1))
    for rows in tiles:
        members = set(rows.tolist()) | set(np.concatenate([indices[indptr[r]:indptr[r + 1]] for r in rows]).tolist())
        assert len(members) <= 12 and rows.size <= 5
        assert sum(max(int(indptr[r + 1] - indptr[r]), 1) for r in rows) <= 20
    with pytest.raises(ValueError, match="local nodes"):
        plan_rows(graph, 2, 5, 20)


def test_plan_comb_rows_covers_every_row_within_the_limits():
    copies = np.asarray([1, 3, 2, 2, 5, 1, 1])
    tiles = plan_comb_rows(7, copies, max_rows=3, max_copies=5)
    np.testing.assert_array_equal(np.concatenate(tiles), np.arange(7))
    assert [t.tolist() for t in tiles] == [[0, 1], [2, 3], [4], [5, 6]]
    with pytest.raises(ValueError, match="row 4 is read by 5 aggregation tiles; a combination tile writes 4"):
        plan_comb_rows(7, copies, max_rows=3, max_copies=4)


def test_params_refuse_what_the_rtl_asserts_naming_the_limit():
    common = {"w_bits": 8, "psum_bits": 32, "frac_bits": 14}
    assert TopParams(lanes=64, max_features=6805, **common).verilog()["FEAT_BITS"] == 13  # Coauthor CS's layer 0
    assert TopParams(lanes=64, max_features=65536, **common).verilog()["FEAT_BITS"] == 16  # the widest that fits
    with pytest.raises(ValueError, match="65537 input features; .* at most 16 bits .*65536 features"):
        TopParams(lanes=64, max_features=65537, **common)
    with pytest.raises(ValueError, match="128 output channels; the RTL top has 1..64 lanes"):
        TopParams(lanes=128, max_features=64, **common)
    with pytest.raises(ValueError, match="max_rows=9"):
        TopParams(lanes=4, max_features=64, max_nodes=8, max_rows=9, **common)


def test_top_cycle_formula_pieces():
    """Reads cost latency + beats; a tile's writes overlap the next tile's load, and a run waits for the writer:
    a combination tile without values runs 1 cycle, an aggregation tile the engine's aggregation tail + 1."""
    deg = [1, 3]
    run = layer_engine_cycles(None, deg) + 1
    head = (7 + 1) + (7 + 10)
    # short writes: hidden behind the next load
    got = accel_top_layer_cycles(10, [(30, None, 6), (20, None, 5)], [(50, deg, 4), (40, deg, 3)], latency=7)
    assert got == {"total": head + (7 + 30) + 1 + (7 + 20) + 1 + 5 + (7 + 50) + run + (7 + 40) + run + 3,
                   "load": head + 7 + 30 + 7 + 20 + 7 + 50 + 7 + 40, "combination": 2, "xw_writes": 11,
                   "aggregation": 2 * run, "writeback": 7, "wait": 0}
    # long writes: the next run waits for them; the first aggregation tile's load waits for the last XW write
    got = accel_top_layer_cycles(10, [(30, None, 100), (20, None, 5)], [(50, deg, 4)], latency=7)
    assert got["wait"] == 100 - (7 + 20) and got["total"] == head + (7 + 30) + 1 + 100 + 1 + 5 + (7 + 50) + run + 4


def test_image_header_copies_and_golden():
    """The header counts both passes; every node's XW goes to each aggregation tile that reads it (its own and,
    as a halo source, others'), at that tile's XW block, and nowhere else."""
    layer, x, graph = _random_layer(1, CONFIGS[0])
    p = params_for(layer, x.shape[1], **SMALL)
    img = build_image(layer, x, graph, p)
    head = img.words[0]
    assert head & 0xFFFF == len(img.comb_tiles) and head >> 48 == len(img.agg_tiles) and (head >> 16) & 0xFFFF == 12
    assert (head >> 33) & 1 == 1 and (head >> 34) & 1 == 1  # relu, next-layer codes
    assert img.prologue_beats == 12 * p.w_beats + p.b_beats + 2
    assert sum(t[0] for t in img.comb_tiles + img.agg_tiles) + 1 + img.prologue_beats == len(img.words)
    assert img.golden.shape == (40, 5)
    # walk the image as the controller does and collect the copy lists and the XW blocks
    pos, nc, na = 1 + img.prologue_beats - 2, head & 0xFFFF, head >> 48
    addrs, blocks = [], set()
    for t in range(nc + na):
        h0, h1 = img.words[pos], img.words[pos + 1]
        pos += 2
        nodes, rows, npk, nw, lst = h0 & 0xFFFF, (h0 >> 16) & 0xFFFF, h0 >> 48, h1 & 0xFFFF, (h1 >> 16) & 0xFFFF
        if t < nc:
            start = pos + rows * p.c_beats + npk + nw
            addrs += [e >> 32 for e in img.words[start:start + lst]]  # where the copy list sends XW rows
            pos = start + lst
        else:
            blocks |= {pos + j * p.x_beats for j in range(nodes)}
            pos += nodes * p.x_beats + rows * p.o_beats(*(bool(head >> b & 1) for b in (32, 35, 34))) + lst
    assert pos == len(img.words)
    assert len(addrs) == len(set(addrs)) and set(addrs) == blocks and len(addrs) == img.local_nodes
    indptr, indices, _ = graph
    readers = sum(len(set(indices[indptr[r]:indptr[r + 1]].tolist()) | {r}) for r in range(40))
    assert img.local_nodes <= readers  # a tile reads a source once, however many of its rows use it


def test_check_layer_names_the_mismatch():
    want = np.arange(12).reshape(4, 3)
    check_layer(want.copy(), want, 1)
    got = want.copy()
    got[2, 1] += 1
    with pytest.raises(LayerMismatch, match=r"layer 1, node 2, feature 1: RTL 8, golden 7 \(1 elements differ\)"):
        check_layer(got, want, 1)


def test_accel_top_random_layers(sim, sim_exe, rtl_build_root, tmp_path):
    """Every output-stage configuration and an all-zero input (no packages): bit-exact, every phase's cycles equal
    the formula exactly; one build (same widths) for all."""
    cases = [(10 + i, c, False) for i, c in enumerate(CONFIGS)] + [(20, CONFIGS[0], True)]
    bias_rows = set()
    for seed, config, zero in cases:
        layer, x, graph = _random_layer(seed, config)
        if zero:
            x = np.zeros_like(x)
        img = build_image(layer, x, graph, params_for(layer, x.shape[1], **SMALL))
        assert len(img.agg_tiles) >= 5 and len(img.comb_tiles) >= 2
        res = simulate_layer(img, sim=sim, build_root=rtl_build_root, work_dir=tmp_path / f"s{seed}",
                             module_dirs=(Path(__file__).parent,))
        assert res["err"] == 0
        check_layer(res["out"], img.golden, 0)
        want = model_cycles(img)
        got = rtl_phases(res)
        assert got == want, (seed, config, zero)
        assert res["cnt_tiles"] == img.num_tiles
        if zero:
            assert want["combination"] == len(img.comb_tiles)  # one cycle each: nothing to compute
        bias_rows.add(img.words[0] >> 35 & 1)
    assert bias_rows == {0, 1}  # a bias per row (q_aggregate) and the layer's bias in the prologue


def test_accel_top_runs_wait_for_the_writer(sim, sim_exe, rtl_build_root, tmp_path):
    """16 lanes (8 output words a row), a 1-cycle memory: writing a tile's rows outlasts loading the next tile, so
    runs wait; still bit-exact and cycle-exact, waits included."""
    layer, x, graph = random_gcn_layer(30, 40, 12, 16, 60, psum_bits=32, frac_bits=14, xw_scheme="channel",
                                       agg=False, bias=True, relu=False, last=True)
    img = build_image(layer, x, graph, params_for(layer, x.shape[1], **{**SMALL, "latency": 1}))
    want = model_cycles(img)
    assert want["wait"] > 0
    # the first aggregation tile reads a row of the last combination tile: its load must wait for those writes
    assert set(img.agg_nodes[0].tolist()) & set(img.comb_rows[-1].tolist())
    res = simulate_layer(img, sim=sim, build_root=rtl_build_root, work_dir=tmp_path / "w",
                         module_dirs=(Path(__file__).parent,))
    assert res["err"] == 0
    check_layer(res["out"], img.golden, 0)
    got = rtl_phases(res)
    assert got == want


# ------------------------------------------------------------------------------------------------------ the CLI


def _cli(capsys, *argv) -> tuple[int, str, str]:
    rc = rtl_run.main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_run_cli_help(capsys):
    with pytest.raises(SystemExit) as e:
        rtl_run.main(["--help"])
    assert e.value.code == 0
    assert "python -m hw.rtl.run" in capsys.readouterr().out


def test_run_cli_bad_input(capsys, tmp_path, monkeypatch):
    rc, _, err = _cli(capsys, tmp_path / "missing.qgraph", "--out", tmp_path / "o")
    assert rc == 2 and err.startswith("error:") and "no such export" in err and err.count("\n") == 1
    bogus = tmp_path / "bogus.qgraph"
    bogus.mkdir()
    rc, _, err = _cli(capsys, bogus, "--out", tmp_path / "o")
    assert rc == 2 and "not a readable .qgraph export" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as e:  # argparse: unknown simulator
        rtl_run.main([str(bogus), "--sim", "modelsim"])
    assert e.value.code == 2


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    """A degree-aware GCN (24 -> 8 -> 3) on an 80-node random graph, exported (tests/quant/arch_cases.py)."""
    if str(QUANT_TESTS) not in sys.path:
        sys.path.insert(0, str(QUANT_TESTS))
    from arch_cases import export_tiny

    path, _, _ = export_tiny("gcn", tmp_path_factory.mktemp("tiny_export"))
    return path


def _tiny_layers(tiny_export):
    from hw.config import mega
    from hw.workload import workload_from_export
    from quant.archs.gcn.integer import gcn_graph
    from quant.qgraph import load

    q = load(tiny_export)
    model = q.to_quantized_gcn()
    graph = gcn_graph(np.asarray(q["graph.edge_index"]), model.x_codes.shape[0])
    wl = workload_from_export(q)
    for li, layer in enumerate(model.layers):
        x = np.asarray(q[f"layer{li}.x_codes"])
        img = build_image(layer, x, graph, params_for(layer, x.shape[1], mega(), max_nodes=64, max_rows=16))
        yield li, layer, x, img, wl


def test_design_steps_move_one_choice_at_a_time(tiny_export):
    """Each step of ``rtl_design_steps`` changes only its own fields; the last one is the top as the scheduler
    describes it, and the copy lists leave no Condense-Edge re-read pass."""
    from dataclasses import fields

    from hw.config import mega

    changed_by = {"weights held": {"weight_buffer_kib"}, "no row misses": {"dram_row_miss_cycles"},
                  "copy lists": {"num_eid_fifos", "sparse_buffer_kib"}, "per-lane constants": {"requant_constants"},
                  "64-bit edge beats": {"edge_bytes"}, "single-buffered": {"engine_buffers"}}
    for li, _, x, img, wl in _tiny_layers(tiny_export):
        steps = rtl_run.rtl_design_steps(mega(), img.params, img.num_rows, x.shape[1])
        assert [name for name, _ in steps] == ["engines", *changed_by]
        for (_, before), (name, after) in zip(steps, steps[1:], strict=False):
            diff = {f.name for f in fields(before) if f.name not in ("name", "sources")
                    and getattr(before, f.name) != getattr(after, f.name)}
            assert diff <= changed_by[name], (name, diff)
        last = steps[-1][1]
        assert (last.requant_constants, last.edge_bytes, last.engine_buffers, last.dram_row_miss_cycles) == \
            (True, 8, 1, 0)
        assert last.weight_buffer_kib * 1024 >= x.shape[1] * img.params.lanes * img.params.w_bits // 8
        copies = rtl_run.scheduler_layer(wl, li, dict(steps)["copy lists"])
        assert "reread" not in copies["busy_cycles"] and copies["busy_cycles"]["condense"] > 0
        cycles = {name: rtl_run.scheduler_layer(wl, li, c)["cycles"] for name, c in steps}
        assert cycles["per-lane constants"] > cycles["copy lists"]  # streamed constants cost cycles
        assert cycles["single-buffered"] >= cycles["64-bit edge beats"]


@pytest.mark.parametrize("arch", ["mega", "hygcn", "gcnax"])
def test_design_steps_run_from_every_preset(tiny_export, arch):
    """The steps start from any preset (``--arch``), aggregation-first HyGCN included: the RTL top is
    combination-first, so every step is, and each runs the layer."""
    from hw.config import preset

    for li, _, x, img, wl in _tiny_layers(tiny_export):
        for name, cfg in rtl_run.rtl_design_steps(preset(arch), img.params, img.num_rows, x.shape[1]):
            assert cfg.order == "combination_first", name
            assert rtl_run.scheduler_layer(wl, li, cfg)["cycles"] > 0


def test_workload_flags_match_the_images_header(tiny_export):
    """What the scheduler streams per row (``LayerTensors.agg_requant`` / ``bias_per_row`` / ``out_bits``) is what
    the RTL image's layer header says the output stage uses."""
    for li, _, _, img, wl in _tiny_layers(tiny_export):
        head, lt = img.words[0], wl.layers[li]
        assert bool(head >> 32 & 1) == lt.agg_requant
        assert bool(head >> 34 & 1) == (lt.out_bits is not None)
        assert bool(head >> 35 & 1) == lt.bias_per_row


def test_run_cli_bad_layers_and_missing_simulator(capsys, tmp_path, monkeypatch, tiny_export):
    rc, _, err = _cli(capsys, tiny_export, "--layers", "7", "--out", tmp_path / "o")
    assert rc == 2 and "the export has layers 0..1" in err
    import hw.rtl.sim as rtl_sim

    monkeypatch.setattr(rtl_sim, "locate", lambda sim: (None, f"{sim} is not installed"))
    rc, _, err = _cli(capsys, tiny_export, "--sim", "icarus", "--out", tmp_path / "o")
    assert rc == 2 and err == "error: simulator icarus is not usable: icarus is not installed\n"


def test_run_cli_names_a_mismatch(capsys, tmp_path, tiny_export, sim, sim_exe):
    """An export whose outputs differ from the integer model in one element: exit 1, layer / node / feature named."""
    from arch_cases import rewrite

    from quant.qgraph import load

    def edit(arrays):
        arrays["layer1.out"][5, 2] += 1

    bad = rewrite(load(tiny_export), tmp_path / "bad.qgraph", edit)
    rc, text, _ = _cli(capsys, bad, "--sim", sim, "--layers", "1", "--out", tmp_path / "o", "--no-model")
    assert rc == 1
    assert text.startswith("MISMATCH layer 1, node 5, feature 2: RTL ")
    assert "(1 elements differ)" in text


def test_run_cli_tiny_export(sim, sim_exe, rtl_build_root, tmp_path, capsys, tiny_export):
    """Both layers of an export through the CLI: bit-exact with the export's outputs, cycles == formula."""
    out = tmp_path / "run"
    rc, text, _ = _cli(capsys, tiny_export, "--sim", sim, "--out", out, "--build-dir", rtl_build_root,
                       "--max-nodes", 64, "--max-rows", 16)
    assert rc == 0, text
    for li in (0, 1):
        rec = json.loads((out / f"layer{li}.json").read_text())
        assert rec["bit_exact"] and rec["cycle_exact"], rec
        assert rec["rtl_cycles"] == rec["model_cycles"] == rec["rtl_phases"]["total"]
        assert rec["tiles"] >= 2 and rec["sim_cycles_per_s"] > 0
        assert [s["step"] for s in rec["scheduler_rtl_design"]][::6] == ["engines", "single-buffered"]
        assert rec["scheduler_rtl_matched"] == rec["scheduler_rtl_design"][0]
    assert "bit-exact" in text.splitlines()[0]


@pytest.mark.slow
@pytest.mark.parametrize("li", [1, 0])
def test_cora_whole_layer(li, cora_export, verilator_exe, rtl_build_root, tmp_path, capsys):
    """A whole Cora layer (2708 rows; layer 0: 1433 -> 64, layer 1: 64 -> 7) on Verilator through the CLI."""
    out = tmp_path / "run"
    rc, text, _ = _cli(capsys, cora_export.path, "--sim", "verilator", "--layers", li, "--out", out,
                       "--build-dir", rtl_build_root, "--no-model")
    rec = json.loads((out / f"layer{li}.json").read_text())
    assert rc == 0, text
    assert rec["bit_exact"] and rec["rows"] == 2708
    assert rec["rtl_phases"] == rec["model_phases"]
