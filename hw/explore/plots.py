"""The sweep's PNGs: latency vs energy and area vs latency per workload (front and base preset marked), and
accuracy vs energy over (export x design) with each export's accuracy."""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _scatter_per_workload(points: list[dict], fronts: dict, bases: dict, x: str, y: str, labels: tuple[str, str],
                          path: Path) -> None:
    """One panel per workload: every design (grey), its Pareto front (colour), the base preset (star)."""
    plt = _plt()
    names = sorted({p["workload"] for p in points})
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(5.5 * max(1, len(names)), 4.5), squeeze=False)
    for ax, name in zip(axes[0], names, strict=False):
        mine = [p for p in points if p["workload"] == name]
        ax.scatter([p[x] for p in mine], [p[y] for p in mine], s=8, c="lightgray", label=f"designs ({len(mine)})")
        fr = fronts.get(name, [])
        ax.scatter([p[x] for p in fr], [p[y] for p in fr], s=14, c="tab:blue", label=f"Pareto front ({len(fr)})")
        if name in bases:
            ax.scatter([bases[name][x]], [bases[name][y]], s=120, marker="*", c="tab:red", label="base preset")
        ax.set(xscale="log", yscale="log", xlabel=labels[0], ylabel=labels[1], title=name)
        ax.xaxis.set_minor_formatter(plt.NullFormatter())  # log-axis minor labels overlap on narrow ranges
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_sweep(points: list[dict], fronts: dict, joint: list[dict], bases: dict, out: Path) -> list[Path]:
    """Writes ``latency_energy.png``, ``area_latency.png`` and ``accuracy_energy.png`` under ``out``; returns them.

    ``points``: records with ``workload``, ``latency_us``, ``energy_pj``, ``area_ge`` (and ``accuracy`` where
    known); ``fronts``: workload -> its (latency, energy, area) front; ``joint``: the (error, energy, latency, area)
    front; ``bases``: workload -> the base preset's record."""
    paths = [out / "latency_energy.png", out / "area_latency.png", out / "accuracy_energy.png"]
    _scatter_per_workload(points, fronts, bases, "latency_us", "energy_pj", ("latency (us)", "energy (pJ)"), paths[0])
    _scatter_per_workload(points, fronts, bases, "latency_us", "area_ge",
                          ("latency (us)", "relative area (GE, Yosys generic cells + SRAM assumption)"), paths[1])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    with_acc = [p for p in points if p.get("accuracy") is not None]
    for name in sorted({p["workload"] for p in with_acc}):
        mine = [p for p in with_acc if p["workload"] == name]
        ax.scatter([p["energy_pj"] for p in mine], [100 * p["accuracy"] for p in mine], s=8,
                   label=f"{name}: {100 * mine[0]['accuracy']:.2f}% ({len(mine)} designs)")
    ax.scatter([p["energy_pj"] for p in joint], [100 * p["accuracy"] for p in joint], s=30, facecolors="none",
               edgecolors="k", label=f"joint front ({len(joint)})")
    if not with_acc:
        ax.text(0.5, 0.5, "no export accuracy (dataset workloads have random weights)", ha="center",
                transform=ax.transAxes)
    ax.set(xscale="log", xlabel="energy (pJ)", ylabel="test accuracy, integer path (%)",
           title="accuracy vs energy (export x design)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(paths[2], dpi=110)
    plt.close(fig)
    return paths
