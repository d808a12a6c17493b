"""PNG plots of one simulation result dict (engine cycles, DRAM bytes by kind, energy breakdown)."""

from __future__ import annotations

from pathlib import Path


def plot_result(result: dict, path: str | Path) -> None:
    """Three panels: per-engine busy/stall/idle cycles, DRAM bytes by kind (read+write), energy by component."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    eng = result["stages"]
    names = list(eng)
    bottom = [0.0] * len(names)
    for key, color in [("busy_cycles", "tab:green"), ("stall_input_cycles", "tab:orange"),
                       ("stall_output_cycles", "tab:red"), ("idle_cycles", "lightgray")]:
        vals = [eng[n][key] for n in names]
        axes[0].bar(names, vals, bottom=bottom, color=color, label=key.replace("_cycles", ""))
        bottom = [b + v for b, v in zip(bottom, vals, strict=False)]
    axes[0].set_ylabel("cycles")
    axes[0].set_title(f"{result['arch']} on {result['workload']['name']}: {result['total_cycles']:.3g} cycles")
    axes[0].legend(fontsize=7)
    axes[0].tick_params(axis="x", rotation=60, labelsize=7)
    kinds = result["dram"]["bytes_by_kind"]
    axes[1].barh(list(kinds), [v / 2**20 for v in kinds.values()], color="tab:blue")
    axes[1].set_xlabel("MiB moved (read + write)")
    axes[1].set_title(f"DRAM {result['dram']['total_bytes'] / 2**20:.2f} MiB")
    en = {k: v for k, v in result["energy_pj"].items() if k != "total" and v > 0}
    axes[2].barh(list(en), [v / 1e6 for v in en.values()], color="tab:purple")
    axes[2].set_xlabel("energy (uJ)")
    axes[2].set_title(f"energy {result['energy_pj']['total'] / 1e6:.3g} uJ")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
