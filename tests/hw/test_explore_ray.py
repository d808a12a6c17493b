"""hw/explore's Ray executor gives the same points as the in-process one (optional extra: skipped without ray)."""

import pytest

ray = pytest.importorskip("ray")

from hw.explore.evaluate import WorkloadSpec, evaluate, install  # noqa: E402
from hw.explore.executors import InProcessExecutor, RayExecutor  # noqa: E402
from hw.explore.space import Space, sample  # noqa: E402

TIMING = ("sim_wall_s", "eval_wall_s")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_ray_gives_the_in_process_points(local_ray, make_workload):
    spec = WorkloadSpec(source="rand-ray", hidden=16)
    workloads = {spec: make_workload(n=120, f_in=24, hidden=16, classes=4)}
    install(workloads)
    designs, _ = sample(Space(dims=(("num_comb_tiles", (2, 4, 8)), ("num_decoders", (16, 64))), samples=4))
    tasks = [(str(i), spec, d) for i, d in enumerate(designs)]
    here = dict(InProcessExecutor().imap_unordered(evaluate, tasks))
    executor = RayExecutor(initializer=install, initarg=workloads)  # joins the fixture's Ray, never shuts it down
    there = dict(executor.imap_unordered(evaluate, tasks))
    executor.close()
    assert ray.is_initialized() and executor.workers == 2
    strip = lambda d: {k: {m: v for m, v in r.items() if m not in TIMING} for k, r in d.items()}  # noqa: E731
    assert strip(there) == strip(here)
