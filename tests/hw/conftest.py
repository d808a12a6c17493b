"""Small deterministic GCN workloads for the hw tests (no dataset download, numpy only), and the quant tests'
model builders for the tests that simulate an export."""

import sys
from pathlib import Path

import numpy as np
import pytest

from hw.workload import build_gcn, workload_from_model


def random_graph(n: int, avg_deg: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    m = int(n * avg_deg / 2)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    ei = np.stack([np.r_[src[keep], dst[keep]], np.r_[dst[keep], src[keep]]])
    return np.unique(ei, axis=1)


def small_workload(n: int = 300, f_in: int = 48, hidden: int = 32, classes: int = 8, seed: int = 0,
                   density: float = 0.3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, f_in)) * (rng.random((n, f_in)) < density)
    ei = random_graph(n, 6.0, seed)
    model = build_gcn(x, ei, (f_in, hidden, classes), seed=seed)
    return workload_from_model(f"rand-{n}", model, ei, "degree-rule (test)")


@pytest.fixture(scope="session")
def workload():
    return small_workload()


@pytest.fixture(scope="session")
def make_workload():
    return small_workload


@pytest.fixture(scope="session")
def arch_cases():
    """``tests/quant/arch_cases.py``: tiny graphs and quantized models of every architecture (tests are not a
    package, --import-mode=importlib: its folder goes on sys.path, as tests/quant/conftest.py does)."""
    folder = str(Path(__file__).resolve().parents[1] / "quant")
    if folder not in sys.path:
        sys.path.insert(0, folder)
    import arch_cases

    return arch_cases
