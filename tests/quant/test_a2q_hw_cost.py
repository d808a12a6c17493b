"""benchmarks/a2q_hw_cost.py: train -> export -> simulate per weight / XW width, and its summary."""

import json

import pytest

from benchmarks import a2q_hw_cost


def _run(width, seed, **over):
    base = {m: 10.0 * width + seed for m in a2q_hw_cost.METRICS}
    return {"width": width, "seed": seed, "val_acc": 80.0, **base, **over}


def test_summary_means_and_ratios_to_the_first_width():
    runs = [_run(4, 0), _run(4, 1), _run(8, 0), _run(8, 1)]
    rows = a2q_hw_cost.summarize(runs, [4, 8])
    assert [r["width"] for r in rows] == [4, 8] and rows[0]["runs"] == 2
    assert rows[0]["cycles"]["mean"] == pytest.approx(40.5) and rows[0]["cycles"]["std"] == pytest.approx(0.5 ** 0.5)
    assert rows[1]["vs_first_width"]["dram_bytes"] == pytest.approx(80.5 / 40.5)
    text = "\n".join(a2q_hw_cost.render({"command": "c", "recipe": "r", "arch": "mega", "rows": rows}))
    assert "| 8 | 2 |" in text and f"({80.5 / 40.5:.2f}x)" in text


def test_one_short_run_per_width_end_to_end(tmp_path):
    """Two epochs, one seed, widths 4 and 8: the trained model exports and simulates bit-exactly, and the 8-bit run
    stores more weight bytes than the 4-bit one."""
    out = tmp_path / "cost.json"
    payload = a2q_hw_cost.main(["--seeds", "1", "--widths", "4,8", "--epochs", "2", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["rows"] == payload["rows"] and len(saved["runs"]) == 2
    w4, w8 = saved["runs"]
    assert (w4["width"], w8["width"]) == (4, 8)
    assert w8["all_in_bytes"] > w4["all_in_bytes"] and w8["dram_weight_bytes"] > w4["dram_weight_bytes"]


@pytest.mark.parametrize("widths", ["4,9", "four", "0"])
def test_bad_widths_are_refused(widths):
    with pytest.raises(SystemExit):
        a2q_hw_cost.main(["--widths", widths])
