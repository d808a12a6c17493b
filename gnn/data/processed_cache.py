"""Integrity of PyG's processed cache: hash every processed file after PyG writes it, verify before PyG reads it.

PyG's InMemoryDataset pickles what it processes (``processed/data.pt``, ``pre_transform.pt``, ``pre_filter.pt``)
and reads it back with ``torch.load``: ``data.pt`` falls back to ``weights_only=False`` when the safe load fails and
``pre_transform.pt`` is always loaded unsafely. A flipped byte would load silently and a crafted file could run code.
So a PyG dataset is constructed only on a processed folder that matches the SHA-256 record written when it was
built (``processed/SHA256SUMS.json``); any other folder is deleted and PyG rebuilds it from the raw files, which
the registry has already verified. A file lock beside the folder keeps concurrent loads from reading a folder that
another process is deleting or rebuilding.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from gnn.files import sha256_file, write_json

RECORD = "SHA256SUMS.json"
T = TypeVar("T")


def processed_hashes(processed_dir: Path) -> dict[str, str]:
    """SHA-256 of every file under ``processed_dir`` but the record, keyed by its relative POSIX path."""
    return {p.relative_to(processed_dir).as_posix(): sha256_file(p)
            for p in sorted(processed_dir.rglob("*")) if p.is_file() and p.name != RECORD}


def read_record(processed_dir: Path) -> dict[str, str] | None:
    """The recorded hashes, or None when the record is missing or not a ``{"files": {name: sha256}}`` object."""
    try:
        files = json.loads((processed_dir / RECORD).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ok = isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())
    return files if ok else None


def write_record(processed_dir: Path, hashes: dict[str, str]) -> None:
    """Write the record atomically (temp file, fsync, rename), so a crash never leaves half a record."""
    write_json(processed_dir / RECORD, {"files": hashes}, indent=1, sort_keys=True)


def record_problem(processed_dir: Path) -> str | None:
    """Why ``processed_dir`` cannot be trusted, or None when it is absent or matches its record."""
    if not processed_dir.exists() and not processed_dir.is_symlink():
        return None
    if processed_dir.is_symlink() or not processed_dir.is_dir():
        return "is not a plain folder"
    recorded = read_record(processed_dir)
    if recorded is None:
        return f"has no valid SHA-256 record ({RECORD})"
    actual = processed_hashes(processed_dir)
    changed = sorted(n for n in recorded.keys() | actual.keys() if recorded.get(n) != actual.get(n))
    return f"differs from its SHA-256 record ({', '.join(changed)})" if changed else None


def remove_processed(processed_dir: Path) -> None:
    """Delete the processed folder (a symlink is unlinked, never followed)."""
    if processed_dir.is_symlink() or processed_dir.is_file():
        processed_dir.unlink()
    elif processed_dir.exists():
        shutil.rmtree(processed_dir)


@contextmanager
def _locked(processed_dir: Path, exclusive: bool) -> Iterator[None]:
    """Hold a shared (readers) or exclusive (rebuilder) lock on ``<processed_dir>.lock``."""
    processed_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(processed_dir.with_name(processed_dir.name + ".lock"), "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def load_verified(processed_dir: Path, construct: Callable[[], T]) -> T:
    """Run ``construct`` (a PyG dataset constructor) on a processed folder that matches its record.

    A folder that fails the check is deleted first (one line on stderr says so) and PyG rebuilds it; the new
    files are then recorded. ``construct`` must return the dataset, whose ``processed_dir`` must be
    ``processed_dir`` (checked, so that a PyG layout change cannot make the check look at the wrong folder).
    """
    with _locked(processed_dir, exclusive=False):
        if processed_dir.is_dir() and record_problem(processed_dir) is None:
            return _checked(construct(), processed_dir)
    with _locked(processed_dir, exclusive=True):  # re-check: another process may have rebuilt it meanwhile
        problem = record_problem(processed_dir)
        if problem is not None:
            print(f"processed cache {processed_dir} {problem}: deleting it and rebuilding from the verified raw "
                  "files", file=sys.stderr)
            remove_processed(processed_dir)
        fresh = read_record(processed_dir) is None
        dataset = _checked(construct(), processed_dir)
        if fresh:
            write_record(processed_dir, processed_hashes(processed_dir))
        return dataset


def _checked(dataset: T, processed_dir: Path) -> T:
    actual = Path(dataset.processed_dir)  # type: ignore[attr-defined]
    if actual.resolve() != processed_dir.resolve():
        raise RuntimeError(f"PyG processed folder {actual} is not the verified {processed_dir}: "
                           "gnn/data/loaders.py must name the folder PyG uses")
    return dataset
