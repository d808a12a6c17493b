"""benchmarks/hw_ablation's notes: every figure in them is read from the result rows (none typed)."""

import copy
import json
from pathlib import Path

from benchmarks import hw_ablation

ROOT = Path(__file__).resolve().parents[2]


def test_notes_follow_the_rows():
    res = json.loads((ROOT / "benchmarks" / "results" / "hw_ablation.json").read_text())
    before = hw_ablation.notes(res)
    assert len(before) > len(hw_ablation.GENERAL_NOTES)  # the per-row notes are rendered from the committed file
    changed = copy.deepcopy(res)
    changed["datasets"]["amazon-computers"]["steps"]["degree_aware_bitmap"]["speedup"] = 0.123
    changed["datasets"]["cora_gin16_degree-aware.qgraph"]["runs"]["condense_edge"]["cycles"] *= 1.5
    after = hw_ablation.notes(changed)
    assert any("from 0.12x (degree rule)" in n for n in after)
    gin = [n for n in after if n.startswith("Rows *_gin_*")][0]
    old = [n for n in before if n.startswith("Rows *_gin_*")][0]
    assert gin != old  # the cycle ratio of the gin16 row moved with it
    del changed["datasets"]["coauthor-cs"]
    assert not any(n.startswith("Coauthor CS") for n in hw_ablation.notes(changed))  # a missing row, no note
