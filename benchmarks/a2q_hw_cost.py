"""What the A2Q headline recipe's weight / XW bitwidth costs in the accelerator: Cora GCN, A2Q at the 1.7-bit
target (penalty a = 10, 1000 epochs, dropout 0.35, hidden 64), trained with weights and XW at each width of
``--widths`` (A2Q's code: 4), exported with ``quant.export`` and run through the cycle-level model (``hw.simulate``,
MEGA preset) with its bit-exact functional check. Per run: validation-selected test accuracy (fake-quant and the
integer path), learned average feature bits, the export's all-in bytes, simulated cycles, DRAM bytes (total and
weights) and energy. Writes benchmarks/results/a2q_hw_cost.json.

    python benchmarks/a2q_hw_cost.py --seeds 5 --widths 4,8

The accuracy of the recipe over 20 seeds is in the quantization table (RESULTS.md's A2Q headline); this script
measures what the same trained models cost in hardware, on fewer seeds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._common import RESULTS, machine, pm, save_json, table_head, train_and_export

RECIPE = ("--fp32-preset", "--bits-control", "penalty",
          "--dataset", "cora", "--model", "gcn", "--quant", "a2q", "--target-bits", "1.7", "--penalty-weight", "10",
          "--dropout", "0.35", "--hidden", "64")  # and --epochs (default 1000)
METRICS = ("test_acc", "test_acc_integer", "avg_bits", "all_in_bytes", "cycles", "dram_bytes", "dram_weight_bytes",
           "energy_uj")


def measure(width: int, seed: int, work: Path, arch: str, epochs: int) -> dict:
    """Train one seed at ``width``-bit weights and XW, export it, simulate it; the figures of one run."""
    from hw.simulate import main as simulate

    run_dir, qgraph = work / f"w{width}_s{seed}", work / f"w{width}_s{seed}.qgraph"
    out, metrics = train_and_export([*RECIPE, "--epochs", str(epochs), "--seeds", "1", "--first-seed", str(seed),
                                     "--weight-bits", str(width), "--xw-bits", str(width)], run_dir, qgraph)
    sim = simulate([str(qgraph), "--arch", arch, "--out", str(work / "sim")])
    if any(c != "bit-exact" for c in sim["functional_check"]):
        raise RuntimeError(f"width {width} seed {seed}: the simulation is not bit-exact: {sim['functional_check']}")
    run = out["per_run"][0]
    figures = {"val_acc": 100 * run["val_acc"], "test_acc": 100 * run["test_acc"],
               "test_acc_integer": 100 * metrics["test_acc_integer"], "avg_bits": metrics["avg_bits"],
               "all_in_bytes": metrics["storage"]["all_in_bytes"], "cycles": sim["total_cycles"],
               "dram_bytes": sim["dram"]["total_bytes"], "dram_weight_bytes": sim["dram"]["bytes_by_kind"]["weights"],
               "energy_uj": sim["energy_pj"]["total"] / 1e6}
    return {"width": width, "seed": seed, **{k: float(v) for k, v in figures.items()}}


def summarize(runs: list[dict], widths: list[int]) -> list[dict]:
    """Mean +- std of every metric per width, and each mean relative to the first width's."""
    rows = []
    for w in widths:
        mine = [r for r in runs if r["width"] == w]
        row = {"width": w, "runs": len(mine)}
        for m in METRICS:
            v = np.array([r[m] for r in mine], dtype=np.float64)
            row[m] = {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}
        rows.append(row)
    for row in rows:
        row["vs_first_width"] = {m: row[m]["mean"] / rows[0][m]["mean"] for m in METRICS if rows[0][m]["mean"]}
    return rows


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--widths", default="4,8", help="comma-separated signed bits of weights and XW (1..8)")
    p.add_argument("--arch", default="mega", help="hw.simulate preset")
    p.add_argument("--epochs", type=int, default=1000, help="the recipe's 1000; fewer for quick checks")
    p.add_argument("--out", type=Path, default=RESULTS / "a2q_hw_cost.json", help="results file")
    args = p.parse_args(argv)
    try:
        widths = [int(w) for w in args.widths.split(",")]
    except ValueError:
        sys.exit(f"error: --widths {args.widths!r}: give comma-separated integers, e.g. 4,8")
    if not widths or any(not 1 <= w <= 8 for w in widths) or args.seeds < 1 or args.epochs < 1:
        sys.exit(f"error: --widths {args.widths!r} must be integers in [1, 8], --seeds and --epochs >= 1")
    t0, runs = time.time(), []
    with tempfile.TemporaryDirectory(prefix="a2q_hw_cost_") as tmp:
        for w in widths:
            for seed in range(args.seeds):
                runs.append(measure(w, seed, Path(tmp), args.arch, args.epochs))
    rows = summarize(runs, widths)
    command = "python benchmarks/a2q_hw_cost.py " + " ".join(argv if argv is not None else sys.argv[1:])
    payload = {"command": command.strip(), "recipe": f"python -m gnn.train {' '.join(RECIPE)} --epochs {args.epochs}",
               "arch": args.arch, "machine": machine(),
               "wall_seconds": time.time() - t0, "rows": rows, "runs": runs}
    save_json(args.out, payload)
    print(f"{'bits':>4} {'test %':>13} {'avg bits':>8} {'all-in KB':>9} {'cycles':>8} {'DRAM MiB':>8} {'uJ':>7}")
    for r in rows:
        print(f"{r['width']:>4} {r['test_acc']['mean']:6.2f} +- {r['test_acc']['std']:4.2f} "
              f"{r['avg_bits']['mean']:8.3f} {r['all_in_bytes']['mean'] / 1024:9.1f} {r['cycles']['mean']:8.0f} "
              f"{r['dram_bytes']['mean'] / 2**20:8.3f} {r['energy_uj']['mean']:7.1f}")
    return payload


def render(res: dict) -> list[str]:
    """The A2Q headline recipe at each weight / XW width: accuracy and what the accelerator model spends."""
    rows = res.get("rows", [])
    if not rows:
        return []
    base = rows[0]["width"]
    lines = ["## A2Q headline recipe: weight / XW bits against accelerator cost", "",
             f"Command: `{res['command']}` (file: `benchmarks/results/a2q_hw_cost.json`). Each run: `{res['recipe']} "
             "--weight-bits W --xw-bits W`, one seed, then `python -m quant.export` and `python -m hw.simulate "
             f"<export> --arch {res['arch']}` (functional check bit-exact). Mean +- std over seeds; ratio = mean / "
             f"the {base}-bit mean. The recipe's accuracy over 20 seeds is in the A2Q headline table of the "
             "quantization section; this measures what the same recipe costs in hardware.", "",
             *table_head("weight / XW bits", "runs", "test acc (fake-quant)", "test acc (integer)", "avg feature bits",
                         "all-in KB", "cycles", "DRAM MiB", "DRAM weights MiB", "energy uJ")]
    def cell(r: dict, m: str, scale: float = 1.0, fmt: str = ".1f") -> str:
        text = f"{r[m]['mean'] / scale:{fmt}} +- {r[m]['std'] / scale:{fmt}}"
        ratio = r.get("vs_first_width", {})
        return text + (f" ({ratio[m]:.2f}x)" if r["width"] != base and m in ratio else "")

    for r in rows:
        lines.append(f"| {r['width']} | {r['runs']} | {pm(r['test_acc'])} | {pm(r['test_acc_integer'])} | "
                     f"{r['avg_bits']['mean']:.2f} | {cell(r, 'all_in_bytes', 1024)} | {cell(r, 'cycles', 1, '.0f')} | "
                     f"{cell(r, 'dram_bytes', 2**20, '.3f')} | {cell(r, 'dram_weight_bytes', 2**20, '.3f')} | "
                     f"{cell(r, 'energy_uj')} |")
    return lines + [""]


if __name__ == "__main__":
    main()
