"""RESULTS.md tables of the codec-speed, fixed-point-sweep, RTL and grid-storage result files (the ``render``
functions of the benchmark modules that write them), RESULTS.md's layout (benchmarks/make_results.py), and
quant_storage's merge of parallel runs."""

import json
import re

import pytest

from benchmarks import _common, export_fixed_point, make_results, pack_speed, quant_storage, rtl_sim


def pack_row(bits, pack, unpack):
    return {"bits": bits, "pack_mb_per_s": pack, "unpack_mb_per_s": unpack, "packed_bytes": 4194304,
            "ap_encode_mb_per_s": 30.0, "ap_decode_mb_per_s": 25.0, "ap_total_bytes": 510354, "codes_mb": 16.8}


def pack_result(rows):
    return {"command": "python benchmarks/pack_speed.py ", "nodes": 131072, "features": 128, "repeats": 3,
            "ap_nodes": 16384, "target_mb_per_s": 100.0, "load_average_1min": {"start": 1.2, "end": 1.0},
            "machine": {"threads": 1, "cpu_count": 2}, "results": rows}


def test_pack_speed_table_judges_the_slowest_direction_against_the_target():
    met = pack_speed.render(pack_result([pack_row(2, 168.1, 195.9), pack_row("mixed", 145.0, 194.6)]))
    assert "| 2 | 168 | 196 | 4,194,304 | 30 | 25 | 510,354 |" in met
    assert any("Slowest pack or unpack: 145 MB/s" in line and ": met)" in line for line in met)
    missed = pack_speed.render(pack_result([pack_row(4, 150.0, 99.4)]))
    assert any("Slowest pack or unpack: 99 MB/s" in line and ": missed)" in line for line in missed)


def test_fixed_point_sweep_table():
    res = {"dataset": "cora", "quant": "a2q", "target_bits": 1.7, "epochs": 200, "test_acc_fake_quant": 0.784,
           "formats": [{"frac_bits": 12, "psum_bits": 16, "test_acc_integer": 0.783, "delta_pt": -0.1,
                        "prediction_agreement": 0.99963}], "machine": {}}
    lines = export_fixed_point.render(res)
    assert "| 12 | 16 | 78.3 | -0.1 | 99.96 % |" in lines
    assert any("tests 78.4 %" in line for line in lines)


def test_rtl_tables_show_every_configuration_and_flag_a_mismatch():
    cells = {"tool": "Yosys 0.23", "flow": "synth", "note": "relative",
             "modules": {"bse": [{"params": {}, "cells": 413, "rel_area": 768.0, "seconds": 1.1}],
                         "cpe": [{"params": {"LANES": 4}, "cells": 1848, "rel_area": 3907.2, "seconds": 10.6},
                                 {"params": {"LANES": 8}, "cells": 3640, "rel_area": 7651.8, "seconds": 14.4}]}}
    lines = rtl_sim.render_rtl_cells(cells)
    assert "| bse | - | 413 | 768 | 1.1 |" in lines and "| cpe | LANES=8 | 3,640 | 7,652 | 14.4 |" in lines
    tile = {"simulator": "icarus", "tile": "t0", "rows": 16, "local_nodes": 63, "packages": 4, "edges": 65,
            "bit_exact": True, "rtl_total": 685, "model_total": 685, "rtl_combination": 614,
            "model_combination": 614, "rtl_aggregation_output": 70, "model_aggregation_output": 70}
    sim = {"export": "cora_gcn.qgraph", "layer": 1, "cycles": [tile, {**tile, "bit_exact": False}],
           "speed": {"icarus": {"tile_rows": 12, "sim_cycles_per_s": 1472, "real_s": 0.433,
                                "first_run_with_build_s": 3.1}}, "unavailable": {}, "machine": {}}
    lines = rtl_sim.render(sim)
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
    lines = quant_storage.render({"cells": cells})
    assert "| cora | gcn | not run | not run | not run | 15.3x all-in, 16.0x features @ 1.02 bits |" in lines
    with pytest.raises(SystemExit, match="has no export"):
        quant_storage.main(["--datasets", "mutag"])


PIPELINE = ["Data and FP32 training", "Quantization", "Export and integer path", "Cycle model (hw)", "RTL",
            "Distributed training", "Graph transformer", "Other results"]


def github_anchors(text):
    """Every heading's anchor as GitHub makes it (lower case, punctuation dropped, spaces to hyphens, repeats
    numbered), written apart from make_results' own."""
    anchors, seen = set(), {}
    for line in text.splitlines():
        if line.startswith("#"):
            slug = "".join(ch for ch in line.lstrip("#").strip().lower() if ch.isalnum() or ch in "_- ")
            slug = slug.replace(" ", "-")
            anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return anchors


def check_layout(text):
    """Contents whose links all resolve and name every section, stages in pipeline order, no line over 1,000."""
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 1000
    start = lines.index("## Contents")
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("## "))
    links = re.findall(r"\]\(#([^)]+)\)", "\n".join(lines[start:end]))
    assert links and set(links) <= github_anchors(text) and len(set(links)) == len(links)
    headings = [line for line in lines[end:] if line.startswith(("## ", "### "))]
    assert len(links) == len(headings)  # every stage and every section is in the contents
    stages = [line[3:] for line in headings if line.startswith("## ")]
    assert stages == sorted(stages, key=PIPELINE.index) and headings[0].startswith("## ")
    return headings


def test_results_md_follows_the_pipeline_with_contents_and_short_lines(tmp_path):
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    make_results.main(out=first)
    make_results.main(out=second)
    assert first.read_bytes() == second.read_bytes()
    check_layout(first.read_text())


def test_stage_placement_of_harness_and_unknown_files(tmp_path):
    for name in ("teardown_race", "quant_defaults", "fp32_accuracy", "rtl_cells", "zzz_new", "aaa_new"):
        (tmp_path / f"{name}.json").write_text("{}")
    (tmp_path / "fault_injection.json").write_text('{"runs": 3')  # still being written
    text = make_results.render(tmp_path)
    headings = check_layout(text)

    def stage_of(title):
        i = next(i for i, h in enumerate(headings) if h.startswith("### " + title))
        return next(h[3:] for h in reversed(headings[:i]) if h.startswith("## "))

    assert [h[3:] for h in headings if h.startswith("## ")] == ["Data and FP32 training", "Quantization", "RTL",
                                                                "Distributed training", "Other results"]
    assert stage_of("Quantization defaults") == "Quantization" and stage_of("Rank exit") == "Distributed training"
    assert stage_of("fault_injection") == "Distributed training" and "could not be read (JSONDecodeError)" in text
    assert stage_of("aaa_new") == stage_of("zzz_new") == "Other results"
    assert "## Export and integer path" not in text  # a stage without result files is left out


def test_long_notes_lists_and_table_cells_fit_without_losing_anything():
    sentences = [f"Sentence {i} says `python run.py --seed {i}` and {'x' * 60}." for i in range(40)]
    epochs = [str(100 + i) for i in range(400)]
    lines = ["## T", "", " ".join(sentences), "", "- " + " ".join(sentences), "", "| key | epochs | command |",
             "|---|---|---|", f"| cora | {' '.join(epochs)} | `c` |", "| citeseer | 1 2 | `c` |", "after"]
    out = make_results._fit_lines(lines)
    assert max(len(line) for line in out) <= 1000
    assert " ".join(out[2:out.index("", 3)]) == " ".join(sentences)  # one paragraph still, every sentence kept
    item = out[out.index("- " + sentences[0]):]
    item = item[:next(i for i, line in enumerate(item) if not line.startswith(("- ", "  ")))]
    assert len(item) > 1 and all(line.startswith("  ") for line in item[1:])  # continuation lines stay in the item
    assert " ".join(line.strip() for line in item) == "- " + " ".join(sentences)
    row = next(line for line in out if line.startswith("| cora |"))
    assert row == "| cora | 100 ... 499 (400 items, note 1) | `c` |" and "| citeseer | 1 2 | `c` |" in out
    note = out[out.index("<details><summary>Long table cells (moved out of the table above)</summary>"):]
    note = note[:note.index("</details>")]
    text = " ".join(line.strip() for line in note if line.startswith(("- note", "  ")))
    assert text == '- note 1 (cora, column "epochs"): ' + " ".join(epochs)
    assert out[-2:] == ["", "after"]
    assert make_results._fit_lines(["short", "| a | b |"]) == ["short", "| a | b |"]


def test_long_command_lists_fold_into_a_collapsed_list():
    commands = [f"python benchmarks/quant_table.py --datasets cora --seed {i} --merge" for i in range(30)]
    text, listing = _common.command_list(commands)
    assert text == "30, listed below" and listing[:2] == ["", "<details><summary>30 commands</summary>"]
    assert [line for line in listing if line.startswith("- ")] == [f"- `{c}`" for c in commands]
    assert listing[-1] == "</details>"
    assert _common.command_list(commands[:2]) == (f"`{commands[0]}`; `{commands[1]}`", [])
    assert _common.command_list(commands[:2], ", ")[0] == f"`{commands[0]}`, `{commands[1]}`"
