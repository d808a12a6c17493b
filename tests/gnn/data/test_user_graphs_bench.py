"""benchmarks/user_graphs.py's RESULTS section: one row per graph file, the figures recomputed from the cell, and a
by-name run whose accuracies differ flagged."""

from benchmarks import user_graphs


def _cell(graph: str, equal: bool | None) -> dict:
    cell = {"graph": graph, "format": "npz", "nodes": 100, "edges": 400,
            "fp32": {"test_acc": {"mean": 80.0, "std": 1.0}}, "a2q": {"test_acc": {"mean": 79.5, "std": 0.5},
                                                                     "avg_bits": {"mean": 1.7, "std": 0.0}},
            "export": {"integer_acc": 79.0, "fake_quant_acc": 79.25, "all_in_bytes": 1000, "fp32_all_in_bytes": 8000,
                       "speedup_vs_hygcn": 3.0}}
    if equal is not None:
        cell["by_name"] = {"equal": equal}
    return cell


def test_rows_recompute_the_figures_and_flag_a_by_name_mismatch():
    lines = user_graphs.render({"cells": [_cell("a", True), _cell("b", False), _cell("c", None)]})
    rows = [line for line in lines if line.startswith("| a |") or line.startswith("| b |") or line.startswith("| c |")]
    assert rows[0] == ("| a | npz | 100 | 400 | 80.00 +- 1.00 | 79.50 +- 0.50 | 1.70 | -0.25 | 8.0x | 3.00x | yes |")
    assert rows[1].endswith("| **no** |") and rows[2].endswith("| - |")
