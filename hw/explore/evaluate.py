"""One design point: a workload (an export or a dataset name) on one `AcceleratorConfig`, cycle model only.

A :class:`WorkloadSpec` names a workload the way ``python -m hw.simulate`` does (``.qgraph`` export path, dataset
or synthetic name, or graph file) and identifies its content by a SHA-256: an export's is the hash of its manifest
(which holds the SHA-256 of every array, checked by ``quant.qgraph.load``), a dataset workload's the hash of its
name and generation parameters (its bits come from the deterministic degree rule), a graph file's the hash of its
bytes and those parameters. The sweep builds each workload once and ships it to its workers (:func:`install`).

:func:`evaluate` runs the cycle model with the functional check off: the sweep checks each workload bit-exact
once, on the base design (:func:`functional_check`), since the check depends on the layers, not on the design.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from hw.area import relative_area
from hw.config import AcceleratorConfig
from hw.report import run_simulation
from hw.simulate import _is_export
from hw.workload import Workload, workload_from_export, workload_from_graph, workload_name

_LOADED: dict = {}  # per process: WorkloadSpec -> built Workload


@dataclass(frozen=True, kw_only=True)
class WorkloadSpec:
    """What to simulate: ``source`` (export path, dataset/synthetic name or graph file); ``hidden`` and ``order``
    shape dataset workloads only (as ``hw.simulate --hidden / --order``)."""

    source: str
    hidden: int = 128
    order: str = "natural"

    @property
    def is_export(self) -> bool:
        return _is_export(Path(self.source))

    @property
    def name(self) -> str:
        return Path(self.source).name if self.is_export else workload_name(self.source, self.order)

    def sha256(self) -> str:
        """Content address of the workload (module docstring)."""
        if self.is_export:
            return hashlib.sha256((Path(self.source) / "manifest.json").read_bytes()).hexdigest()
        h = hashlib.sha256(f"dataset:{workload_name(self.source)}:hidden={self.hidden}:order={self.order}".encode())
        if Path(self.source).is_file():
            h.update(Path(self.source).read_bytes())
        return h.hexdigest()

    def accuracy(self) -> float | None:
        """The export's test accuracy of its integer path (manifest ``metrics.test_acc_integer``); None for dataset
        workloads (random weights) and exports without it."""
        if not self.is_export:
            return None
        metrics = json.loads((Path(self.source) / "manifest.json").read_text()).get("metrics", {})
        acc = metrics.get("test_acc_integer")
        return float(acc) if acc is not None else None


def load_workload(spec: WorkloadSpec) -> Workload:
    """The workload of ``spec``, built once per process (or installed by :func:`install`)."""
    if spec not in _LOADED:
        _LOADED[spec] = (workload_from_export(spec.source) if spec.is_export else
                         workload_from_graph(spec.source, hidden=spec.hidden, order=spec.order))
    return _LOADED[spec]


def loaded(specs: list[WorkloadSpec]) -> dict[WorkloadSpec, Workload]:
    """The built workloads of ``specs`` (what the sweep ships to its workers)."""
    return {spec: load_workload(spec) for spec in specs}


def install(workloads: dict[WorkloadSpec, Workload]) -> None:
    """Make ``workloads`` this process's (an executor's worker initializer; a no-op for those already here)."""
    for spec, wl in workloads.items():
        _LOADED.setdefault(spec, wl)


def metrics(result: dict, cfg: AcceleratorConfig) -> dict:
    """The figures a sweep keeps of one ``run_simulation`` result, plus the design's relative area."""
    return {"cycles": float(result["total_cycles"]), "latency_us": float(result["latency_us"]),
            "energy_pj": float(result["energy_pj"]["total"]), "dram_energy_pj": float(result["energy_pj"]["dram"]),
            "dram_bytes": int(result["dram"]["total_bytes"]), "area_ge": relative_area(cfg),
            "sim_wall_s": float(result["sim_wall_s"])}


def evaluate(task: tuple[str, WorkloadSpec, AcceleratorConfig]) -> tuple[str, dict]:
    """``(key, spec, cfg)`` -> ``(key, metrics)``: the cycle model on one design, no functional check. A
    module-level function of one picklable argument, so every executor can ship it to a worker."""
    key, spec, cfg = task
    t0 = time.perf_counter()
    out = metrics(run_simulation(load_workload(spec), cfg, check=False), cfg)
    out["eval_wall_s"] = time.perf_counter() - t0
    return key, out


def functional_check(spec: WorkloadSpec, cfg: AcceleratorConfig) -> tuple[list[str], dict]:
    """Simulate ``cfg`` with the bit-exact functional check on; (check modes, metrics). A mismatch raises
    ``hw.functional.FunctionalMismatch``."""
    result = run_simulation(load_workload(spec), cfg, check=True)
    return list(result["functional_check"]), metrics(result, cfg)
