"""The issue's A2Q headline (Cora GCN at a 1.7-bit target, within 1 pt of FP32) and the bits-accuracy curve of its
selected recipe, picked from quantization-table cells (``benchmarks/results/quant_table.json``).

Selection logic only: `make_results` renders the tables, `quant_table.plot` draws the curve.
"""

from __future__ import annotations

from _common import QUANTIZED_ONLY_FIELDS, quant_training_key

HEADLINE_GAP_PT = -1.0  # the issue: A2Q GCN on Cora at <= 1.7 bits, at most 1.0 pt under our FP32
HEADLINE_TARGET_BITS = 1.7
LEARNED_METHODS = ("a2q", "degree-aware")


def _cora_gcn(c: dict) -> bool:
    return c["dataset"] == "cora" and c["model"] == "gcn"


def _fp32_by_training(cells: list[dict]) -> dict[tuple, dict]:
    return {quant_training_key(c): c for c in cells if _cora_gcn(c) and c["method"] == "fp32"}


def _fp32_of(c: dict, fp32: dict[tuple, dict]) -> dict | None:
    """The FP32 cell of ``c``'s training (an FP32 warm-up and the weight / XW bits of the quantized run aside)."""
    return fp32.get(quant_training_key({**c, **dict.fromkeys(QUANTIZED_ONLY_FIELDS)}))


def a2q_headline(cells: list[dict]) -> tuple[list[dict], dict | None]:
    """The A2Q headline sweep: Cora GCN A2Q cells at target 1.7, each with ``fp32`` (the FP32 cell of the same
    training: epochs, dropout, weight decay, features, hidden width, device; the quantized run's FP32 warm-up and
    weight / XW bits aside; None if not run) and ``gap`` (test mean minus that FP32's, pt). Returns (rows,
    selected): the selected row has the highest mean validation accuracy among rows that recorded it, kept every
    seed within the bit budget and have an FP32 to compare with."""
    fp32 = _fp32_by_training(cells)
    rows = []
    for c in cells:
        if not _cora_gcn(c) or (c["method"], c.get("target_bits")) != ("a2q", HEADLINE_TARGET_BITS):
            continue
        ref = _fp32_of(c, fp32)
        gap = None if ref is None else c["test_acc"]["mean"] - ref["test_acc"]["mean"]
        rows.append({"cell": c, "fp32": ref, "gap": gap})
    eligible = [r for r in rows if "val_acc" in r["cell"] and r["fp32"] is not None
                and r["cell"].get("runs_within_bit_budget") == r["cell"]["test_acc"]["n"]]
    selected = max(eligible, key=lambda r: r["cell"]["val_acc"]["mean"], default=None)
    return rows, selected


def a2q_pareto(cells: list[dict]) -> tuple[dict | None, list[dict]]:
    """Accuracy against learned bits for the selected headline recipe: the Cora GCN cells of the learned-bit
    methods trained exactly as the selected headline run (same training and penalty weight), at every target.

    Returns ``(fp32, rows)``: the FP32 cell of that training (None without a selected headline) and one row per
    cell, ``{"cell", "gap"}`` (test mean minus FP32's, pt), sorted by method and average bits.
    """
    _, selected = a2q_headline(cells)
    if selected is None:
        return None, []
    recipe = selected["cell"]
    key, weight = quant_training_key(recipe), recipe.get("penalty_weight")
    fp32 = selected["fp32"]
    rows = [{"cell": c, "gap": c["test_acc"]["mean"] - fp32["test_acc"]["mean"]} for c in cells
            if _cora_gcn(c) and c["method"] in LEARNED_METHODS and quant_training_key(c) == key
            and c.get("penalty_weight") == weight and c.get("avg_bits")]
    rows.sort(key=lambda r: (r["cell"]["method"], r["cell"]["avg_bits"]["mean"]))
    return fp32, rows


def fewest_bits_within_gap(rows: list[dict]) -> dict | None:
    """The row with the fewest average bits whose test mean is within ``HEADLINE_GAP_PT`` of FP32 (None if none)."""
    ok = [r for r in rows if r["gap"] >= HEADLINE_GAP_PT]
    return min(ok, key=lambda r: r["cell"]["avg_bits"]["mean"], default=None)
