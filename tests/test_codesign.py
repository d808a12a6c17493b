"""python -m pipeline.codesign: train per (target, budget), export, sweep designs; the joint front of bits x design."""

import json

import pytest

from pipeline.codesign import main


@pytest.mark.slow  # two Cora trainings, two exports and a sweep: ~20 s of CPU
def test_joint_sweep_end_to_end_and_resume(tmp_path, capsys):
    argv = ["--dataset", "cora", "--targets", "2", "--epochs", "2", "--samples", "2", "--workers", "1",
            "--out", str(tmp_path), "--no-progress"]
    out = main(argv)
    records = {r["budget"]: r for r in out["exports"]}
    assert set(records) == {"memory", "hardware+xw"}
    assert records["hardware+xw"]["predicted"] is not None and records["memory"]["predicted"] is None
    assert out["joint_front"] and all(p["budget"] in records and p["error"] is not None for p in out["joint_front"])
    saved = json.loads((tmp_path / "codesign.json").read_text())
    assert saved["joint_front"] == out["joint_front"]
    for png in ("latency_energy", "accuracy_energy", "area_latency"):
        assert (tmp_path / "explore" / f"{png}.png").stat().st_size > 0
    capsys.readouterr()
    again = main(argv)  # runs, exports and sweep points are reused
    assert again["joint_front"] == out["joint_front"]
    assert "preset (gnn/presets.py)" not in capsys.readouterr().out  # nothing trained again


@pytest.mark.parametrize("flag, value", [("--targets", "two"), ("--targets", "9"), ("--budgets", "kb")])
def test_bad_arguments_exit_2(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as e:
        main(["--out", str(tmp_path), flag, value])
    assert e.value.code == 2
