"""Generate RESULTS.md from benchmarks/results/*.json (never typed by hand).

    python benchmarks/make_results.py

Known result files get a table each; any other JSON file in results/ is listed with its top-level summary,
so a new benchmark is visible in RESULTS.md before it has a dedicated renderer. Sections follow the pipeline
(STAGES: one `##` per stage, one `###` per result file, a contents list on top), and no line is longer than
LINE_LIMIT: long paragraphs wrap at sentence ends, long command lists and long table cells move into collapsed
lists under their paragraph or table.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    QUANT_GRID_COLUMNS,
    QUANT_GRID_GRAPH,
    QUANT_GRID_LEARNED_COLUMNS,
    QUANT_GRID_NODE,
    RESULTS,
    preset_grid,
)
from quant_headline import HEADLINE_GAP_PT, a2q_headline, a2q_pareto, fewest_bits_within_gap  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "RESULTS.md"


def _pm(s: dict) -> str:
    return f"{s['mean']:.2f} +- {s['std']:.2f}"


def render_fp32(res: dict) -> list[str]:
    lines = ["## FP32 accuracy (validation-selected test accuracy, %)", "",
             "Command: `python benchmarks/fp32_accuracy.py` (file: `benchmarks/results/fp32_accuracy.json`). "
             "Node tasks: one model per seed on the dataset's split (Planetoid public split; Amazon/Coauthor "
             "20/30 per class, cornell5 50/25/25 of labelled nodes; split seed 0). Graph tasks: stratified 10-fold "
             "CV, validation = next fold. ms/epoch: measured beside other jobs, not a speed figure. "
             "The epoch is chosen by validation accuracy (ties: lower validation loss), never by test.", "",
             "| dataset | model | runs | ours: test acc | ours: val acc | published | source | ms/epoch |",
             "|---|---|---|---|---|---|---|---|"]
    for _key, r in sorted(res.get("pairs", {}).items()):
        s = r["summary"]
        pub = r.get("published")
        pub_s = "-" if not pub else (f"{pub[0]:.1f}" + (f" +- {pub[1]:.1f}" if pub[1] is not None else ""))
        src = pub[2] if pub else "-"
        lines.append(f"| {r['dataset']} | {r['model']} | {r['protocol']} | {_pm(s['test_acc'])} | "
                     f"{_pm(s['val_acc'])} | {pub_s} | {src} | {s['ms_per_epoch']:.1f} |")
    lines += ["", f"Machine: `{json.dumps(res.get('machine', {}))}`", ""]
    return lines


def render_speed(res: dict) -> list[str]:
    lines = ["## Training speed against PyG's own layers", "",
             "Command: `python benchmarks/train_speed.py` (file: `benchmarks/results/train_speed.json`). "
             "Median ms per training step (forward, loss, backward, Adam) over repeats that alternate ours and "
             "PyG's in one process; ratio = ours / PyG (target <= 1.1).", "",
             "| case | ours (ms) | PyG (ms) | ratio | sparse input | repeats x steps | command |",
             "|---|---|---|---|---|---|---|"]
    for key, c in res.get("cases", {}).items():
        lines.append(f"| {key} | {c['ours_ms']:.2f} | {c['pyg_ms']:.2f} | {c['ratio']:.3f} | {c['sparse_input']} | "
                     f"{c.get('repeats', res.get('repeats'))} x {c.get('steps', res.get('steps'))} | "
                     f"`{c.get('command', 'python benchmarks/train_speed.py')}` |")
    lines += ["", f"Machine: `{json.dumps(res.get('machine', {}))}`", ""]
    return lines


def render_quant_grid(cells: list[dict]) -> list[str]:
    """The issue's table as a matrix: one row per (dataset, model), one column per method; empty = not run yet."""
    grid = preset_grid(cells)
    head = ["FP32", "DQ-INT8", "DQ-INT4", "A2Q t4", "A2Q t1.7", "degree-aware t4", "degree-aware t1.7"]
    lines = ["Preset grid (each model's preset training, penalty a = 25; cell = test acc mean +- std @ average "
             "feature bits without sign; `not run` = still missing):", "",
             "| dataset | model | runs | " + " | ".join(head) + " |", "|---|---|---|" + "---|" * len(head)]
    for datasets, models in (QUANT_GRID_NODE, QUANT_GRID_GRAPH):
        for ds in datasets:
            for model in models:
                row = [grid.get((ds, model, m, t)) for m, t in QUANT_GRID_COLUMNS]
                runs = next((c["runs"] for c in row if c and "runs" in c), "10 folds" if ds in QUANT_GRID_GRAPH[0]
                            else "10 seeds")
                devices = sorted({c.get("device", "cpu") for c in row if c})
                if devices and devices != ["cpu"]:
                    runs += ", " + " / ".join(devices)  # a row (or part of it) trained on a lent GPU
                text = ["not run" if c is None else _pm(c["test_acc"]) + (
                    f" @ {c['avg_bits']['mean']:.2f}" if c.get("avg_bits") else "") for c in row]
                lines.append(f"| {ds} | {model} | {runs} | " + " | ".join(text) + " |")
    return lines + [""]


def _training_text(c: dict) -> str:
    """How a quantization-table cell trained, e.g. '10 seeds, 1000 epochs, dropout 0.35, wd 0.0005, hidden 64'."""
    return (f"{c['runs']}, " if "runs" in c else "") + f"{c.get('epochs', '-')} epochs" + "".join(
        f", {label} {c[key]:g}" for key, label in (("dropout", "dropout"), ("weight_decay", "wd")) if key in c) \
        + (f", {c['features']} features" if "features" in c else "") \
        + (f", hidden {c['hidden_dim']}" if "hidden_dim" in c else "") \
        + (f", after {c['fp32_warmup_epochs']} FP32 warm-up epochs" if "fp32_warmup_epochs" in c else "") \
        + "".join(f", {label} {c[key]}-bit" for key, label in (("weight_bits", "weights"), ("xw_bits", "XW"))
                  if key in c) \
        + (f", {c['device']}" if "device" in c else "")


def render_a2q_headline(cells: list[dict]) -> list[str]:
    """The issue's headline (A2Q GCN, Cora, <= 1.7 bits, within 1 pt of FP32), selected on validation."""
    rows, selected = a2q_headline(cells)
    if not rows:
        return []
    lines = ["A2Q headline, Cora GCN at a 1.7-bit target: every A2Q run against the FP32 run of the same training "
             "(same seeds); the configuration is chosen on mean validation accuracy (marked), never on test:", "",
             "| training | penalty a | val acc | test acc | avg bits (no sign) | runs within budget | FP32 test (same "
             "training) | gap (pt) | selected |", "|---|---|---|---|---|---|---|---|---|"]

    def order(r: dict) -> tuple:  # runs within the budget first, then by gap; rows without an FP32 last
        c = r["cell"]
        return (c.get("runs_within_bit_budget") != c["test_acc"]["n"], r["gap"] is None, -(r["gap"] or 0.0))

    for r in sorted(rows, key=order):
        c = r["cell"]
        lines.append(f"| {_training_text(c)} | {c.get('penalty_weight', '-')} | "
                     f"{_pm(c['val_acc']) if 'val_acc' in c else '-'} | {_pm(c['test_acc'])} | "
                     f"{c['avg_bits']['mean']:.2f} | {c.get('runs_within_bit_budget', '-')} / {c['test_acc']['n']} | "
                     f"{_pm(r['fp32']['test_acc']) if r['fp32'] else 'not run'} | "
                     f"{'-' if r['gap'] is None else format(r['gap'], '+.2f')} | "
                     f"{'**selected**' if r is selected else ''} |")
    if selected is not None:
        met = "met" if selected["gap"] >= HEADLINE_GAP_PT else "missed"
        c = selected["cell"]
        lines += ["", f"Selected on validation: {_pm(c['test_acc'])} at {c['avg_bits']['mean']:.2f} bits, "
                  f"{selected['gap']:+.2f} pt against its FP32 (target >= {HEADLINE_GAP_PT:+.1f} pt): {met}. A run "
                  "is eligible when every seed's selected epoch kept the bit budget and its validation accuracy "
                  "was recorded (the oldest runs predate that); `-` = no FP32 run of that training."]
    return lines + [""]


def render_a2q_pareto(cells: list[dict]) -> list[str]:
    """The selected headline recipe at every target: where the learned-bit methods meet FP32 within 1 pt."""
    fp32, rows = a2q_pareto(cells)
    if len(rows) < 2:
        return []
    recipe = _training_text(a2q_headline(cells)[1]["cell"])  # the quantized run's: its weight / XW bits too
    lines = [f"Bits against accuracy of the selected recipe ({recipe}, penalty a = "
             f"{rows[0]['cell'].get('penalty_weight')}), every target: Cora GCN, validation-selected test accuracy "
             f"against the FP32 run of that training ({_pm(fp32['test_acc'])}); plot "
             "`quant_pareto_cora_gcn.png`:", "",
             "| method | target bits | avg bits (no sign) | val acc | test acc | gap (pt) | within 1 pt |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["cell"]
        lines.append(f"| {c['method']} | {c['target_bits']:g} | {c['avg_bits']['mean']:.2f} | "
                     f"{_pm(c['val_acc']) if 'val_acc' in c else '-'} | {_pm(c['test_acc'])} | {r['gap']:+.2f} | "
                     f"{'yes' if r['gap'] >= HEADLINE_GAP_PT else 'no'} |")
    for method in sorted({r["cell"]["method"] for r in rows}):
        best = fewest_bits_within_gap([r for r in rows if r["cell"]["method"] == method])
        lines += ["", f"{method}: " + ("no target of this recipe comes within 1 pt of FP32." if best is None else
                  f"the fewest bits whose run tests within 1 pt of FP32 are {best['cell']['avg_bits']['mean']:.2f} "
                  f"(target {best['cell']['target_bits']:g}, {best['gap']:+.2f} pt).")]
    return lines + ["", "The curve describes test accuracy per target; it selects nothing (the headline above is "
                    "chosen on validation among the 1.7-bit runs).", ""]


def render_a2q_hw_cost(res: dict) -> list[str]:
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
             "| weight / XW bits | runs | test acc (fake-quant) | test acc (integer) | avg feature bits | all-in KB | "
             "cycles | DRAM MiB | DRAM weights MiB | energy uJ |", "|---|---|---|---|---|---|---|---|---|---|"]
    def cell(r: dict, m: str, scale: float = 1.0, fmt: str = ".1f") -> str:
        text = f"{r[m]['mean'] / scale:{fmt}} +- {r[m]['std'] / scale:{fmt}}"
        ratio = r.get("vs_first_width", {})
        return text + (f" ({ratio[m]:.2f}x)" if r["width"] != base and m in ratio else "")

    for r in rows:
        lines.append(f"| {r['width']} | {r['runs']} | {_pm(r['test_acc'])} | {_pm(r['test_acc_integer'])} | "
                     f"{r['avg_bits']['mean']:.2f} | {cell(r, 'all_in_bytes', 1024)} | {cell(r, 'cycles', 1, '.0f')} | "
                     f"{cell(r, 'dram_bytes', 2**20, '.3f')} | {cell(r, 'dram_weight_bytes', 2**20, '.3f')} | "
                     f"{cell(r, 'energy_uj')} |")
    return lines + [""]


# Longest command list written inline in a paragraph; a longer one becomes a collapsed list under it.
COMMANDS_INLINE_CHARS = 600


def _commands(commands: list[str], sep: str = "; ") -> tuple[str, list[str]]:
    """A command list for a paragraph: the commands themselves when short, else their count with the lines that
    list them (a collapsed block, to follow the paragraph)."""
    text = sep.join(f"`{c}`" for c in commands)
    if len(text) <= COMMANDS_INLINE_CHARS:
        return text, []
    return f"{len(commands)}, listed below", ["", f"<details><summary>{len(commands)} commands</summary>", "",
                                             *[f"- `{c}`" for c in commands], "", "</details>"]


def _live_commands(res: dict) -> list[str]:
    """The file's commands that still own a cell, in their recorded order (cells without a command keep all)."""
    commands = res.get("commands", [res.get("command", "")])
    owners = {c.get("command") for c in res.get("cells", [])}
    return commands if None in owners else [c for c in commands if c in owners]


def render_quant(res: dict) -> list[str]:
    listed, listing = _commands(_live_commands(res))
    lines = ["## Quantization (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/quant_table.json`; commands (those whose cells are still in the file; a "
             "cell rerun under another command replaces the old one): " + listed + ".", *listing,
             "", res.get("note", ""), "", *render_quant_grid(res.get("cells", [])),
             *render_a2q_headline(res.get("cells", [])), *render_a2q_pareto(res.get("cells", [])),
             "Every cell, including the tuning runs of the A2Q headline (Cora GCN at 1.7 bits):", "",
             "| dataset | model | method | training | target bits | penalty a | test acc | val acc | max test over "
             "epochs (A2Q-code style, not the headline) | avg bits (no sign) | avg bits (with sign) | 32/bits | "
             "runs within budget |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in res.get("cells", []):
        bits = c.get("avg_bits")
        training = _training_text(c)
        val = _pm(c["val_acc"]) if "val_acc" in c else "-"
        lines.append(
            f"| {c['dataset']} | {c['model']} | {c['method']} | {training} | {c.get('target_bits') or '-'} | "
            f"{c.get('penalty_weight', '-')} | {_pm(c['test_acc'])} | {val} | {_pm(c['max_test_acc_over_epochs'])} | "
            f"{bits['mean']:.3f} | {c['avg_bits_with_sign']['mean']:.3f} | {c['compression']:.1f} | "
            f"{c.get('runs_within_bit_budget', '-')} |" if bits else
            f"| {c['dataset']} | {c['model']} | {c['method']} | {training} | - | - | {_pm(c['test_acc'])} | {val} | "
            f"{_pm(c['max_test_acc_over_epochs'])} | 32 | 32 | 1.0 | - |")
    lines += ["", "All-in compression (every feature tensor, weights, metadata and adjacency) of each learned-bit "
              "cell: the table \"All-in compression of the quantization grid\" (seed 0's export).", "",
              "Training time against FP32: see the quantization speed tables, `quant_speed.json` (Cora and "
              "Coauthor CS GCN, 20 repeats) and `quant_speed_grid.json` (every dataset and model of the grid, a few "
              "steps each); the cells above ran beside other jobs.", "", *render_quant_gpu_time(res.get("cells", [])),
              "GAT at low targets: GAT's per-node learned tensors (the linear transform's output, and the post-ELU "
              "input of layer 2) are signed, so a node at the 1-bit floor has qmax = 2^0 - 1 = 0 and is stored as "
              "all zeros, and its straight-through gradient is masked off. GCN, GIN and SAGE learn bits on post-ReLU "
              "tensors, where 1 reported bit still keeps {0, s}. At the 1.7-bit target the GAT runs fall to the "
              "floor and predict one class; a weaker penalty (a = 3) and a 2.5-bit target are in the cell list above.",
              "",
              "GAT's signed rows count their sign bit: A2Q's `analysis_bit` would report each of them one bit lower "
              "(`quant/config.py`).", "",
              "Plots (`benchmarks/results/`):", ""]
    captions = {"quant_acc_vs_bits.png": "test accuracy against average bits, one panel per dataset",
                "quant_bits_vs_degree.png": "learned bits against in-degree (seed 0)",
                "quant_pareto_cora_gcn.png": "the A2Q headline recipe at every target"}
    for name in (Path(f).name for f in res.get("plots", [])):
        lines += [f"![{captions.get(name, name)}](benchmarks/results/{name})", ""]
    return lines


def render_quant_gpu_time(cells: list[dict]) -> list[str]:
    """Time per epoch against the FP32 cell of the same GPU command (cells that trained one after another)."""
    gpu = [c for c in cells if c.get("device") and c.get("time_per_epoch_vs_fp32")]
    if not gpu:
        return []
    shared = sorted({c["shared_device_with"] for c in gpu if c.get("shared_device_with")})
    lines = ["On the GPU (cells of one command ran one after another, so their times compare): ms per epoch and "
             "time against the FP32 cell of the same command." + "".join(f" Shared with {s}." for s in shared), "",
             "| dataset | model | device | method | target bits | ms / epoch | x FP32 |",
             "|---|---|---|---|---|---|---|"]
    for c in gpu:
        lines.append(f"| {c['dataset']} | {c['model']} | {c['device']} | {c['method']} | {c.get('target_bits') or '-'} "
                     f"| {c['ms_per_epoch']:.1f} | {c['time_per_epoch_vs_fp32']:.2f} |")
    return lines + ["", "A full-batch FP32 GCN epoch takes a few ms on the GPU, so the quantizers' per-call work "
                    "(Degree-Quant: two order statistics of every quantized tensor per training step) weighs far more "
                    "than on the CPU.", ""]


def render_quant_speed(res: dict, name: str = "quant_speed",
                       title: str = "Quantization-aware training speed against FP32") -> list[str]:
    commands = sorted({c.get("command") for case in res.get("cases", {}).values() for c in case.values()} - {None})
    listed, listing = _commands(commands or [res.get("command", "python benchmarks/quant_speed.py")], ", ")
    lines = [f"## {title}", "",
             "Command" + ("s" if len(commands) > 1 else "") + ": " + listed
             + f" (file: `benchmarks/results/{name}.json`). Median ms per trainer step (forward, loss, memory "
             "penalty, backward, Adam) over repeats in which the methods alternate in one process; ratio = method / "
             "FP32 (target for A2Q: <= 1.5).", *listing, ""]
    cases = res.get("cases", {})
    order = ("none", "a2q", "degree-aware", "dq-int8", "dq-int4")
    methods = sorted(next(iter(cases.values()), {}), key=lambda m: order.index(m) if m in order else len(order))
    lines += ["| case | " + " | ".join("fp32" if m == "none" else m for m in methods) + " |",
              "|---" * (len(methods) + 1) + "|"]
    for key, c in cases.items():
        lines.append(f"| {key} | " + " | ".join(f"{c[m]['ms']:.1f} ms (x{c[m]['ratio_vs_fp32']:.2f})"
                                               for m in methods) + " |")
    return lines + ["", f"Machine: `{json.dumps(res.get('machine', {}))}`", ""]


def render_quant_speed_grid(res: dict) -> list[str]:
    """The step-time ratios of every (dataset, model) of the quantization grid (`quant_speed.py --name
    quant_speed_grid`)."""
    lines = render_quant_speed(res, "quant_speed_grid", "Training step time against FP32 for every (dataset, model) "
                               "of the quantization grid (A2Q at the 1.7-bit target)")
    return lines[:-2] + [
        f"Few steps per method ({res.get('repeats')} repeats of {res.get('steps')} steps, medians) on a machine shared "
        "with other jobs: ratios within a row compare (the methods alternate), absolute times and small differences "
        "do not. Quantized GIN and GraphSAGE quantize the aggregate of the layer's input, so their first layer "
        "aggregates the F_in-wide input, where FP32 projects to the hidden width first: hence their large ratios "
        "on the wide bag-of-words inputs (Coauthor CS: 6805 features). The issue's A2Q target (<= 1.5x on Cora "
        "and Coauthor CS) is judged on the longer run (20 repeats of 20 steps) of the table above.", ""] + lines[-2:]


def render_quant_speed_sparse_input(res: dict) -> list[str]:
    """Sparse against dense input features, per method, from one `quant_speed.py --dense-input` run."""
    lines = ["## Sparse input features in (quantized) training", "",
             f"Command: `{res.get('command', '')}` (file: `benchmarks/results/quant_speed_sparse_input.json`). Median "
             "ms per trainer step, the methods and both input layouts alternating in one process. With sparse input a "
             "quantized GraphSAGE keeps its first-layer neighbour mean sparse and quantizes the stored values only "
             "(same values and gradients as dense, `tests/quant/test_sparse_aggregate.py`), GIN likewise its "
             "`(A + I) X + eps X`; from the third step on the product reuses a plan built once for the graph's "
             "pattern (`gnn/conv/sparse_product.py`: one SpMV per step). FP32 GraphSAGE / GIN project before they "
             "aggregate.", "",
             "| case | method | sparse input ms | dense input ms | sparse speed-up | sparse vs FP32 (sparse) |",
             "|---|---|---|---|---|---|"]
    for key, c in res.get("cases", {}).items():
        for m, v in c.items():
            dense = c.get(f"{m}@dense")
            if m.endswith("@dense") or dense is None:
                continue
            lines.append(f"| {key} | {'fp32' if m == 'none' else m} | {v['ms']:.0f} | {dense['ms']:.0f} | "
                         f"x{dense['ms'] / v['ms']:.1f} | x{v['ratio_vs_fp32']:.2f} |")
    load = res.get("load_average_1min")
    load_text = (f"1-min load average {load['start']:.1f} at the start, {load['end']:.1f} at the end. " if load else
                 "Load not recorded. ")
    return lines + ["", load_text + "The speed-up is a ratio within one process.", "",
                    f"Machine: `{json.dumps(res.get('machine', {}))}`", ""]


def render_integer_accuracy(res: dict) -> list[str]:
    """Integer golden models against the fake-quant models they come from (``benchmarks/integer_accuracy.py``)."""
    lines = ["## Integer path against fake-quant (test accuracy, %)", "",
             f"File: `benchmarks/results/integer_accuracy.json`; commands in the last column. Per seed the trained "
             f"(validation-selected) quantized model is evaluated in float32 fake-quant and through its integer golden "
             f"model (GCN: `quant.archs.gcn.integer`, GraphSAGE: `quant.archs.sage.integer`, GIN: `quant.archs.gin.integer`, "
             f"trained with its MLP's hidden activation quantized (`gin (quantized hidden)`, A2Q's code) or without "
             f"it as the grid's GIN cells (`gin (16-bit hidden)`: the integer path carries the hidden activation in "
             f"16-bit fixed point), GAT: `quant.archs.gat.integer`; frac_bits 14 (GAT 20), 32-bit partial sums); "
             f"delta = integer - fake-quant, mean +- std over seeds (target: within "
             f"{res.get('target_gap_pt', 0.3)} pt).", "",
             "| dataset | model | method | target bits | seeds | avg bits | fake-quant | integer | delta (pt) | "
             "max abs delta (pt) | min prediction agreement | command |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in res.get("cells", []):
        model = c["model"]
        if model == "gin":  # cells written before gin_hidden existed were trained with the hidden quantizer
            model += " (16-bit hidden)" if c.get("gin_hidden") == "fixed" else " (quantized hidden)"
        lines.append(f"| {c['dataset']} | {model} | {c['method']} | {c['target_bits']:g} | {c['seeds']} | "
                     f"{c['avg_bits']['mean']:.2f} | {_pm(c['test_acc_fake_quant'])} | {_pm(c['test_acc_integer'])} | "
                     f"{c['delta_pt']['mean']:+.2f} +- {c['delta_pt']['std']:.2f} | {c['max_abs_delta_pt']:.2f} | "
                     f"{100 * c['prediction_agreement_min']:.2f} % | `{c.get('command', '')}` |")
    return lines + ["", f"Machine: `{json.dumps(res.get('machine', {}))}`", ""]


# Graph-transformer configuration fields that rows written before the field existed do not record, with the value
# those runs used (ffn_ratio's default was 2; the others were off; the degree embedding was always there).
GT_FIELDS_BEFORE_RECORDED = {"ffn_ratio": 2, "degree_embedding": True, "label_smoothing": 0.0, "ema_decay": 0.0,
                             "branch_activation": "none", "layer_scale": 0.0}


def render_gt_accuracy(res: dict) -> list[str]:
    lines = ["## Graph transformer accuracy (validation-selected test accuracy, %)", "",
             f"File: `benchmarks/results/gt_accuracy.json`; last command: `python {res.get('command', '')}` "
             "(rows with their own command name it).", "",
             "Rows ending in `_cuda` ran GCN and the graph transformer on the GPU named in the device column, "
             "against the GCN of that same run.", "",
             "| dataset | GCN (gnn/, FP32) | graph transformer | test acc | avg feature bits (no sign) | "
             "gap to GCN (pt) | gap to its FP32 graph transformer (pt) "
             "| seeds | device | command |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, d in res.get("datasets", {}).items():
        base = d.get("gt_interleaved", {}).get("config", {})
        for key, gt in d.items():
            if not key.startswith("gt_"):
                continue
            gcn = d["gcn_cuda" if key.endswith("_cuda") else "gcn"]
            bits = gt.get("final_avg_bits", {}).get("mean")
            gap = gt["test_acc"]["mean"] - gcn["test_acc"]["mean"]
            cfg = {**GT_FIELDS_BEFORE_RECORDED, **gt.get("config", {})}
            ref = {**GT_FIELDS_BEFORE_RECORDED, **base} if base else {}
            set_here = gt.get("overrides", {})  # gt_accuracy --set: named once, as set
            differs = [f"{k}={cfg[k]}" for k in sorted(ref) if k in cfg and cfg[k] != ref[k] and k not in set_here]
            variant = key[3:] + (f" (config differs: {', '.join(differs)})" if differs else "")
            if set_here:
                variant += " (set: " + ", ".join(f"{k}={v}" for k, v in sorted(set_here.items())) + ")"
            fp32_key = f"gt_{cfg.get('attention', 'interleaved')}" + ("_cuda" if key.endswith("_cuda") else "")
            fp32 = d.get(fp32_key) if bits is not None else None
            own = f"{gt['test_acc']['mean'] - fp32['test_acc']['mean']:+.2f}" if fp32 else "-"
            seeds = str(gt["test_acc"]["n"])
            if not gt.get("complete", True):  # a run stopped at its time limit keeps its finished seeds
                seeds += f" of {gt['seeds_planned']} (stopped)"
            lines.append(f"| {name} | {_pm(gcn['test_acc'])} | {variant} | {_pm(gt['test_acc'])} | "
                         f"{'32 (FP32)' if bits is None else f'{bits:.2f}'} | {gap:+.2f} | {own} | "
                         f"{seeds} | "
                         f"{gt.get('device', 'cpu')} | "
                         f"{'`' + gt['command'] + '`' if gt.get('command') else '-'} |")
    return lines + [""]


def render_hw_ablation(res: dict) -> list[str]:
    paper = res.get("paper", {})
    steps = ("degree_aware_bitmap", "adaptive_package", "condense_edge")
    lines = ["## MEGA ablation in the cycle model (speedup x / DRAM reduction x per step)", "",
             "File: `benchmarks/results/hw_ablation.json` (`python benchmarks/hw_ablation.py`; each row names its "
             "command). Steps: FP32 -> degree-aware bits, plain bitmap -> + Adaptive-Package -> + Condense-Edge; "
             "then MEGA (all steps) against the HyGCN-like and GCNAX-like presets.", "",
             "| workload | bits | node order | degree-aware | + Adaptive-Package | + Condense-Edge | MEGA vs FP32 | "
             "MEGA vs HyGCN-like | MEGA vs GCNAX-like |", "|---|---|---|---|---|---|---|---|---|"]

    def cell(d: dict | None) -> str:
        return f"{d['speedup']:.2f} / {d['dram_reduction']:.2f}" if d else "-"

    lines.append(f"| MEGA paper ({paper.get('source', '')}) | learned | METIS | "
                 + " | ".join(cell(paper.get(k)) for k in steps) + " | - | "
                 + cell(paper.get("headline_vs_hygcn")) + " | - |")
    rules = set()
    for name, d in res.get("datasets", {}).items():
        st = d["steps"]
        source = d.get("bits_source", "degree rule")
        if source.startswith("degree"):
            rules.add(source)
            source = "degree rule"
        lines.append(f"| {name} | {source} | {d.get('order', 'natural')} | "
                     + " | ".join(cell(st.get(k)) for k in steps + ("mega_vs_fp32", "mega_vs_hygcn", "mega_vs_gcnax"))
                     + " |")
    lines += [""] + [f"Degree rule: {r.split(': ', 1)[-1]}." for r in sorted(rules) if ": " in r]
    from hw_ablation import notes  # derived from the rows above, never typed
    lines += ["", "Notes (figures read from the rows above):", ""] + [f"- {n}" for n in notes(res)] + [""]
    return lines


def render_dist_accuracy(res: dict) -> list[str]:
    from dist_accuracy import paired_gap  # per-seed pairing lives with the script that stores the seeds
    lines = ["## Distributed training: accuracy per halo codec (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/dist_accuracy.json` (each variant names its commands). GCN, 2 layers, the "
             "single-process preset; METIS partitions. Gap = variant - fp32 exchange in points, paired per seed "
             "(seed s: split s, partition seed s) over the seeds both hold, +- its standard error.", "",
             "| dataset | parts | seeds | epochs | variant | test acc | gap to fp32 (pt) | exchange bytes / epoch | "
             "fp32 / variant bytes |", "|---|---|---|---|---|---|---|---|---|"]
    for name, d in res.get("datasets", {}).items():
        ref = d["variants"].get("fp32")
        ref_vol = sum(ref["bytes_per_epoch"]) / len(ref["bytes_per_epoch"]) if ref else None
        for variant, v in d["variants"].items():
            seeds = len(v["test_acc"])
            gap, se, paired = paired_gap(v, ref) if ref else (None, None, 0)
            if variant == "fp32" or not paired:
                gap_text = "-"
            else:
                gap_text = f"{100 * gap:+.2f} +- {100 * se:.2f}" + (f" ({paired} paired)" if paired != seeds else "")
            vol = sum(v["bytes_per_epoch"]) / len(v["bytes_per_epoch"])
            ratio = f"{ref_vol / vol:.1f}" if ref else "-"
            lines.append(f"| {name} | {d['parts']} | {seeds} | {d['epochs']} | {variant} | "
                         f"{100 * v['test_mean']:.2f} +- {100 * v['test_std']:.2f} | {gap_text} | {vol:,.0f} | "
                         f"{ratio} |")
    return lines + ["", f"Note: {res.get('note', '')}", ""]


def render_hw_sim(res: dict) -> list[str]:
    load = res.get("load_average_1min", {})
    lines = ["## Cycle-model speed (one core)", "",
             f"File: `benchmarks/results/hw_sim.json`. Command: `{res.get('command', 'python benchmarks/hw_sim.py')}`"
             f" (1-min load average {load.get('start', float('nan')):.1f} at the start). MEGA preset, 2-layer GCN "
             "(F_in -> 128 -> 16), degree-rule bits; every run checks each layer's outputs bit for bit. Build = "
             "workload construction (quantization and the float64 reference forward), timed apart from the "
             "simulation. Targets: Coauthor CS <= 60 s, a 1M-edge graph <= 10 min.", "",
             "| graph | nodes | directed edges | build s | simulation s | simulated cycles | cycles / s | edges / s | "
             "DRAM MB | functional check |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, g in res.get("graphs", {}).items():
        lines.append(f"| {name} | {g['num_nodes']:,} | {g['num_edges']:,} | {g['build_s']:.1f} | "
                     f"{g['sim_wall_s']:.1f} | {g['total_cycles']:,.0f} | {g['sim_cycles_per_s']:,.0f} | "
                     f"{g['sim_edges_per_s']:,.0f} | {g['dram_bytes'] / 1e6:.1f} | "
                     f"{', '.join(g['functional_check'])} |")
    lines += ["", "Per-engine bars of the plots: busy, input stall, output stall and idle cycles of each stage; "
              "the decoder row sums the combination-side and the aggregation-side decoders (`hw/config.py`, "
              "`num_decoders`), which work in parallel, so it can exceed the total.", ""]
    for name in res.get("graphs", {}):  # the per-engine / DRAM plot of each graph, when the script wrote it
        if (RESULTS / f"hw_sim_{name}.png").is_file():
            lines += [f"![cycle model on {name}: engines and DRAM traffic](benchmarks/results/hw_sim_{name}.png)", ""]
    return lines


def render_dist_quant_accuracy(res: dict) -> list[str]:
    lines = ["## Quantized + distributed training against single-process (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/dist_quant_accuracy.json` (each row names its command). Same seeds, "
             "preset GCN, same QuantConfig on both sides.", "",
             "| dataset | quant | target bits | parts | exchange | seeds | single-process | bits | distributed | "
             "final bits | gap (pt) | command |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for e in res.get("runs", {}).values():
        sp, dp = e["single_process"], e["distributed"]
        lines.append(f"| {e['dataset']} | {e['quant']} | {e['target_bits']:g} | {e['parts']} | {e['exchange']} | "
                     f"{e['seeds']} | {100 * sp['test_acc']['mean']:.2f} +- {100 * sp['test_acc']['std']:.2f} | "
                     f"{sp['avg_bits']['mean']:.2f} | {100 * dp['test_acc']['mean']:.2f} +- "
                     f"{100 * dp['test_acc']['std']:.2f} | {dp['final_avg_bits']['mean']:.2f} | {e['gap_pt']:+.2f} | "
                     f"`{e['command']}` |")
    return lines + [""]


def render_dist_time(res: dict) -> list[str]:
    g = res.get("graph", {})
    lines = ["## Distributed training: epoch time per halo codec", "",
             f"File: `benchmarks/results/dist_time.json`. Graph {g.get('name')} ({g.get('num_nodes')} nodes, "
             f"{g.get('num_edges')} edges), {res.get('model')}. Seconds are medians over timed epochs of the max over "
             "ranks. Links: " + "; ".join(f"{k}: {v}" for k, v in res.get("links", {}).items() if v) + ".", "",
             "| ranks | link | codec | epoch s | compute s | comm s | wait s | codec s | MB / epoch | "
             "epoch speedup vs fp32 | comm speedup vs fp32 | oversubscribed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    speed = res.get("speedup_vs_fp32", {})
    for r in res.get("rows", []):
        sp = speed.get(f"{r['ranks']} ranks, {r['link']}, {r['codec']}")
        ratios = f"{sp['epoch']:.2f} | {sp['comm']:.2f}" if sp else "- | -"
        lines.append(f"| {r['ranks']} | {r['link']} | {r['codec']} | {r['epoch_s']:.3f} | {r['compute_s']:.3f} | "
                     f"{r['comm_s']:.4f} | {r['wait_s']:.3f} | {r['codec_s']:.4f} | {r['bytes'] / 1e6:.2f} | "
                     f"{ratios} | {r['oversubscribed']} |")
    return lines + ["", f"Note: {res.get('note', '')}", ""]


def render_dist_bytes(res: dict) -> list[str]:
    lines = ["## Distributed training: exchange volume per codec", "",
             f"File: `benchmarks/results/dist_bytes.json`. {res.get('dataset')}, {res.get('parts')} parts, hidden "
             f"{res.get('hidden')}, {res.get('layers')} layers; {res.get('note', '')}.", "",
             "| codec | bytes / epoch | formula | fp32 / codec |", "|---|---|---|---|"]
    for name, c in res.get("codecs", {}).items():
        lines.append(f"| {name} | {c['bytes_per_epoch']:,} | {c['formula_bytes_per_epoch']:,} | "
                     f"{c['ratio_vs_fp32']:.1f} |")
    return lines + [""]


def render_gt_screen(res: dict) -> list[str]:
    lines = ["## Graph transformer configuration screen (validation accuracy, %)", "",
             "File: `benchmarks/results/gt_screen.json`; each row names its command (`benchmarks/gt_screen.py`). "
             "Variants of the default configuration (`gt_accuracy.GT_CONFIG`, row `base`) on the same seeds, one "
             "thread each, sorted by mean validation accuracy, the selection criterion; test accuracy is shown, "
             "never used to choose.", "",
             "| dataset | variant | overrides | val acc | val - base (pt) | test acc | selected epochs | command |",
             "|---|---|---|---|---|---|---|---|"]
    for name, variants in res.get("datasets", {}).items():
        base = variants.get("base", {}).get("val_acc", {}).get("mean")
        for key, v in sorted(variants.items(), key=lambda kv: -kv[1]["val_acc"]["mean"]):
            over = ", ".join(f"{k}={val}" for k, val in v["overrides"].items()) or "-"
            delta = f"{v['val_acc']['mean'] - base:+.2f}" if base is not None else "-"
            epochs = " ".join(str(r["epoch"]) for r in v["per_seed"])
            lines.append(f"| {name} | {key} | {over} | {_pm(v['val_acc'])} | {delta} | {_pm(v['test_acc'])} | "
                         f"{epochs} | `{v['command']}` |")
    return lines + ["", f"Machine: `{json.dumps(res.get('machine', {}))}`", ""]


def render_gt_halo_codec(res: dict) -> list[str]:
    lines = ["## Graph transformer: compressed halo K/V exchange (validation-selected test accuracy, %)", "",
             f"File: `benchmarks/results/gt_halo_codec.json`; command: `{res.get('command', '')}`. Sparse layers "
             "exchange only the K/V rows of nodes with edges across ranks, through the codec (rows forward, "
             "gradients back); the dense layer stays exact. Gap = paired per seed against fp32 exchange "
             "(standard error in brackets).", "",
             "| dataset | ranks | codec | seeds | test acc | gap to fp32 (pt) | wall s | command |",
             "|---|---|---|---|---|---|---|---|"]
    for name, d in res.get("datasets", {}).items():
        for codec, c in d["codecs"].items():
            gap = "-" if codec == "fp32" else f"{c['paired_gap_pts']:+.2f} ({c['paired_gap_se']:.2f})"
            lines.append(f"| {name} | {d['ranks']} | {codec} | {len(c['seed'])} | {c['mean']:.2f} +- {c['std']:.2f} "
                         f"| {gap} | {c['wall_s']:.0f} | `{c['command']}` |")
    return lines + [""]


def render_gt_comm_bytes(res: dict) -> list[str]:
    lines = ["## Graph transformer: communication bytes per attention layer (forward, all ranks)", "",
             f"File: `benchmarks/results/gt_comm_bytes.json`; command: `{res.get('command', '')}`. Hidden "
             f"{res.get('hidden')}, {res.get('heads')} heads, fp32 unless named. From `graphtransformer.volume` and "
             "the halo plans of `shard_graph`; tests check that a real run counts exactly these bytes. Order: METIS "
             "clusters, one per rank (what distributed runs use), or the dataset's own node order.", "",
             "| dataset | ranks | order | Ulysses MB | ring MB | halo fp32 MB | halo int1 MB | Ulysses / halo fp32 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in res.get("rows", []):
        b = r["bytes"]
        lines.append(f"| {r['dataset']} | {r['world']} | {r['order']} | {b['ulysses']['total'] / 1e6:.2f} | "
                     f"{b['ring']['total'] / 1e6:.2f} | {b['halo fp32']['total'] / 1e6:.2f} | "
                     f"{b['halo int1']['total'] / 1e6:.3f} | {r['ulysses_over_halo_fp32']:.1f} |")
    return lines + [""]


def render_gt_attention(res: dict, name: str = "gt_attention") -> list[str]:
    default = res.get("command", "python benchmarks/gt_attention.py")
    listed, listing = _commands(list(dict.fromkeys(r.get("command", default) for r in res.get("rows", []))))
    gpu = res.get("device", "cpu") != "cpu"
    memory = ("GPU memory = peak allocation during a timed step above what was allocated before it. `sparse_fused` = "
              "the edge-list kernel with recompute backward; `flex` = FlexAttention block-sparse tiles in METIS order "
              "(tiles with >= 32 edges; the rest of the edges through the edge list; setup = METIS + plan), "
              "`flex_m1` = every edge in a tile; `cluster` = the CPU-era tile loop (one dense product per tile)."
              if gpu else "Memory = peak RSS growth of the last timed run (small allocations reuse freed heap and "
              "read as ~0).")
    lines = [f"## Graph transformer: attention kernels, forward + backward against sequence length"
             f"{' (GPU)' if gpu else ''}", "",
             f"File: `benchmarks/results/{name}.json`; commands: " + listed
             + f". {res.get('heads')} heads x {res.get('head_dim')}, {res.get('dtype')}, "
             + (f"torch {res.get('torch')}, " if gpu else f"{res.get('threads')} thread(s), ")
             + f"device: {res.get('device', 'cpu')}. `dense` = explicit softmax with the "
             "graph mask (same result as sparse), `full_flash` = all-pairs attention through the fused flash kernel "
             f"(the cost of a dense layer). {memory}", *listing, "",
             f"| nodes | edges | kernel | fwd+bwd ms | {'peak GPU MiB' if gpu else 'peak RSS growth MiB'} | "
             "setup s | edges in tiles |", "|---|---|---|---|---|---|---|"]
    for r in sorted(res.get("rows", []), key=lambda r: (r["num_nodes"], r["kernel"])):
        mem = r.get("peak_mem_mib", r.get("peak_rss_growth_mib"))
        share = r.get("tile_edge_fraction", r.get("dense_edge_fraction"))
        time_cell = r.get("error") or f"{r['fwd_bwd_ms']:.1f}"
        setup = r.get("setup_s")
        lines.append(f"| {r['num_nodes']} | {r['num_edges']} | {r['kernel']} | {time_cell} | "
                     f"{'-' if mem is None else f'{mem:.1f}'} | {'-' if setup is None else f'{setup:.1f}'} | "
                     f"{'-' if share is None else f'{share:.2f}'} |")
    for key, label in (("dense_over_sparse_speedup", "Masked dense / sparse time"),
                       ("full_flash_over_sparse_speedup", "All-pairs flash / sparse time")):
        speed = res.get(key, {})
        if speed:
            lines += ["", f"{label}: " + ", ".join(f"N={n}: {v:.1f}x" for n, v in
                                                   sorted(speed.items(), key=lambda kv: int(kv[0])))]
    return lines + [""]


def render_gt_max_nodes(res: dict) -> list[str]:
    model = res.get("model", {})
    lines = ["## Graph transformer: largest graph whose training step fits on one device", "",
             f"File: `benchmarks/results/gt_max_nodes.json`; command: `{res.get('command', '')}`. Device: "
             f"{res.get('device')} (torch {res.get('torch')}). Model: {model.get('layers')} layers of the named kind, "
             f"hidden {model.get('hidden')}, {model.get('heads')} heads, FFN ratio {model.get('ffn_ratio')}, "
             f"{model.get('features')} dense input features, {model.get('classes')} classes; one step = forward, "
             "cross-entropy over all nodes, backward, Adam, fp32. Graph: the community graph of gt_attention "
             "(average degree ~11 with self loops). Sizes stop at the first out-of-memory.", "",
             "| kind | nodes | edges | step ms | peak GPU GiB |", "|---|---|---|---|---|"]
    for r in res.get("rows", []):
        if "error" in r:
            lines.append(f"| {r['kind']} | {r['num_nodes']} | - | {r['error']} | - |")
        else:
            lines.append(f"| {r['kind']} | {r['num_nodes']} | {r['num_edges']} | {r['step_ms']:.0f} | "
                         f"{r['peak_mem_gib']:.1f} |")
    largest = ", ".join(f"{k}: {v:,} nodes" for k, v in res.get("largest_trained", {}).items() if v)
    return lines + ["", f"Largest that trains: {largest}.", ""]


def render_pack_speed(res: dict) -> list[str]:
    target = res.get("target_mb_per_s", 100.0)
    m = res.get("machine", {})
    lines = ["## Bit-packing and Adaptive-Package codec throughput", "",
             f"Command: `{res.get('command', 'python benchmarks/pack_speed.py')}` (file: "
             "`benchmarks/results/pack_speed.json`). MB/s of int8 codes processed per second, best of "
             f"{res.get('repeats')} repeats: `quant.formats.packing` on {res.get('nodes')} rows x {res.get('features')} codes, "
             f"the Adaptive-Package codec (`quant.formats.adaptive_package`) on the first {res.get('ap_nodes')} rows at half "
             "density. `mixed`: per-row bitwidths uniform in 0..8. Packed bytes: the payload (1-bit rows are all "
             "zero and store nothing).", "",
             "| bits | pack MB/s | unpack MB/s | packed bytes | AP encode MB/s | AP decode MB/s | AP bytes |",
             "|---|---|---|---|---|---|---|"]
    rows = res.get("results", [])
    for r in rows:
        lines.append(f"| {r['bits']} | {r['pack_mb_per_s']:.0f} | {r['unpack_mb_per_s']:.0f} | "
                     f"{r['packed_bytes']:,} | {r['ap_encode_mb_per_s']:.0f} | {r['ap_decode_mb_per_s']:.0f} | "
                     f"{r['ap_total_bytes']:,} |")
    if rows:
        slowest = min(min(r["pack_mb_per_s"], r["unpack_mb_per_s"]) for r in rows)
        verdict = "met" if slowest >= target else "missed"
        lines += ["", f"Slowest pack or unpack: {slowest:.0f} MB/s (target >= {target:.0f} MB/s on one core: "
                      f"{verdict}). Torch threads {m.get('threads')} of {m.get('cpu_count')} cores; 1-min load "
                      f"average {res.get('load_average_1min', {}).get('start', float('nan')):.1f} at the start."]
    return lines + ["", f"Machine: `{json.dumps(m, sort_keys=True)}`", ""]


def render_export_fixed_point(res: dict) -> list[str]:
    lines = ["## Integer path: fixed-point format sweep (one trained model)", "",
             f"Command: `{res.get('command', 'python benchmarks/export_fixed_point.py --run <run_dir>')}` (file: "
             f"`benchmarks/results/export_fixed_point.json`). One {res.get('dataset')} GCN trained with "
             f"{res.get('quant')} at target {res.get('target_bits')} bits (penalty a = {res.get('penalty_weight')}) "
             f"for {res.get('epochs')} epochs (`python -m gnn.train`, the preset otherwise, seeds "
             f"{res.get('seeds')}); its float32 "
             f"fake-quant model tests {100 * res['test_acc_fake_quant']:.1f} %. Per requantization format (fraction "
             "bits of the multipliers, partial-sum width) the integer path's test accuracy, its change against "
             "the fake-quant model, and the share of all nodes whose predicted class agrees. The multi-seed check "
             "of the 0.3-pt target is the table \"Integer path against fake-quant\".", "",
             "| frac bits | psum bits | integer test acc (%) | change (pt) | prediction agreement |",
             "|---|---|---|---|---|"]
    for r in res.get("formats", []):
        lines.append(f"| {r['frac_bits']} | {r['psum_bits']} | {100 * r['test_acc_integer']:.1f} | "
                     f"{r['delta_pt']:+.1f} | {100 * r['prediction_agreement']:.2f} % |")
    return lines + ["", f"Machine: `{json.dumps(res.get('machine', {}), sort_keys=True)}`", ""]


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "-"


def render_rtl_cells(res: dict) -> list[str]:
    lines = ["## RTL: Yosys cells per module", "",
             f"Command: `python -m hw.rtl.synth` (file: `benchmarks/results/rtl_cells.json`); tool {res.get('tool')}, "
             f"flow `{res.get('flow')}`. {res.get('note', '')}", "",
             "| module | parameters | cells | relative area (NAND2 eq.) | synthesis s |", "|---|---|---|---|---|"]
    for name, configs in res.get("modules", {}).items():
        for c in configs:
            lines.append(f"| {name} | {_params_text(c['params'])} | {c['cells']:,} | {c['rel_area']:,.0f} | "
                         f"{c['seconds']:.1f} |")
    return lines + [""]


def render_rtl_sim(res: dict) -> list[str]:
    export = res.get("export", "")
    lines = ["## RTL: simulated tiles against the cycle model, and simulator speed", "",
             f"Command: `python benchmarks/rtl_sim.py --export {export}` (file: `benchmarks/results/rtl_sim.json`), "
             f"export `{export}` (layer {res.get('layer')}). Per tile cut from the export: the RTL's cycles (cocotb) "
             "against `hw.timing`'s, total and per phase, and whether the RTL output equals the integer golden "
             "model bit for bit.", "",
             "| simulator | tile | rows | local nodes | packages | edges | bit-exact | RTL cycles | model cycles | "
             "combination RTL / model | aggregation + output RTL / model |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in res.get("cycles", []):
        lines.append(f"| {c['simulator']} | {c['tile']} | {c['rows']} | {c['local_nodes']} | {c['packages']} | "
                     f"{c['edges']} | {'yes' if c['bit_exact'] else 'NO'} | {c['rtl_total']} | {c['model_total']} | "
                     f"{c['rtl_combination']} / {c['model_combination']} | "
                     f"{c['rtl_aggregation_output']} / {c['model_aggregation_output']} |")
    lines += ["", "| simulator | tile rows | simulated cycles / s | wall s per run | first run incl. build (s) |",
              "|---|---|---|---|---|"]
    for sim, s in res.get("speed", {}).items():
        lines.append(f"| {sim} | {s['tile_rows']} | {s['sim_cycles_per_s']:,} | {s['real_s']:.3f} | "
                     f"{s['first_run_with_build_s']:.1f} |")
    if res.get("unavailable"):
        lines += ["", f"Unavailable: {json.dumps(res['unavailable'])}"]
    return lines + ["", f"Machine: `{json.dumps(res.get('machine', {}), sort_keys=True)}`", ""]


def render_quant_storage(res: dict) -> list[str]:
    """All-in compression of the grid's learned-bit cells, measured on seed 0's export (`quant_storage.py`)."""
    cells = res.get("cells", [])
    by_key = {(c["dataset"], c["model"], c["method"], float(c["target_bits"])): c for c in cells}
    listed, listing = _commands(sorted({c["command"] for c in cells if c.get("command")}))
    lines = ["## All-in compression of the quantization grid (seed 0, measured on the export)", "",
             "File: `benchmarks/results/quant_storage.json`; commands: " + listed + ". Per learned-bit cell of the "
             "preset grid (penalty a = 25): seed 0 trained as in the quantization "
             "table, exported with `quant.export` (integer path checked), and its measured bytes "
             "(`quant.formats.storage`): all-in = FP32 bytes of every feature tensor, the weights and the CSR adjacency "
             "over the quantized bytes of the same, bit tables and steps included; features = the feature tensors "
             "alone. The input features dominate on these bag-of-words graphs (stored in 2 signed bits when "
             "binary), so the all-in ratio moves little with the learned bits. Degree-Quant's uniform INT8 / INT4 "
             "and the graph-level datasets have no export (their features alone compress 4x / 8x).", *listing, "",
             "| dataset | model | " + " | ".join(f"{m} t{t:g}" for m, t in QUANT_GRID_LEARNED_COLUMNS) + " |",
             "|---|---|" + "---|" * len(QUANT_GRID_LEARNED_COLUMNS)]
    for ds, model in dict.fromkeys((c["dataset"], c["model"]) for c in cells):
        row = []
        for m, t in QUANT_GRID_LEARNED_COLUMNS:
            c = by_key.get((ds, model, m, t))
            row.append(f"{c['all_in_ratio']:.1f}x all-in, "
                       f"{c['fp32_feature_bytes'] / c['feature_bytes']:.1f}x features @ {c['avg_bits']:.2f} bits"
                       if c else "not run")
        lines.append(f"| {ds} | {model} | " + " | ".join(row) + " |")
    return lines + ["", f"Machine: `{json.dumps(res.get('machine', {}), sort_keys=True)}`", ""]


def render_quant_defaults(res: dict) -> list[str]:
    lines = ["## Quantization defaults: the plain command against FP32 (validation-selected test accuracy, %)", "",
             "File: `benchmarks/results/quant_defaults.json` (`python benchmarks/quant_defaults.py`). Each row is "
             "what a user gets from the command shown, with the preset of `gnn/presets.py` and nothing else set, "
             "against the plain FP32 command on the same seeds. " + res.get("note", "") + ".", "",
             "| dataset | model | seeds | FP32 | quantized | avg bits (no sign) | gap (pt) | goal (pt) | met "
             "| command |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    presets = {}
    for c in sorted(res.get("cells", []), key=lambda c: (QUANT_GRID_NODE[0].index(c["dataset"])
                                                         if c["dataset"] in QUANT_GRID_NODE[0] else 99, c["model"])):
        q, f = c["quant"], c["fp32"]
        lines.append(f"| {c['dataset']} | {c['model']} | {len(c['seeds'])} | {_pm(f['test_acc'])} | "
                     f"{_pm(q['test_acc'])} | {q['avg_bits']['mean']:.2f} (target {c['target_bits']:g}) | "
                     f"{c['gap_pt']:+.2f} | -{c['goal_gap_pt']:g} | {'yes' if c['met'] else '**no**'} | "
                     f"`{c['command']}` |")
        presets[q["preset"]] = True
    return lines + ["", "Presets in force:", ""] + [f"- {p}" for p in presets] + [""]


def render_teardown_race(res: dict) -> list[str]:
    lines = ["## Rank exit: runs with a dead rank, old exit pattern against `distributed.teardown`", "",
             "File: `benchmarks/results/teardown_race.json`, `" + res.get("command", "") + "`. Two gloo ranks leave "
             f"{res.get('rounds')} all-reduces in flight with their group held past `destroy_process_group()` (as "
             "FSDP2's DeviceMesh does) and exit; `plain` returns into interpreter shutdown.", "",
             "| exit | runs | runs with a dead rank | signals |", "|---|---|---|---|"]
    for r in res.get("rows", []):
        sig = ", ".join(f"{k} x{v}" for k, v in sorted(r["signals"].items())) or "-"
        lines.append(f"| {r['mode']} | {r['runs']} | {r['runs_with_a_dead_rank']} | {sig} |")
    return lines + [""]


def render_fault_injection(res: dict) -> list[str]:
    st = res.get("settings", {})
    runs = res.get("per_run", [])
    lines = ["## Fault injection: kill -9 of a rank, then `--resume`, against the uninterrupted run", "",
             f"File: `benchmarks/results/fault_injection.json`, `python benchmarks/fault_injection.py --runs "
             f"{res.get('runs')}`. {st.get('dataset')}, 2 ranks, exchange {st.get('exchange')}, {st.get('epochs')} "
             f"epochs, a checkpoint every {st.get('checkpoint_every')}; each run is killed (SIGKILL, random rank, "
             "random moment between the first and the last checkpoint), resumed, and compared with the "
             "uninterrupted run: every epoch's loss, accuracies and bytes, and the best record.", "",
             f"**{res.get('equal')} of {res.get('runs')} resumed runs ended equal to the uninterrupted run** "
             f"({res.get('killed')} of them were killed mid-run; the others had finished before the kill).", "",
             "| run | killed rank | kill after (s) | last logged epoch | checkpoint epoch | resumed at | equal |",
             "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs):
        lines.append(f"| {i} | {r['rank']} | {r['delay_s']:.2f} | {r['logged_epoch']} | {r['checkpoint_epoch']} | "
                     f"{r['resumed_at_epoch']} | {'yes' if r['equal'] else 'NO: ' + ', '.join(r['diffs'][:3])} |")
    return lines + [""]


RENDERERS = {"a2q_hw_cost": render_a2q_hw_cost, "hw_ablation": render_hw_ablation,
             "dist_accuracy": render_dist_accuracy,
             "dist_quant_accuracy": render_dist_quant_accuracy, "dist_time": render_dist_time,
             "dist_bytes": render_dist_bytes, "hw_sim": render_hw_sim,
             "fp32_accuracy": render_fp32, "train_speed": render_speed, "quant_table": render_quant,
             "quant_speed": render_quant_speed, "quant_speed_sparse_input": render_quant_speed_sparse_input,
             "quant_speed_grid": render_quant_speed_grid,
             "gt_accuracy": render_gt_accuracy, "gt_screen": render_gt_screen, "gt_halo_codec": render_gt_halo_codec,
             "gt_comm_bytes": render_gt_comm_bytes, "gt_attention": render_gt_attention,
             "gt_attention_cuda": lambda r: render_gt_attention(r, "gt_attention_cuda"),
             "gt_max_nodes": render_gt_max_nodes, "integer_accuracy": render_integer_accuracy,
             "pack_speed": render_pack_speed, "export_fixed_point": render_export_fixed_point,
             "rtl_cells": render_rtl_cells, "rtl_sim": render_rtl_sim, "quant_storage": render_quant_storage,
             "teardown_race": render_teardown_race, "quant_defaults": render_quant_defaults,
             "fault_injection": render_fault_injection}


def render_other(name: str, res: dict) -> list[str]:
    def shorten(v):  # a long string would make a line over LINE_LIMIT in the code block, which cannot be wrapped
        if isinstance(v, str) and len(v) > OTHER_STRING_CHARS:
            return v[:OTHER_STRING_CHARS] + "... (truncated; see the file)"
        if isinstance(v, dict):
            return {k: shorten(x) for k, x in v.items()}
        return [shorten(x) for x in v] if isinstance(v, list) else v

    text = json.dumps(shorten(res), indent=1, sort_keys=True)
    if len(text) > 4000:
        text = text[:4000] + "\n... (truncated; see the file)"
    return [f"## {name}", "", f"File: `benchmarks/results/{name}.json` (no dedicated table yet).", "",
            "```json", text, "```", ""]


# RESULTS.md follows the pipeline: each stage a `##` section, each result file a `###` under it, in this order.
# A result file named in no stage goes to OTHER_STAGE, at the end.
STAGES = (
    ("Data and FP32 training", ("fp32_accuracy", "train_speed")),
    ("Quantization", ("quant_table", "quant_defaults", "quant_speed", "quant_speed_grid", "quant_speed_sparse_input")),
    ("Export and integer path", ("integer_accuracy", "export_fixed_point", "quant_storage", "pack_speed")),
    ("Cycle model (hw)", ("hw_ablation", "hw_sim", "a2q_hw_cost")),
    ("RTL", ("rtl_cells", "rtl_sim")),
    ("Distributed training", ("dist_accuracy", "dist_quant_accuracy", "dist_bytes", "dist_time", "fault_injection",
                              "teardown_race")),
    ("Graph transformer", ("gt_accuracy", "gt_screen", "gt_attention", "gt_attention_cuda", "gt_max_nodes",
                           "gt_comm_bytes", "gt_halo_codec")),
)
OTHER_STAGE = "Other results"
LINE_LIMIT = 1000  # no line of RESULTS.md is longer
OTHER_STRING_CHARS = 900  # render_other shortens longer strings


def _outside_code(text: str, i: int) -> bool:
    return text.count("`", 0, i) % 2 == 0


def _safe_start(text: str) -> bool:
    """Whether a continuation line may start with text without starting a Markdown block (list item, heading,
    quote, table row, HTML block, setext underline) instead of continuing the paragraph."""
    return bool(text) and text[0] not in "-+*#>|=<" and not re.match(r"\d+[.)]", text)


def _wrap(line: str, limit: int = LINE_LIMIT) -> list[str]:
    """A paragraph or list-item line over ``limit`` as several lines of the same paragraph (each line break stands
    for a space): one sentence a line; a sentence still too long breaks after its semicolons, then its commas, then
    at spaces outside code spans, then at spaces inside them (a code span's line break reads as a space too)."""
    if len(line) <= limit:
        return [line]
    indent = "  " if re.match(r"[-*] ", line) else ""  # a list item's continuation lines stay in the item
    width = limit - len(indent)
    marker, line = line[:len(indent)], line[len(indent):]  # the item's marker stays on its first line

    def split(text: str, pattern: str, in_code: bool = False) -> list[str]:
        parts, last = [], 0
        for m in re.finditer(pattern, text):
            rest = text[m.end():]
            if (in_code or _outside_code(text, m.start())) and _safe_start(rest):
                parts.append(text[last:m.start()])
                last = m.end()
        return parts + [text[last:]]

    def pack(parts: list[str], sep: str = " ") -> list[str]:  # greedily join pieces up to the width
        out: list[str] = []
        for part in parts:
            if out and len(out[-1]) + len(sep) + len(part) <= width:
                out[-1] += sep + part
            else:
                out.append(part)
        return out

    def fit(text: str, level: int) -> list[str]:
        if len(text) <= width or level == 5:
            return [text]
        pattern, in_code = ((r"(?<=[.!?]) (?=\S)", False), (r"(?<=;) ", False), (r"(?<=,) ", False),
                            (r" ", False), (r" ", True))[level]
        parts = split(text, pattern, in_code)
        if level == 0:  # one sentence a line
            return [piece for part in parts for piece in fit(part, 1)]
        return [piece for part in pack(parts) for piece in fit(part, level + 1)]

    pieces = fit(line, 0)
    return [marker + pieces[0]] + [indent + p for p in pieces[1:]]


def _cells(row: str) -> list[str]:
    return row.strip()[1:-1].strip().split(" | ") if row.strip().endswith("|") else [row]


def _fit_table(table: list[str], first_note: int) -> tuple[list[str], list[str]]:
    """A table whose rows stay within LINE_LIMIT: the longest cells of a row over it move out of the table, the cell
    keeping a summary (first and last item, the item count, the note's number); returns the rows and the notes."""
    head = _cells(table[0])
    rows, notes = [], []
    for row in table:
        cells = _cells(row)
        while len(row) > LINE_LIMIT and len(cells) == len(head) and len(cells) > 1:
            i = max(range(1, len(cells)), key=lambda j: (len(cells[j]), -j))  # the first column names the row
            if len(cells[i]) < 40:
                break
            text = cells[i]
            items = text.split("; ") if "; " in text else text.split(", ") if ", " in text else text.split(" ")
            number = first_note + len(notes)
            notes.append(f"- note {number} ({' / '.join(cells[:i][:2])}, column \"{head[i]}\"): {text}")
            cells[i] = (f"{items[0]} ... {items[-1]} ({len(items)} items, note {number})" if len(items) > 2
                        else f"see note {number}")
            row = "| " + " | ".join(cells) + " |"
        rows.append(row)
    return rows, [w for n in notes for w in _wrap(n)]


def _fit_lines(lines: list[str]) -> list[str]:
    """A renderer's lines with none over LINE_LIMIT: long paragraphs and list items wrapped (_wrap), long table
    cells moved into a collapsed block under their table (_fit_table); code blocks and HTML are left as they are."""
    out: list[str] = []
    notes = 1
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):  # a fenced block as it is
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines) - 1)
            out += lines[i:end + 1]
            i = end + 1
        elif line.startswith("|"):
            end = next((j for j in range(i, len(lines)) if not lines[j].startswith("|")), len(lines))
            rows, moved = _fit_table(lines[i:end], notes)
            out += rows
            if moved:
                notes += sum(m.startswith("- note ") for m in moved)
                out += ["", "<details><summary>Long table cells (moved out of the table above)</summary>", "",
                        *moved, "", "</details>"]
                if end < len(lines) and lines[end]:
                    out.append("")
            i = end
        else:
            out += [line] if line.startswith(("<", "#")) else _wrap(line)
            i += 1
    return out


def _anchor(title: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens, repeats numbered."""
    slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def _read(path: Path) -> list[str]:
    """A result file's section; a file that is not valid JSON (still being written) says so."""
    try:
        res = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return [f"## {path.stem}", "", f"File: `benchmarks/results/{path.name}` could not be read ({type(e).__name__})."
                " Rerun `python benchmarks/make_results.py` once its benchmark has written it.", ""]
    return RENDERERS.get(path.stem, lambda r, n=path.stem: render_other(n, r))(res)


def render(results: Path = RESULTS) -> str:
    """RESULTS.md's text from the result files under ``results``."""
    files = {p.stem: p for p in sorted(results.glob("*.json"))}
    placed = {stem for _, stems in STAGES for stem in stems}
    stages = [*STAGES, (OTHER_STAGE, tuple(s for s in files if s not in placed))]
    seen: dict[str, int] = {}
    for title in ("Results", "Contents"):
        _anchor(title, seen)
    body, contents = [], []
    for stage, stems in stages:
        sections = [lines for lines in (_read(files[s]) for s in stems if s in files) if lines]
        if not sections:
            continue
        body += [f"## {stage}", ""]
        contents.append(f"- [{stage}](#{_anchor(stage, seen)})")
        for lines in sections:
            lines = ["#" + line if line.startswith("## ") else line for line in _fit_lines(lines)]
            for line in lines:
                if line.startswith("### "):
                    contents.append(f"  - [{line[4:]}](#{_anchor(line[4:], seen)})")
            body += lines
    head = ["# Results", "", "Generated by `python benchmarks/make_results.py` from `benchmarks/results/*.json`; "
            "every number below was measured by a script in `benchmarks/`. Do not edit by hand. Sections follow the "
            "pipeline: " + " -> ".join(stage for stage, _ in stages[:-1]) + "; result files of no stage come last.",
            "", "## Contents", "", *contents, ""]
    return "\n".join(head + body)


def main(results: Path = RESULTS, out: Path = OUT) -> None:
    out.write_text(render(results))
    print(f"written {out}")


if __name__ == "__main__":
    main()
