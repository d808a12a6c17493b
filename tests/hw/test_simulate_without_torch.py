"""``python -m hw.simulate <export>`` needs numpy only: the exports are read with :mod:`quant.qgraph`, so the
simulator runs (and gives the same cycles) in a process where torch and torch_geometric cannot be imported."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hw.simulate import main as simulate
from quant.export import export_model

ROOT = Path(__file__).resolve().parents[2]
BLOCKED = ("torch", "torch_geometric")
# Installs a finder refusing torch and torch_geometric (and their submodules), then runs the given code.
_NO_TORCH = f"""
import sys


class _Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"{{name}} is blocked: this process must not need it")
        return None


sys.meta_path.insert(0, _Refuse())
"""


@pytest.fixture(scope="module")
def exports(tmp_path_factory, arch_cases):
    """Tiny GCN, GIN and GraphSAGE exports (written with torch, in this process)."""
    gin = convert = arch_cases
    root = tmp_path_factory.mktemp("no_torch")
    graph = gin.tiny_graph(3)
    models = {"gcn": convert.quantized_model(graph, "a2q", seed=3), "gin": gin.quantized_gin(graph, "a2q", seed=3),
              "sage": convert.quantized_model(graph, "a2q", seed=3, arch="sage")}
    return {k: export_model(m, graph, root / f"{k}.qgraph") for k, m in models.items()}


def _run_without_torch(code: str) -> dict:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter that cannot import torch."""
    res = subprocess.run([sys.executable, "-c", _NO_TORCH + code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def _loaded_blocked() -> str:
    return f"sorted(m for m in sys.modules if m.split('.')[0] in {BLOCKED!r})"


def test_qgraph_and_its_readers_import_neither_torch_nor_pyg():
    got = _run_without_torch(f"""
import json
from quant.archs import ARCHS, reader

for arch in ARCHS:
    reader(arch)
print(json.dumps({_loaded_blocked()}))
""")
    assert got == []


@pytest.mark.parametrize("arch", ["gcn", "gin", "sage"])
def test_simulate_an_export_without_torch_gives_the_same_cycles(exports, tmp_path, arch):
    path = exports[arch]
    got = _run_without_torch(f"""
import json
import time

from hw.simulate import main
from quant.qgraph import load

start = time.perf_counter()
load({str(path)!r})
load_s = time.perf_counter() - start
result = main([{str(path)!r}, "--arch", "mega", "--out", {str(tmp_path / "no_torch")!r}])
print(json.dumps({{"total_cycles": result["total_cycles"], "check": result["functional_check"], "load_s": load_s,
                  "blocked": {_loaded_blocked()}}}))
""")
    normal = simulate([str(path), "--arch", "mega", "--out", str(tmp_path / "normal")])
    assert got["blocked"] == []
    assert got["check"] == ["bit-exact"] * len(normal["functional_check"])
    assert got["total_cycles"] == normal["total_cycles"] > 0
    written = json.loads(next((tmp_path / "no_torch").glob("hw_sim_*.json")).read_text())
    assert written["total_cycles"] == normal["total_cycles"]
    assert got["load_s"] < 0.5, f"load() of a tiny export took {got['load_s']:.2f} s"
