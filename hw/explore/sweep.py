"""A sweep: every (workload x design) point through an executor, cached as it finishes, then its fronts and files.

Order of work (:func:`run_sweep`): per workload, one simulation of the base design *with* the bit-exact
functional check (cached like a point; a mismatch stops the sweep), then every design not in the cache through
the executor with the check off. Records are cached the moment they arrive, so an interrupted sweep resumes
where it stopped and a finished one reruns for free. :func:`write_outputs` then writes ``points.jsonl`` (this
sweep's points, cached or new), ``pareto.json`` and the PNGs.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from hw.area import RTL_CELLS_SOURCE, SRAM_GE_PER_KIB
from hw.config import AcceleratorConfig
from hw.explore.cache import MODEL_VERSION, PointCache, config_fields, config_hash, point_key
from hw.explore.evaluate import WorkloadSpec, evaluate, functional_check
from hw.explore.executors import Executor
from hw.explore.pareto import DESIGN_OBJECTIVES, JOINT_OBJECTIVES, front, versus_base
from hw.explore.plots import plot_sweep

AREA_NOTE = (f"area_ge is RELATIVE: Yosys generic-cell gate equivalents of the hw/rtl units ({RTL_CELLS_SOURCE}) "
             f"times the counts each design implies, plus SRAM at an assumed {SRAM_GE_PER_KIB:.0f} GE per KiB "
             "(hw/area.py); it compares designs of this suite, it is not a technology's area")


@dataclass(kw_only=True)
class SweepStats:
    """What a sweep did: points evaluated now / found in the cache, base checks, and its wall time (seconds)."""

    total: int = 0
    evaluated: int = 0
    cached: int = 0
    checks: dict = field(default_factory=dict)  # workload -> functional check modes on the base design
    check_wall_s: float = 0.0
    eval_wall_s: float = 0.0  # the executor phase only (what points/s divides by)
    workers: int = 1

    @property
    def points_per_s(self) -> float:
        return self.evaluated / self.eval_wall_s if self.eval_wall_s else 0.0


def _record(key: str, spec: WorkloadSpec, sha: str, cfg: AcceleratorConfig, metrics: dict) -> dict:
    return {"key": key, "kind": "point", "workload": spec.name, "workload_sha256": sha, "config_hash": config_hash(cfg),
            "model_version": MODEL_VERSION, "config": config_fields(cfg), "metrics": metrics}


def _check_base(spec: WorkloadSpec, sha: str, base: AcceleratorConfig, cache: PointCache) -> list[str]:
    """The base design on ``spec`` with the functional check, from the cache or run now (and cached)."""
    key = point_key(sha, config_hash(base))
    if "check:" + key not in cache:
        modes, metrics = functional_check(spec, base)
        cache.add(_record(key, spec, sha, base, metrics))
        cache.add({"key": "check:" + key, "kind": "check", "workload": spec.name, "modes": modes})
    return cache.get("check:" + key)["modes"]


def run_sweep(specs: list[WorkloadSpec], designs: list[AcceleratorConfig], base: AcceleratorConfig,
              cache: PointCache, executor: Executor, progress: bool = True) -> tuple[list[dict], SweepStats]:
    """Evaluate ``designs`` (and ``base``) on every workload of ``specs``; returns (flat point records, stats).

    A KeyboardInterrupt propagates after every finished point is in the cache (the caller reports it)."""
    stats = SweepStats(workers=executor.workers)
    shas = {spec: spec.sha256() for spec in specs}
    t0 = time.perf_counter()
    for spec in specs:
        stats.checks[spec.name] = _check_base(spec, shas[spec], base, cache)
    stats.check_wall_s = time.perf_counter() - t0
    wanted: dict[str, tuple[WorkloadSpec, AcceleratorConfig]] = {}
    for spec in specs:
        for cfg in [base, *designs]:
            wanted.setdefault(point_key(shas[spec], config_hash(cfg)), (spec, cfg))
    tasks = [(key, spec, cfg) for key, (spec, cfg) in wanted.items() if key not in cache]
    stats.total, stats.cached = len(wanted), len(wanted) - len(tasks)
    bar = tqdm(total=len(tasks), disable=not (progress and sys.stderr.isatty()), desc="hw.explore", unit="pt",
               dynamic_ncols=True, leave=False)
    t0 = time.perf_counter()
    try:
        for key, metrics in executor.imap_unordered(evaluate, tasks):
            spec, cfg = wanted[key]
            cache.add(_record(key, spec, shas[spec], cfg, metrics))
            stats.evaluated += 1
            bar.update()
    finally:
        stats.eval_wall_s = time.perf_counter() - t0
        bar.close()
    accuracy = {spec.name: spec.accuracy() for spec in specs}
    base_hash = config_hash(base)
    points = []
    for key, (spec, _) in wanted.items():
        r, acc = cache.get(key), accuracy[spec.name]
        points.append({"workload": spec.name, "accuracy": acc, "error": None if acc is None else 1.0 - acc,
                       "config_hash": r["config_hash"], "is_base": r["config_hash"] == base_hash,
                       **r["metrics"], "config": r["config"]})
    return points, stats


def fronts_of(points: list[dict]) -> tuple[dict[str, list[dict]], list[dict], dict[str, dict]]:
    """(workload -> its (latency, energy, area) front, the joint (error, energy, latency, area) front over the
    workloads with an accuracy, workload -> `versus_base` of its designs)."""
    names = sorted({p["workload"] for p in points})
    per = {n: front([p for p in points if p["workload"] == n], DESIGN_OBJECTIVES) for n in names}
    joint = front([p for p in points if p["error"] is not None], JOINT_OBJECTIVES)
    versus = {}
    for n in names:
        mine = [p for p in points if p["workload"] == n]
        base = next(p for p in mine if p["is_base"])
        versus[n] = versus_base([p for p in mine if not p["is_base"]], base)
    return per, joint, versus


def write_outputs(out: Path, points: list[dict], stats: SweepStats, meta: dict) -> dict:
    """``points.jsonl``, ``pareto.json`` (``{"points": [...], ...}``: every point on a front, with ``on`` naming
    its fronts) and the PNGs under ``out``; returns the pareto payload."""
    per, joint, versus = fronts_of(points)
    on: dict[str, list[str]] = {}
    for n, fr in per.items():
        for p in fr:
            on.setdefault(f"{p['workload']}:{p['config_hash']}", []).append(f"design:{n}")
    for p in joint:
        on.setdefault(f"{p['workload']}:{p['config_hash']}", []).append("joint")
    chosen = [{**p, "on": on[f"{p['workload']}:{p['config_hash']}"]} for p in points
              if f"{p['workload']}:{p['config_hash']}" in on]
    payload = {"points": chosen, "objectives": {"design": list(DESIGN_OBJECTIVES), "joint": list(JOINT_OBJECTIVES)},
               "front_sizes": {**{f"design:{n}": len(fr) for n, fr in per.items()}, "joint": len(joint)},
               "versus_base": versus, "functional_check": stats.checks, "model_version": MODEL_VERSION,
               "area_note": AREA_NOTE, **meta}
    tmp = out / "points.jsonl.tmp"
    tmp.write_text("".join(json.dumps(p, sort_keys=True) + "\n" for p in points))
    os.replace(tmp, out / "points.jsonl")
    (out / "pareto.json").write_text(json.dumps(payload, indent=1, sort_keys=True))
    plot_sweep(points, per, joint, {n: v["base"] for n, v in versus.items()}, out)
    return payload
