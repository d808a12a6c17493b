"""benchmarks/dist_gpu.sh, the prepared GPU-readiness run, as a CPU smoke test (DEVICE=cpu: gloo, the codecs and
the quantized training on CPU): every step runs and writes its files, so the script is ready when a GPU is lent."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # about 30 s: two torchrun jobs, eight codecs, one training run
def test_gpu_script_runs_on_cpu(tmp_path):
    env = {**os.environ, "DEVICE": "cpu", "EPOCHS": "2", "DATASETS": "cora", "OUT": str(tmp_path / "out"),
           "PY": sys.executable, "GNN_CACHE_DIR": os.environ.get("GNN_CACHE_DIR", str(tmp_path / "cache"))}
    out = subprocess.run(["bash", "benchmarks/dist_gpu.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    codecs = json.loads((tmp_path / "out" / "codecs.json").read_text())
    assert codecs["device"] == "cpu" and all(r["matches_cpu"] for r in codecs["rows"]) and len(codecs["rows"]) == 8
    gnn = json.loads((tmp_path / "out" / "gnn_device_vs_cpu.json").read_text())["rows"]
    assert [r["dataset"] for r in gnn] == ["cora"] and gnn[0]["cpu_ms_per_epoch"] > 0
    for codec in ("fp32", "int1"):
        assert json.loads((tmp_path / "out" / f"dist_world1_{codec}.json").read_text())["world_size"] == 1
