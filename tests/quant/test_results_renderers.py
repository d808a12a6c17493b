"""RESULTS.md tables of the codec-speed, fixed-point-sweep, RTL and grid-storage result files
(benchmarks/make_results.py), and quant_storage's merge of parallel runs."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import make_results  # noqa: E402
import quant_storage  # noqa: E402


def pack_row(bits, pack, unpack):
    return {"bits": bits, "pack_mb_per_s": pack, "unpack_mb_per_s": unpack, "packed_bytes": 4194304,
            "ap_encode_mb_per_s": 30.0, "ap_decode_mb_per_s": 25.0, "ap_total_bytes": 510354, "codes_mb": 16.8}


def pack_result(rows):
    return {"command": "python benchmarks/pack_speed.py ", "nodes": 131072, "features": 128, "repeats": 3,
            "ap_nodes": 16384, "target_mb_per_s": 100.0, "load_average_1min": {"start": 1.2, "end": 1.0},
            "machine": {"threads": 1, "cpu_count": 2}, "results": rows}


def test_pack_speed_table_judges_the_slowest_direction_against_the_target():
    met = make_results.render_pack_speed(pack_result([pack_row(2, 168.1, 195.9), pack_row("mixed", 145.0, 194.6)]))
    assert "| 2 | 168 | 196 | 4,194,304 | 30 | 25 | 510,354 |" in met
    assert any("Slowest pack or unpack: 145 MB/s" in line and ": met)" in line for line in met)
    missed = make_results.render_pack_speed(pack_result([pack_row(4, 150.0, 99.4)]))
    assert any("Slowest pack or unpack: 99 MB/s" in line and ": missed)" in line for line in missed)


def test_fixed_point_sweep_table():
    res = {"dataset": "cora", "quant": "a2q", "target_bits": 1.7, "epochs": 200, "test_acc_fake_quant": 0.784,
           "formats": [{"frac_bits": 12, "psum_bits": 16, "test_acc_integer": 0.783, "delta_pt": -0.1,
                        "prediction_agreement": 0.99963}], "machine": {}}
    lines = make_results.render_export_fixed_point(res)
    assert "| 12 | 16 | 78.3 | -0.1 | 99.96 % |" in lines
    assert any("tests 78.4 %" in line for line in lines)


def test_rtl_tables_show_every_configuration_and_flag_a_mismatch():
    cells = {"tool": "Yosys 0.23", "flow": "synth", "note": "relative",
             "modules": {"bse": [{"params": {}, "cells": 413, "rel_area": 768.0, "seconds": 1.1}],
                         "cpe": [{"params": {"LANES": 4}, "cells": 1848, "rel_area": 3907.2, "seconds": 10.6},
                                 {"params": {"LANES": 8}, "cells": 3640, "rel_area": 7651.8, "seconds": 14.4}]}}
    lines = make_results.render_rtl_cells(cells)
    assert "| bse | - | 413 | 768 | 1.1 |" in lines and "| cpe | LANES=8 | 3,640 | 7,652 | 14.4 |" in lines
    tile = {"simulator": "icarus", "tile": "t0", "rows": 16, "local_nodes": 63, "packages": 4, "edges": 65,
            "bit_exact": True, "rtl_total": 685, "model_total": 685, "rtl_combination": 614,
            "model_combination": 614, "rtl_aggregation_output": 70, "model_aggregation_output": 70}
    sim = {"export": "cora_gcn.qgraph", "layer": 1, "cycles": [tile, {**tile, "bit_exact": False}],
           "speed": {"icarus": {"tile_rows": 12, "sim_cycles_per_s": 1472, "real_s": 0.433,
                                "first_run_with_build_s": 3.1}}, "unavailable": {}, "machine": {}}
    lines = make_results.render_rtl_sim(sim)
    assert "| icarus | t0 | 16 | 63 | 4 | 65 | yes | 685 | 685 | 614 / 614 | 70 / 70 |" in lines
    assert any("| NO |" in line for line in lines)
    assert "| icarus | 12 | 1,472 | 0.433 | 3.1 |" in lines
    assert not any("/tmp" in line for line in lines)


def test_storage_table_and_merge(tmp_path):
    def cell(ds, method, target, ratio):
        return {"dataset": ds, "model": "gcn", "method": method, "target_bits": target, "all_in_ratio": ratio,
                "feature_bytes": 100, "fp32_feature_bytes": 1600, "avg_bits": 1.02, "command": "cmd"}

    out = tmp_path / "quant_storage.json"
    quant_storage.save(out, [cell("coauthor-cs", "a2q", 4.0, 15.5)], "cmd")
    quant_storage.save(out, [cell("cora", "degree-aware", 1.7, 15.3), cell("coauthor-cs", "a2q", 4.0, 15.6)], "cmd")
    cells = json.loads(out.read_text())["cells"]  # parallel runs merge; a re-measured cell replaces the old one
    assert [(c["dataset"], c["all_in_ratio"]) for c in cells] == [("cora", 15.3), ("coauthor-cs", 15.6)]
    lines = make_results.render_quant_storage({"cells": cells})
    assert "| cora | gcn | not run | not run | not run | 15.3x all-in, 16.0x features @ 1.02 bits |" in lines
    with pytest.raises(SystemExit, match="has no export"):
        quant_storage.main(["--datasets", "mutag"])
