"""hw/explore: design spaces, the resumable point cache, Pareto filtering, executors and the CLI end to end."""

import json
from dataclasses import replace

import numpy as np
import pytest

from hw.config import mega
from hw.explore.__main__ import main
from hw.explore.cache import PointCache, config_hash, point_key
from hw.explore.evaluate import WorkloadSpec, evaluate, install
from hw.explore.executors import InProcessExecutor, LocalProcessExecutor
from hw.explore.pareto import front, nondominated, versus_base
from hw.explore.space import DEFAULT_FIELDS, Space, SpaceError, default_space, load_space, sample
from hw.explore.sweep import fronts_of, run_sweep

TIMING = ("sim_wall_s", "eval_wall_s")
SPEC = WorkloadSpec(source="rand-explore", hidden=16)  # installed below: no dataset build in the tests


@pytest.fixture(scope="module", autouse=True)
def workloads(make_workload):
    built = {SPEC: make_workload(n=120, f_in=24, hidden=16, classes=4)}
    install(built)
    return built


def _space(**kw) -> Space:
    dims = (("num_comb_tiles", (2, 4)), ("num_agg_units", (8, 128, 256)), ("dram_bandwidth_gbs", (128.0, 512.0)))
    return Space(dims=kw.pop("dims", dims), **kw)


def _metrics(points: list[dict]) -> dict:
    return {(p["workload"], p["config_hash"]): {k: v for k, v in p.items() if k not in TIMING} for p in points}


# ---- space ----------------------------------------------------------------------------------------------------
def test_grid_has_every_valid_combination():
    space = _space(sampler="grid")
    designs, invalid = sample(space)
    assert space.grid_size == 12
    assert invalid == 4 and len(designs) == 8  # num_agg_units 8 is not a multiple of agg_lanes 16
    assert len({config_hash(d) for d in designs}) == 8
    assert {(d.num_comb_tiles, d.num_agg_units) for d in designs} == {(t, a) for t in (2, 4) for a in (128, 256)}


def test_random_sampling_is_seeded_and_extends_as_a_prefix():
    a, _ = sample(_space(samples=5, seed=3))
    b, _ = sample(_space(samples=5, seed=3))
    c, _ = sample(_space(samples=7, seed=3))
    d, _ = sample(_space(samples=5, seed=4))
    assert [config_hash(x) for x in a] == [config_hash(x) for x in b] == [config_hash(x) for x in c[:5]]
    assert [config_hash(x) for x in a] != [config_hash(x) for x in d]
    assert len({config_hash(x) for x in c}) == 7
    everything, _ = sample(_space(samples=100))
    assert len(everything) == 8  # the grid is exhausted: every valid design once


def test_default_space_brackets_the_preset():
    space = default_space()
    assert [name for name, _ in space.dims] == list(DEFAULT_FIELDS)
    for name, values in space.dims:
        assert values[1] == getattr(mega(), name) and values[0] < values[1] < values[2]


def test_space_file_and_its_errors(tmp_path):
    good = tmp_path / "s.toml"
    good.write_text('sampler = "grid"\n[fields]\nnum_decoders = [16, 32]\nclock_ghz = [1, 2]\n')
    space = load_space(good)
    assert space.dims == (("num_decoders", (16, 32)), ("clock_ghz", (1.0, 2.0))) and space.grid_size == 4
    for text, match in [('[fields]\nnum_pes = [1, 2]\n', "unknown accelerator field 'num_pes'"),
                        ('[fields]\n', "no fields to vary"), ('[fields]\nnum_decoders = []\n', "has no values"),
                        ('[fields]\nnum_decoders = ["a"]\n', "must be an int"),
                        ('sampler = "lhs"\n[fields]\nnum_decoders = [1]\n', "sampler"),
                        ('colour = 1\n[fields]\nnum_decoders = [1]\n', "unknown keys")]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(SpaceError, match=match):
            load_space(bad)


# ---- cache and resume -----------------------------------------------------------------------------------------
class _InterruptAfter(InProcessExecutor):
    """Delivers ``k`` results, then a Ctrl-C; counts the tasks it was given."""

    def __init__(self, k: int | None = None) -> None:
        self.k, self.given = k, 0

    def imap_unordered(self, fn, tasks):
        self.given = len(tasks)
        for i, task in enumerate(tasks):
            if i == self.k:
                raise KeyboardInterrupt
            yield fn(task)


def test_interrupted_sweep_resumes_and_matches_an_uninterrupted_one(tmp_path):
    designs, _ = sample(_space(sampler="grid"))
    with PointCache(tmp_path / "full.jsonl") as cache:
        full, stats = run_sweep([SPEC], designs, mega(), cache, InProcessExecutor(), progress=False)
    assert stats.evaluated == len(designs) and stats.total == len(designs) + 1  # the base point comes from the check
    with PointCache(tmp_path / "part.jsonl") as cache, pytest.raises(KeyboardInterrupt):
        run_sweep([SPEC], designs, mega(), cache, _InterruptAfter(3), progress=False)
    cache = PointCache(tmp_path / "part.jsonl")
    assert len(cache) == 2 + 3  # base point + its check record + the 3 points that finished
    counting = _InterruptAfter()
    resumed, stats = run_sweep([SPEC], designs, mega(), cache, counting, progress=False)
    cache.close()
    assert counting.given == stats.evaluated == len(designs) - 3 and stats.cached == 4
    assert _metrics(resumed) == _metrics(full)
    again = PointCache(tmp_path / "part.jsonl")
    _, stats = run_sweep([SPEC], designs, mega(), again, _InterruptAfter(0), progress=False)  # all cached
    assert stats.evaluated == 0


def test_cache_survives_a_torn_last_line(tmp_path):
    path = tmp_path / "c.jsonl"
    with PointCache(path) as cache:
        cache.add({"key": "a", "x": 1})
    with open(path, "a") as f:
        f.write('{"key": "b", "x"')  # a crash mid-write
    with PointCache(path) as cache:
        assert cache.torn_lines == 1 and "a" in cache and "b" not in cache
        cache.add({"key": "c", "x": 3})
    assert set(PointCache(path).records) == {"a", "c"}


def test_config_hash_ignores_the_name_and_sees_every_field():
    assert config_hash(replace(mega(), name="other")) == config_hash(mega())
    assert config_hash(replace(mega(), eid_fifo_depth=16)) != config_hash(mega())
    assert config_hash(mega(), model_version="x") != config_hash(mega())
    assert point_key("a" * 64, config_hash(mega())) != point_key("b" * 64, config_hash(mega()))


# ---- Pareto ---------------------------------------------------------------------------------------------------
def _brute_force(f: np.ndarray) -> np.ndarray:
    return np.array([not any((f[j] <= f[i]).all() and (f[j] < f[i]).any() for j in range(len(f)))
                     for i in range(len(f))])


@pytest.mark.parametrize("m", [2, 3, 4])
def test_nondominated_matches_brute_force(m):
    rng = np.random.default_rng(m)
    f = rng.integers(0, 6, size=(60, m)).astype(float)  # small integers: many ties and duplicates
    np.testing.assert_array_equal(nondominated(f, block=7), _brute_force(f))


def test_front_and_versus_base():
    pts = [{"latency_us": 1.0, "energy_pj": 5.0, "area_ge": 3.0}, {"latency_us": 2.0, "energy_pj": 2.0, "area_ge": 1.0},
           {"latency_us": 3.0, "energy_pj": 6.0, "area_ge": 3.0}, {"latency_us": 0.5, "energy_pj": 9.0, "area_ge": 9.0}]
    fr = front(pts, ("latency_us", "energy_pj", "area_ge"))
    assert fr == [pts[3], pts[0], pts[1]]
    v = versus_base(pts, {"latency_us": 4.0, "energy_pj": 4.0, "area_ge": 3.0})
    assert v["speedup_at_equal_area"] == 4.0 and v["energy_saving_at_equal_area"] == 2.0
    assert v["num_dominating_base"] == 1 and v["best_dominating"] == pts[1]


def test_joint_front_spans_exports_and_designs():
    rng = np.random.default_rng(0)
    points = []
    for name, acc in (("a", 0.8), ("b", 0.9), ("c", None)):
        for i in range(25):
            lat, en, ar = rng.integers(1, 8, 3).astype(float)
            points.append({"workload": name, "accuracy": acc, "error": None if acc is None else 1 - acc,
                           "is_base": i == 0, "latency_us": lat, "energy_pj": en, "area_ge": ar, "config": {}})
    per, joint, versus = fronts_of(points)
    scored = [p for p in points if p["error"] is not None]
    f = np.array([[p["error"], p["energy_pj"], p["latency_us"], p["area_ge"]] for p in scored])
    expected = [p for p, keep in zip(scored, _brute_force(f), strict=True) if keep]
    assert sorted(map(id, joint)) == sorted(map(id, expected))
    assert {p["workload"] for p in joint} == {"a", "b"}  # the workload without accuracy is in no joint front
    assert set(per) == set(versus) == {"a", "b", "c"}


# ---- executors and the CLI --------------------------------------------------------------------------------------
def test_local_pool_gives_the_in_process_points(workloads):
    designs, _ = sample(_space(samples=4))
    tasks = [(str(i), SPEC, d) for i, d in enumerate(designs)]
    here = dict(InProcessExecutor().imap_unordered(evaluate, tasks))
    pool = LocalProcessExecutor(2, install, workloads)
    try:
        there = dict(pool.imap_unordered(evaluate, tasks))
    finally:
        pool.close()
    strip = lambda d: {k: {m: v for m, v in r.items() if m not in TIMING} for k, r in d.items()}  # noqa: E731
    assert strip(there) == strip(here)


def test_cli_writes_every_file_and_resumes(tmp_path, capsys):
    space = tmp_path / "space.toml"
    space.write_text('sampler = "grid"\n[fields]\nnum_comb_tiles = [2, 8]\nagg_lanes = [8, 16]\n')
    out = tmp_path / "dse"
    argv = ["sbm-100", "--hidden", "16", "--space", str(space), "--out", str(out), "--workers", "1", "--no-progress"]
    payload = main(argv)
    names = {p.name for p in out.iterdir()}
    assert {"points.jsonl", "pareto.json", "cache.jsonl", "latency_energy.png", "accuracy_energy.png",
            "area_latency.png"} <= names
    points = [json.loads(line) for line in (out / "points.jsonl").read_text().splitlines()]
    assert len(points) == 5 and sum(p["is_base"] for p in points) == 1  # 4 designs + the mega preset
    assert json.loads((out / "pareto.json").read_text())["points"] == payload["points"]
    assert payload["functional_check"] == {"sbm-100": ["bit-exact", "bit-exact"]}
    assert payload["stats"]["evaluated"] == 4
    assert main(argv)["stats"]["evaluated"] == 0  # a rerun finds everything in the cache
    assert "5 points (0 evaluated" in capsys.readouterr().out


@pytest.mark.parametrize(("extra", "message"), [
    (["--space", "BAD"], "unknown accelerator field 'num_pes'"),
    (["--space", "EMPTY"], "no fields to vary"),
    (["missing.qgraph"], "export missing.qgraph does not exist"),
    (["--space", "HYGCN_CONSTANTS"], "run aggregation-first"),
])
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    (tmp_path / "bad.toml").write_text("[fields]\nnum_pes = [1, 2]\n")
    (tmp_path / "empty.toml").write_text("[fields]\n")
    (tmp_path / "hc.toml").write_text('base = "hygcn"\nsampler = "grid"\n[fields]\nrequant_constants = [false, true]\n')
    extra = [{"BAD": str(tmp_path / "bad.toml"), "EMPTY": str(tmp_path / "empty.toml"),
              "HYGCN_CONSTANTS": str(tmp_path / "hc.toml")}.get(a, a) for a in extra]
    workloads = [a for a in extra if a.endswith(".qgraph")] or ["sbm-100"]
    flags = [a for a in extra if not a.endswith(".qgraph")]
    with pytest.raises(SystemExit) as e:
        main([*workloads, *flags, "--out", str(tmp_path / "o"), "--workers", "1"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and message in err[0]
