"""benchmarks/hw_cost_fidelity.py and benchmarks/hw_aware.py: their comparisons, fronts and RESULTS.md sections."""

import json

import pytest

from benchmarks import hw_aware, hw_cost_fidelity


def test_fidelity_on_a_degree_rule_workload(tmp_path):
    """No exports, one small graph: every configuration compared, the goals judged from the rows."""
    out = tmp_path / "fid.json"
    res = hw_cost_fidelity.main(["--datasets", "", "--graphs", "sbm-120", "--out", str(out)])
    assert json.loads(out.read_text())["summary"] == res["summary"]
    assert {r["config"] for r in res["rows"]} == set(hw_cost_fidelity.configs())
    worst = max(abs(r["rel_error"]["energy_pj"]) for r in res["rows"])
    assert res["summary"]["all"]["energy_pj"]["max_abs_error"] == worst and res["summary"]["all"]["energy_pj"]["met"]
    assert "exports" not in res["summary"]  # no trained export in this run
    text = "\n".join(hw_cost_fidelity.render(res))
    assert "| dram_16GBs | 1 |" in text and "met" in text


def _row(budget, target, seed, acc, energy):
    return {"dataset": "d", "budget": budget, "target": target, "seed": seed, "test_acc": acc, "energy_uj": energy,
            "avg_bits": target, "headroom": {"all_1_bit": 0.99, "all_8_bit": 1.01}}


def test_equal_accuracy_gain_pairs_points_within_the_tolerance():
    rows = [_row("memory", 2.0, s, 80.0 + s * 0.1, 100.0) for s in range(2)]
    rows += [_row("memory", 4.0, s, 82.0, 120.0) for s in range(2)]
    rows += [_row("hardware", 2.0, s, 79.9, 80.0) for s in range(2)]  # within 0.3 pt of the 2-bit memory point
    rows += [_row("hardware", 4.0, s, 83.0, 110.0) for s in range(2)]  # more accurate than every memory point
    rows += [_row("memory+xw", 4.0, s, 82.1, 60.0) for s in range(2)]  # within reach of the 4-bit memory point
    fr = hw_aware.fronts(rows)
    assert [p["runs"] for p in fr["d"]["memory"]] == [2, 2]
    assert hw_aware.equal_accuracy_gain(fr["d"]) == pytest.approx(100.0 / 80.0)
    assert hw_aware.equal_accuracy_gain(fr["d"], "memory+xw") == pytest.approx(120.0 / 60.0)
    gains = {"d": {"hardware": 1.25, "memory+xw": 2.0}, "e": {"hardware": None}}
    assert not hw_aware.goal_met(gains)  # memory+xw is not a hardware-aware budget
    assert hw_aware.goal_met({**gains, "e": {"hardware+xw": 1.3}, "f": {"hardware": 1.2}})
    res = {"command": "c", "hw_cost": "energy", "rows": rows, "fronts": fr, "equal_accuracy_gain": gains,
           "goal_met": False}
    text = "\n".join(hw_aware.render(res))
    assert "| d | 2 | hardware | 2 | 79.90 +- 0.00 | 80.00 +- 0.00 | 2.00 | 0.990-1.010x |" in text
    assert "| d | 1.250x | 2.000x |" in text and "| e | no pair | - |" in text and "MISSED" in text
    rows[-1] = {**rows[-1], "dram_bytes": 1000, "cycles": 50.0,
                "predicted": {"energy_pj": 61e6, "dram_bytes": 990.0, "cycles": 55.0}}
    errors = "\n".join(hw_aware.prediction_errors(rows))
    assert "| memory+xw | 1 | 1.67% | 1.00% | 10.00% |" in errors


def test_hw_aware_restarts_from_its_cache_and_skips_a_torn_line(tmp_path, monkeypatch):
    calls = []

    def fake_run(dataset, target, seed, budget, cost, epochs, work):
        calls.append((dataset, target, seed, budget))
        return _row(budget, float(target), seed, 80.0 + seed, 100.0 if budget == "memory" else 90.0)

    monkeypatch.setattr(hw_aware, "run_one", fake_run)
    monkeypatch.setattr(hw_aware, "plot", lambda *a: None)
    cache = tmp_path / "rows.jsonl"
    argv = ["--datasets", "d", "--targets", "2", "--seeds", "2", "--out", str(tmp_path / "a.json"), "--cache",
            str(cache), "--budgets", "memory,hardware"]
    first = hw_aware.main(argv)
    assert len(calls) == 4 and len(cache.read_text().splitlines()) == 4
    with cache.open("a") as f:
        f.write('{"key": "d|4|0|mem')  # a run killed while writing its line
    calls.clear()
    again = hw_aware.main([*argv[:5], "3", *argv[6:]])  # a third seed: only its two runs are new
    assert calls == [("d", "2", 2, "memory"), ("d", "2", 2, "hardware")]
    assert again["rows"][:4] == first["rows"] and len(again["rows"]) == 6


def test_dram_parts_put_every_tensor_of_a_two_layer_gcn_in_one_part():
    labels = {"L0.x.packages": 10, "L0.x.bitmap": 40, "L0.x.boundary": 5, "weights": 50, "L0.xw.packages": 30,
              "L0.xw.bitmap": 4, "L0.xw.boundary": 11, "eids": 2, "condensed": 56, "edges": 13, "L0.out.packages": 3,
              "L0.out.bitmap": 2, "L0.out.boundary": 1, "L1.x.packages": 3, "L1.x.bitmap": 2, "L1.x.boundary": 1,
              "L1.xw.packages": 4, "L1.xw.bitmap": 1, "L1.xw.boundary": 1, "L1.out.dense": 7}
    row = {"dram_by_tensor": labels, "energy_parts_pj": {"dram": 9.0, "total": 10.0}}
    shares = hw_aware.dram_shares(row)
    total = sum(labels.values())
    assert shares["learned feature streams"] == pytest.approx(12 / total)  # L0.out.* written, L1.x.* read
    assert shares["input features (exact)"] == pytest.approx(55 / total)
    assert shares["XW rows"] == pytest.approx(107 / total) and shares["outputs"] == pytest.approx(7 / total)
    assert shares["edges"] == pytest.approx(15 / total) and sum(shares.values()) == pytest.approx(1.0)
    rows = [{**_row("memory", 2.0, 0, 80.0, 100.0), **row}]
    res = {"command": "c", "hw_cost": "energy", "rows": rows, "fronts": hw_aware.fronts(rows),
           "equal_accuracy_gain": {"d": {"hardware": None}}, "goal_met": False}
    assert f"| d | memory | 1 | 90.0% | {55 / total:.1%} | {12 / total:.1%} |" in "\n".join(hw_aware.render(res))


def test_hw_aware_keeps_the_rows_of_datasets_it_does_not_measure(tmp_path, monkeypatch):
    monkeypatch.setattr(hw_aware, "run_one", lambda ds, target, seed, budget, *a: {
        **_row(budget, float(target), seed, 80.0, 100.0), "dataset": ds})
    monkeypatch.setattr(hw_aware, "plot", lambda *a: None)
    common = ["--targets", "2", "--seeds", "1", "--out", str(tmp_path / "a.json"), "--cache", str(tmp_path / "c")]
    hw_aware.main(["--datasets", "d", "--budgets", "memory,hardware", *common])
    both = hw_aware.main(["--datasets", "e", "--budgets", "memory,hardware", *common])
    assert [(r["dataset"], r["command"].split()[3]) for r in both["rows"]] == [("d", "d"), ("d", "d"), ("e", "e"),
                                                                               ("e", "e")]
    assert set(both["fronts"]) == {"d", "e"} and "; then " in both["command"]
    more = hw_aware.main(["--datasets", "d", "--budgets", "memory+xw", *common])  # another budget: the rest kept
    assert sorted((r["dataset"], r["budget"]) for r in more["rows"]) == [
        ("d", "hardware"), ("d", "memory"), ("d", "memory+xw"), ("e", "hardware"), ("e", "memory")]
    again = hw_aware.main(["--datasets", "d", "--hw-cost", "dram", *common])  # another cost: nothing kept
    assert {r["dataset"] for r in again["rows"]} == {"d"} and len(again["rows"]) == len(hw_aware.BUDGETS)
