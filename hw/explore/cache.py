"""Content-addressed, append-only cache of evaluated design points (one JSON line per point), for resumable sweeps.

Key of a point = sha256 of (workload SHA-256, config hash), where the config hash is the sha256 of the canonical
JSON (sorted keys) of every `AcceleratorConfig` field except ``name`` and ``sources`` plus :data:`MODEL_VERSION`.
``MODEL_VERSION`` hashes the source of the cycle, energy and area model (the ``hw/*.py`` modules), so any change to
the model invalidates every cached point instead of silently mixing two models' numbers.

The file is only ever appended to, one line per finished point, flushed at once: an interrupted sweep (Ctrl-C, a
killed worker, a crash) keeps every point that finished, and a torn last line is ignored on reading.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from hw.config import AcceleratorConfig

HW_DIR = Path(__file__).resolve().parents[1]


def _model_version() -> str:
    """sha256 (16 hex) of the ``hw/*.py`` sources: the cycle model, energy table and area model."""
    h = hashlib.sha256()
    for path in sorted(HW_DIR.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


MODEL_VERSION = _model_version()


def config_fields(cfg: AcceleratorConfig) -> dict:
    """The fields that define a design (all but ``name`` and ``sources``)."""
    return {k: v for k, v in asdict(cfg).items() if k not in ("name", "sources")}


def config_hash(cfg: AcceleratorConfig, model_version: str = MODEL_VERSION) -> str:
    """sha256 of the canonical JSON of :func:`config_fields` and the model version."""
    text = json.dumps({"config": config_fields(cfg), "model_version": model_version}, sort_keys=True,
                      separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def point_key(workload_sha256: str, cfg_hash: str) -> str:
    """The cache key of one (workload, design) pair."""
    return hashlib.sha256(f"{workload_sha256}:{cfg_hash}".encode()).hexdigest()


class PointCache:
    """An append-only JSONL file of records ``{"key": ..., ...}``; :meth:`get` by key, :meth:`add` appends."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.records: dict[str, dict] = {}
        self.torn_lines = 0
        text = self.path.read_text() if self.path.is_file() else ""
        for line in text.splitlines():
            try:
                record = json.loads(line) if line.strip() else None
            except json.JSONDecodeError:  # a line cut short by a crash: that point is simply evaluated again
                self.torn_lines += 1
                continue
            if isinstance(record, dict) and "key" in record:
                self.records[record["key"]] = record
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a")  # noqa: SIM115 (held open for the sweep; closed by close())
        if text and not text.endswith("\n"):  # a torn last line: start the next record on a fresh line
            self._file.write("\n")

    def __contains__(self, key: str) -> bool:
        return key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def get(self, key: str) -> dict | None:
        return self.records.get(key)

    def add(self, record: dict) -> None:
        """Append ``record`` (with its ``key``) as one line and flush it, so it survives an interrupt."""
        self._file.write(json.dumps(record, sort_keys=True) + "\n")
        self._file.flush()
        self.records[record["key"]] = record

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PointCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
