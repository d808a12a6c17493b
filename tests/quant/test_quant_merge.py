"""benchmarks/quant_merge.py: scratch cells join the results file, replacing same-key cells, keeping the rest."""

import json

import pytest

from benchmarks import quant_merge


def cell(dataset, method, acc, device=None, command="c0"):
    c = {"dataset": dataset, "model": "gcn", "method": method, "target_bits": None, "epochs": 200,
         "test_acc": {"mean": acc, "std": 0.0, "n": 1}, "command": command}
    if device:
        c["device"] = device
    return c


def write(path, commands, cells):
    path.write_text(json.dumps({"commands": commands, "seeds": [0], "cells": cells}))


def test_merge_replaces_same_key_and_keeps_the_rest(tmp_path):
    main = tmp_path / "quant_table.json"
    write(main, ["c0"], [cell("cora", "fp32", 80.0), cell("amazon-computers", "fp32", 70.0, device="GPU X")])
    scratch = tmp_path / "s.json"
    cmd = "python benchmarks/quant_table.py --datasets amazon-computers --device cuda --out /some/where/s.json"
    write(scratch, [cmd], [cell("amazon-computers", "fp32", 82.0, device="GPU X", command=cmd),
                           cell("amazon-computers", "dq-int8", 81.0, device="GPU X", command=cmd)])
    out = quant_merge.merge([scratch], main, shared_device_with="one other job", plots=False)
    stored = json.loads(main.read_text())
    assert stored["cells"] == out["cells"]
    accs = {(c["dataset"], c["method"]): c["test_acc"]["mean"] for c in stored["cells"]}
    assert accs == {("cora", "fp32"): 80.0, ("amazon-computers", "fp32"): 82.0, ("amazon-computers", "dq-int8"): 81.0}
    new_cmd = ("python benchmarks/quant_table.py --datasets amazon-computers --device cuda "
               "--out <scratch file, merged> (on GPU X)")
    assert stored["commands"] == ["c0", new_cmd]
    merged = [c for c in stored["cells"] if c["dataset"] == "amazon-computers"]
    assert all(c["command"] == new_cmd and c["shared_device_with"] == "one other job" for c in merged)
    cora = next(c for c in stored["cells"] if c["dataset"] == "cora")
    assert "shared_device_with" not in cora and cora["command"] == "c0"


def test_merge_refuses_a_file_of_several_commands_and_a_missing_target(tmp_path):
    main = tmp_path / "quant_table.json"
    write(main, ["c0"], [cell("cora", "fp32", 80.0)])
    bad = tmp_path / "bad.json"
    write(bad, ["a", "b"], [cell("cora", "fp32", 1.0)])
    with pytest.raises(ValueError, match="2 commands"):
        quant_merge.merge([bad], main, plots=False)
    with pytest.raises(FileNotFoundError, match="run benchmarks/quant_table.py first"):
        quant_merge.merge([bad], tmp_path / "missing.json", plots=False)
    assert json.loads(main.read_text())["cells"][0]["test_acc"]["mean"] == 80.0  # nothing lost
