"""docs/dgl.md's DGL user's path (a DGLGraph saved with dgl.save_graphs, trained with A2Q, exported, simulated) runs as
written. Runs in DGL's environment (``make test-dgl``); skipped elsewhere."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("dgl", reason="DGL lives in its own environment: make test-dgl (torch 2.2.1, DGL 2.1)")

DOC = Path(__file__).resolve().parents[2] / "docs" / "dgl.md"
MARKER = "<!-- test-dgl: tests/dgl/test_docs_example.py runs the next block -->"


def test_the_dgl_users_path_runs_as_documented(tmp_path, monkeypatch):
    text = DOC.read_text()
    block = re.search(re.escape(MARKER) + r"\s*```python\n(.*?)```", text, re.S)
    assert block, f"{DOC} lost its marked example block"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    exec(compile(block.group(1), str(DOC), "exec"), {"__name__": "docs_dgl_example"})  # noqa: S102
    metrics = json.loads((tmp_path / "dgl_gcn.qgraph" / "manifest.json").read_text())["metrics"]
    assert abs(metrics["test_acc_integer"] - metrics["test_acc_fake_quant"]) <= 0.003  # within 0.3 pt
    assert abs(metrics["avg_bits"] - 1.7) < 0.05
    sim = json.loads((tmp_path / "runs" / "dgl" / "hw_sim_dgl_gcn_mega.json").read_text())
    assert sim["functional_check"] == ["bit-exact", "bit-exact"]
