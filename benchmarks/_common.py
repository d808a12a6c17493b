"""Helpers shared by the benchmark scripts: result files and the machine description."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    return {"python": platform.python_version(), "torch": torch.__version__, "cpu_count": os.cpu_count(),
            "threads": torch.get_num_threads(), "processor": platform.processor() or platform.machine(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def load_results(name: str) -> dict:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def save_results(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, sort_keys=True))
    return path
