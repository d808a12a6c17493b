"""Helpers shared by the benchmark scripts: result files, the machine description, and the pieces their RESULTS.md
renderers share (tables, command lists, ``mean +- std``)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    import torch  # here, not above: the renderers of RESULTS.md use this module without torch

    return {"python": platform.python_version(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def device_name(device: str) -> str:
    """What a result records as its device: the GPU's name for "cuda" / "cuda:i", else "cpu"."""
    import torch

    return "cpu" if torch.device(device).type == "cpu" else torch.cuda.get_device_name(device)


def load_json(path: Path) -> dict:
    """A result file's payload ({} when the file does not exist yet)."""
    return json.loads(path.read_text()) if path.exists() else {}


def save_json(path: Path, payload: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True))
    return path


def load_results(name: str) -> dict:
    return load_json(RESULTS / f"{name}.json")


def save_results(name: str, payload: dict) -> Path:
    return save_json(RESULTS / f"{name}.json", payload)


QUANT_TRAINING_FIELDS = ("epochs", "dropout", "weight_decay", "features", "hidden_dim", "fp32_warmup_epochs",
                         "weight_bits", "xw_bits", "device")
QUANTIZED_ONLY_FIELDS = ("fp32_warmup_epochs", "weight_bits", "xw_bits")  # an FP32 cell never has them


_TUNING_FLAGS = ("--epochs", "--dropout", "--weight-decay", "--features", "--hidden", "--fp32-warmup", "--weight-bits",
                 "--xw-bits")


# The quantization table: node-level (datasets, models), graph-level (datasets, models), the columns as
# (method, target bits), and the penalty weight of the preset training.
QUANT_GRID_NODE = (("cora", "citeseer", "amazon-computers", "coauthor-cs"), ("gcn", "gin", "gat", "sage"))
QUANT_GRID_GRAPH = (("mutag", "proteins"), ("gin", "gcn"))
QUANT_GRID_COLUMNS = (("fp32", None), ("dq-int8", None), ("dq-int4", None), ("a2q", 4.0), ("a2q", 1.7),
                      ("degree-aware", 4.0), ("degree-aware", 1.7))
QUANT_GRID_LEARNED_COLUMNS = tuple((m, t) for m, t in QUANT_GRID_COLUMNS if t is not None)  # learned-bit cells
QUANT_GRID_PENALTY = 25.0


def is_preset_grid_cell(cell: dict) -> bool:
    """A quantization-table cell of the preset grid: the preset's training and penalty weight 25, no tuning flag in
    its command."""
    return (not any(f in cell.get("command", "") for f in _TUNING_FLAGS)
            and cell.get("penalty_weight", QUANT_GRID_PENALTY) == QUANT_GRID_PENALTY and "features" not in cell)


def preset_grid(cells: list[dict]) -> dict[tuple, dict]:
    """The preset grid's cells by (dataset, model, method, target bits); a later cell replaces an earlier one."""
    return {(c["dataset"], c["model"], c["method"], c.get("target_bits")): c for c in cells if is_preset_grid_cell(c)}


def quant_training_key(cell: dict) -> tuple:
    """What a quantization-table cell was trained with, beyond dataset, model and method: two cells with equal keys
    ran the same training (used to replace re-run cells and to pair an A2Q run with its FP32 run)."""
    return tuple(cell.get(k) for k in QUANT_TRAINING_FIELDS)


def train_and_export(train_args: list[str], run_dir: Path, qgraph: Path) -> tuple[dict, dict]:
    """``python -m gnn.train <train_args>`` into ``run_dir``, then ``python -m quant.export`` to ``qgraph`` (which
    writes, loads back and verifies every checksum); returns gnn.train's result and the export manifest's metrics."""
    from gnn.train import main as train
    from quant.export import main as export

    out = train([*train_args, "--run-dir", str(run_dir), "--no-progress"])
    export(["--run", str(run_dir), "--out", str(qgraph)])
    return out, json.loads((qgraph / "manifest.json").read_text())["metrics"]


def merge_subset(path: Path, cells: list[dict], key, command: str) -> tuple[list[dict], str]:
    """A run over a subset of a benchmark's cases: its ``cells`` replace the cells of the same ``key(cell)`` in the
    results file at ``path`` and the others are kept; ``command`` is appended to the file's command."""
    old = load_json(path)
    if not old:
        return cells, command
    mine = {key(c) for c in cells}
    return [c for c in old.get("cells", []) if key(c) not in mine] + cells, f"{old['command']}; then {command}"


def mean_std(values: list[float]) -> dict:
    """``{"mean", "std" (sample, ddof 1; 0 for one value), "n"}`` of ``values``: how every benchmark reports a metric
    over seeds or folds."""
    a = np.asarray(values, dtype=np.float64)
    return {"mean": float(a.mean()), "std": float(a.std(ddof=1)) if a.size > 1 else 0.0, "n": int(a.size)}


def pm(s: dict) -> str:
    """A summary's ``mean +- std`` (``{"mean": ..., "std": ...}``), two decimals."""
    return f"{s['mean']:.2f} +- {s['std']:.2f}"


# Longest command list written inline in a paragraph; a longer one becomes a collapsed list under it.
COMMANDS_INLINE_CHARS = 600


def command_list(commands: list[str], sep: str = "; ") -> tuple[str, list[str]]:
    """A command list for a paragraph: the commands themselves when short, else their count with the lines that
    list them (a collapsed block, to follow the paragraph)."""
    text = sep.join(f"`{c}`" for c in commands)
    if len(text) <= COMMANDS_INLINE_CHARS:
        return text, []
    return f"{len(commands)}, listed below", ["", f"<details><summary>{len(commands)} commands</summary>", "",
                                             *[f"- `{c}`" for c in commands], "", "</details>"]


def table_head(*columns: str) -> list[str]:
    """A Markdown table's first two lines: the column names, then the separator row of as many columns."""
    return ["| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]


def table_row(*cells) -> str:
    """A Markdown table row of ``cells`` (each as ``str`` makes it)."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def machine_line(res: dict, sort_keys: bool = False) -> str:
    """A RESULTS.md section's closing line: the machine a result file was measured on."""
    return f"Machine: `{json.dumps(res.get('machine', {}), sort_keys=sort_keys)}`"
