"""benchmarks/dist_time.py: the derived speedups and bound on hand-made rows, and one tiny loopback run through the
real worker (every (codec, mode) row present, the pipelined run exchanging what the synchronous one does)."""

import pytest

from benchmarks import dist_time
from distributed.launch import spawn


def row(codec: str, mode: str, epoch_s: float, compute_s: float, comm_s: float) -> dict:
    return {"ranks": 2, "link": "0.1 Gbit/s shaped", "gbit": 0.1, "oversubscribed": False, "codec": codec,
            "mode": mode, "epoch_s": epoch_s, "compute_s": compute_s, "comm_s": comm_s}


def test_bound_speedups_and_amortized_pipeline():
    rows = [row("fp32", "sync", 2.0, 0.4, 1.6), row("int1", "sync", 0.5, 0.4, 0.05),
            row("int1", "pipelined", 0.42, 0.4, 0.0)]
    (d,) = dist_time.derive(rows)
    assert d["fp32_comm_fraction"] == pytest.approx(0.8) and d["compute_from"] == "this link"
    assert d["compute_only_bound"] == pytest.approx(5.0)
    assert d["speedup"]["int1 sync"] == pytest.approx(4.0)
    assert d["of_bound"]["int1 pipelined"] == pytest.approx(2.0 / 0.42 / 5.0)
    assert d["speedup"]["int1 pipelined K=10"] == pytest.approx(2.0 / ((9 * 0.42 + 0.5) / 10))
    (g,) = dist_time.goals([d])
    assert g["int1_ok"] and g["pipelined_ok"]
    loop = {**row("fp32", "sync", 0.45, 0.25, 0.01), "link": "loopback", "gbit": None}
    with_loopback = dist_time.derive([*rows, loop])
    assert [d["link"] for d in with_loopback] == ["0.1 Gbit/s shaped", "loopback"]
    assert with_loopback[0]["compute_from"] == "loopback fp32"
    assert with_loopback[0]["compute_only_bound"] == pytest.approx(2.0 / 0.25)
    slow = dist_time.derive([row("fp32", "sync", 1.0, 0.8, 0.2), row("int1", "sync", 0.9, 0.8, 0.01)])
    assert dist_time.goals(slow) == []  # communication is 20 % of the epoch: outside the goals' regime


def test_the_free_network_run_of_the_same_spawn_is_the_bounds_compute():
    """Its epoch (not the loopback run's compute, taken minutes earlier) bounds the link; it is no variant."""
    rows = [row("fp32", "sync", 2.0, 0.5, 1.5), row("fp32", dist_time.FREE, 0.4, 0.4, 0.0),
            row("int1", "sync", 0.5, 0.45, 0.05), {**row("fp32", "sync", 0.45, 0.25, 0.01), "link": "loopback"}]
    shaped = next(d for d in dist_time.derive(rows) if d["link"] != "loopback")
    assert shaped["compute_from"] == "free network, same spawn" and shaped["compute_s"] == 0.4
    assert shaped["compute_only_bound"] == pytest.approx(5.0) and shaped["fp32_comm_fraction"] == pytest.approx(0.8)
    assert "fp32 free" not in shaped["speedup"] and shaped["speedup"]["int1 sync"] == pytest.approx(4.0)
    other = [{**r, "command": "another run"} if r["mode"] == dist_time.FREE else r for r in rows]
    assert next(d for d in dist_time.derive(other) if d["link"] != "loopback")["compute_from"] == "loopback fp32"


def test_bsa_epoch_amortized_at_the_largest_synchronous_fraction():
    accuracy = {"datasets": {
        "a": {"epochs": 300, "variants": {"int1+pipeline(BSA)": {"synchronous_epochs": [45, 43]},
                                          "int1+pipeline(K=10)": {"synchronous_epochs": [90, 90]},
                                          "int1": {"synchronous_epochs": [None, None]}}},
        "b": {"epochs": 200, "variants": {"fp32+pipeline(BSA)": {"synchronous_epochs": [40, 50]},
                                          "int1+pipeline(BSA)+fresh-grad": {"synchronous_epochs": [20, 30]}}}}}
    fraction, source = dist_time.bsa_sync_fraction(accuracy)
    assert fraction == pytest.approx(45 / 200) and source == "b fp32+pipeline(BSA)"
    fresh = dist_time.bsa_sync_fraction(accuracy, "+pipeline(BSA)+fresh-grad")
    assert fresh == (pytest.approx(25 / 200), "b int1+pipeline(BSA)+fresh-grad")
    assert dist_time.bsa_sync_fraction({"datasets": {}}) is None
    rows = [row("fp32", "sync", 2.0, 0.4, 1.6), row("int1", "sync", 0.5, 0.4, 0.05),
            row("int1", "pipelined", 0.42, 0.4, 0.0), row("int1", "pipelined-fresh", 0.46, 0.4, 0.03)]
    (d,) = dist_time.derive(rows, (fraction, source), fresh)
    assert d["speedup"]["int1 pipelined BSA"] == pytest.approx(2.0 / (0.225 * 0.5 + 0.775 * 0.42))
    assert d["speedup"]["int1 pipelined-fresh BSA"] == pytest.approx(2.0 / (0.125 * 0.5 + 0.875 * 0.46))
    assert d["bsa_fresh_sync_fraction_from"] == "b int1+pipeline(BSA)+fresh-grad"
    (stale_only,) = dist_time.derive(rows, (fraction, source))
    assert "int1 pipelined-fresh BSA" not in stale_only["speedup"]  # no fresh-gradient accuracy run: no fraction
    assert "fp32 pipelined BSA" not in d["speedup"]  # no fp32 pipelined row measured
    (g,) = dist_time.goals([d])
    assert g["pipelined_bsa_int1_of_bound"] == pytest.approx(d["speedup"]["int1 pipelined BSA"] / 5.0)
    assert g["pipelined_bsa_ok"] == (g["pipelined_bsa_int1_of_bound"] >= 0.9)
    assert g["pipelined_fresh_bsa_int1_of_bound"] == pytest.approx(d["speedup"]["int1 pipelined-fresh BSA"] / 5.0)
    (plain,) = dist_time.derive(rows)
    assert "int1 pipelined BSA" not in plain["speedup"] and plain["bsa_sync_fraction"] is None


def test_worker_times_every_codec_and_mode_on_loopback():
    runs = [("fp32", "sync"), ("fp32", dist_time.FREE), ("fp32", "pipelined"), ("int1", "sync"),
            ("fp32", "pipelined-fresh")]
    per_rank = spawn(dist_time.worker, 2, 9, 16, runs, 2)
    rows = dist_time.summarise(per_rank, 2, 2, "loopback", None)
    assert [(r["codec"], r["mode"]) for r in rows] == runs
    by = {(r["codec"], r["mode"]): r for r in rows}
    fp32, piped, int1 = (by[k]["bytes"] for k in (("fp32", "sync"), ("fp32", "pipelined"), ("int1", "sync")))
    assert fp32 == piped == by[("fp32", "pipelined-fresh")]["bytes"] > 8 * int1  # F = 16: 64 B against 6 B a row
    assert by[("fp32", dist_time.FREE)]["comm_s"] == 0 < by[("fp32", "sync")]["comm_s"]  # nothing crossed
    for r in rows:
        assert r["epochs_timed"] == 2 and r["setup_bytes"] > 0
        assert 0 < r["compute_s"] <= r["epoch_s"] and r["comm_s"] >= 0


def test_derive_only_refuses_timing_flags(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["dist_time", "--derive-only", "--ranks", "4"])
    with pytest.raises(SystemExit) as exit_info:
        dist_time._args()
    assert exit_info.value.code == 2 and "--ranks would be ignored" in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", ["dist_time", "--derive-only"])
    assert dist_time._args().derive_only
