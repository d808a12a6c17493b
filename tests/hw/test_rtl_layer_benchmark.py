"""benchmarks/rtl_layer.py: a re-measured export replaces its own records and keeps the others with their command."""

import json

from benchmarks import rtl_layer


def _rec(export, layer, cycles):
    return {"export": export, "layer": layer, "simulator": "verilator", "bit_exact": True, "rtl_cycles": cycles,
            "model_cycles": cycles, "scheduler_cycles": 10.0, "scheduler_rtl_matched": {"cycles": cycles / 2},
            "rtl_phases": {"load": 1, "combination": 2, "aggregation": 5, "writeback": 3}, "sim_cycles_per_s": 1e5,
            "build_s": 2.0}


def test_merge_keeps_other_exports_and_names_each_command(tmp_path):
    path = tmp_path / "rtl_layer.json"
    old = {"command": "old cmd", "records": [_rec("a.qgraph", 0, 100), _rec("b.qgraph", 0, 200)],
           "skipped": [{"export": "b.qgraph", "layer": 1, "simulator": "icarus", "why": "too long"},
                       {"export": "a.qgraph", "layer": 1, "simulator": "icarus", "why": "too long"}],
           "note": "b's run was stopped"}
    path.write_text(json.dumps(old))
    new = {"command": "new cmd", "records": [{**_rec("a.qgraph", 0, 110), "command": "new cmd"}], "skipped": []}
    merged = rtl_layer.merge_previous(new, path, {"a.qgraph"})
    assert [(r["export"], r["rtl_cycles"], r["command"]) for r in merged["records"]] == [
        ("b.qgraph", 200, "old cmd"), ("a.qgraph", 110, "new cmd")]
    assert [s["export"] for s in merged["skipped"]] == ["b.qgraph"] and merged["note"] == "b's run was stopped"
    text = "\n".join(rtl_layer.render(merged))
    assert "Command: `old cmd`; `new cmd`" in text and "Not run: b.qgraph layer 1 on icarus" in text
    assert rtl_layer.merge_previous(new, tmp_path / "none.json", {"a.qgraph"}) is new
