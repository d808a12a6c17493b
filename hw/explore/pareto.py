"""Pareto fronts of a sweep (numpy only) and how its best designs compare with the base preset.

A point ``a`` dominates ``b`` when ``a <= b`` in every objective and ``a < b`` in at least one (all minimised);
:func:`nondominated` keeps the points no other point dominates (identical points keep each other). The sweep's
fronts: per workload over (latency, energy, area), and jointly over (error, energy, latency, area) for every
(workload x design) pair whose workload has an accuracy, error = 1 - the export's integer test accuracy (accuracy
belongs to the trained model, the rest to the design).
"""

from __future__ import annotations

import numpy as np

DESIGN_OBJECTIVES = ("latency_us", "energy_pj", "area_ge")
JOINT_OBJECTIVES = ("error", "energy_pj", "latency_us", "area_ge")


def nondominated(objectives: np.ndarray, block: int = 512) -> np.ndarray:
    """Boolean mask (n,) of the non-dominated rows of ``objectives`` (n, m), all minimised. O(n^2 m) comparisons,
    in blocks of ``block`` rows so memory stays at block x n x m."""
    f = np.asarray(objectives, dtype=np.float64)
    if f.ndim != 2:
        raise ValueError(f"nondominated: objectives must be (points, objectives), got shape {f.shape}")
    keep = np.ones(f.shape[0], dtype=bool)
    for lo in range(0, f.shape[0], block):
        b = f[lo:lo + block]                                   # (B, m) candidates
        no_worse = (f[None, :, :] <= b[:, None, :]).all(-1)    # (B, n): point j is <= candidate i everywhere
        better = (f[None, :, :] < b[:, None, :]).any(-1)       # (B, n): and strictly better somewhere
        keep[lo:lo + block] = ~(no_worse & better).any(1)
    return keep


def front(points: list[dict], objectives: tuple[str, ...]) -> list[dict]:
    """The non-dominated ``points`` (records with the ``objectives`` as keys), sorted by the first objective."""
    if not points:
        return []
    f = np.array([[p[k] for k in objectives] for p in points], dtype=np.float64)
    chosen = [p for p, k in zip(points, nondominated(f), strict=True) if k]
    return sorted(chosen, key=lambda p: tuple(p[k] for k in objectives))


def versus_base(points: list[dict], base: dict, same_as: tuple[str, ...] = ()) -> dict:
    """How the sweep's designs compare with ``base`` (the preset's point on the same workload).

    ``speedup_at_equal_area``: base latency / the lowest latency of a design with area <= the base's;
    ``energy_saving_at_equal_area``: the same for energy; ``dominating``: designs no worse than the base in latency,
    energy and area and better in one (the best of them by latency first). ``same_as``: config fields a design
    must share with the base to count (e.g. ``("clock_ghz",)``: the area model is timing-free, so a faster clock
    costs no area there)."""
    points = [p for p in points if all(p["config"][k] == base["config"][k] for k in same_as)]
    fits = [p for p in points if p["area_ge"] <= base["area_ge"]]
    fastest = min(fits, key=lambda p: (p["latency_us"], p["energy_pj"]), default=None)
    cheapest = min(fits, key=lambda p: (p["energy_pj"], p["latency_us"]), default=None)
    b = np.array([base[k] for k in DESIGN_OBJECTIVES])
    dominating = [p for p in points if (np.array([p[k] for k in DESIGN_OBJECTIVES]) <= b).all()
                  and (np.array([p[k] for k in DESIGN_OBJECTIVES]) < b).any()]
    return {
        "base": base,
        "designs_at_most_base_area": len(fits),
        "fastest_at_equal_area": fastest,
        "speedup_at_equal_area": base["latency_us"] / fastest["latency_us"] if fastest else None,
        "cheapest_at_equal_area": cheapest,
        "energy_saving_at_equal_area": base["energy_pj"] / cheapest["energy_pj"] if cheapest else None,
        "num_dominating_base": len(dominating),
        "best_dominating": min(dominating, key=lambda p: (p["latency_us"], p["energy_pj"]), default=None),
    }
