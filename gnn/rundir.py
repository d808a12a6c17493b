"""The run directory on disk: atomic file writes, one writer at a time, and no silent reuse of an old run.

Every file of a run (``config.json``, ``results.json``, and per seed ``best.pt``, ``last.pt``, ``result.json``) is
written by `gnn.files.atomic_write`: a temporary file in the same directory, flushed and fsynced, then renamed over the
target and the directory fsynced. A crash leaves the previous version or the new one, never a torn file.
``metrics.jsonl`` is appended (`append_line`) and cut back to a checkpoint's epochs on resume (`truncate_jsonl`).

`open_run_dir` guards a whole experiment: it refuses a directory that already holds a run unless asked to resume or
overwrite it, refuses to resume with a changed configuration, and holds ``fcntl.flock`` on ``<run_dir>/.lock`` so
that a second process cannot write into the same run.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from gnn.files import TMP_SUFFIX, sha256_bytes, sha256_file, write_bytes, write_json, write_text

__all__ = ["sha256_file", "write_json"]  # gnn.files' writers, re-exported for the run-directory callers

LOCK_NAME = ".lock"
CONFIG_NAME = "config.json"
# Configuration fields that may differ when a run is resumed: neither changes what is trained. ``train.device``
# moves a run between a GPU and a CPU machine (checkpoints load onto either; the numbers may then differ in the
# last bits, as any CPU/GPU pair does); ``train.checkpoint_every`` only sets how often last.pt is written.
# config.json keeps the values the run started with.
MAY_DIFFER_ON_RESUME = frozenset({"train.device", "train.checkpoint_every"})


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (exists, locked, changed config, unwritable, bad checkpoint).
    Command-line entry points turn it into a one-line usage error."""


def save_tensors(obj, path: Path) -> str:
    """Atomically ``torch.save`` ``obj`` (tensors and plain containers only, so that ``torch.load(...,
    weights_only=True)`` reads it back) and return the SHA-256 (hex) of the bytes written."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    data = buf.getvalue()
    write_bytes(path, data)
    return sha256_bytes(data)


def append_line(path: Path, line: str) -> None:
    """Append one line (a newline is added) and flush it to the OS."""
    with open(path, "a") as f:
        f.write(line + "\n")


def truncate_jsonl(path: Path, max_epoch: int) -> None:
    """Keep the lines of a ``metrics.jsonl`` up to ``max_epoch`` (0: none): what a checkpoint of that epoch had
    seen. Reading stops at the first torn or unparsable line (a crash mid-append). A missing file stays missing."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines(keepends=True):
        try:
            record = json.loads(line) if line.endswith("\n") else None
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict) or not isinstance(record.get("epoch"), int) or record["epoch"] > max_epoch:
            break
        kept.append(line)
    write_text(path, "".join(kept))


def config_changes(old: dict, new: dict, may_differ: frozenset[str] = MAY_DIFFER_ON_RESUME) -> list[str]:
    """``"key.path: old -> new"`` for every field that differs between two run configurations (nested dicts
    compared field by field, values as JSON holds them), except the ``may_differ`` paths."""
    old, new = json.loads(json.dumps(old)), json.loads(json.dumps(new))  # tuples -> lists, as config.json has them
    flat_old, flat_new = _flatten(old), _flatten(new)
    changes = []
    for key in sorted(set(flat_old) | set(flat_new)):
        a, b = flat_old.get(key, _ABSENT), flat_new.get(key, _ABSENT)
        if a != b and key not in may_differ:
            changes.append(f"{key}: {_show(a)} -> {_show(b)}")
    return changes


_ABSENT = object()


def _flatten(d: dict, prefix: str = "") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _show(v) -> str:
    return "(absent)" if v is _ABSENT else json.dumps(v)


def _holds_files(run_dir: Path) -> bool:
    """Whether ``run_dir`` has any entry besides the lock file."""
    return run_dir.is_dir() and any(p.name != LOCK_NAME for p in run_dir.iterdir())


def check_run_dir(run_dir: Path, *, resume: bool, overwrite: bool) -> None:
    """Refuse, before anything is written, a run directory that cannot be used as asked. Raises RunDirError."""
    if resume and overwrite:
        raise RunDirError("resume and overwrite exclude each other: resume continues a run, overwrite replaces it")
    for p in (run_dir, *run_dir.parents):
        if p.exists() and not p.is_dir():
            raise RunDirError(f"run directory {run_dir}: {p} is a file, not a directory")
    if resume and not (run_dir / CONFIG_NAME).is_file():
        raise RunDirError(f"cannot resume: {run_dir} holds no run (no {CONFIG_NAME})")
    if not resume and not overwrite and _holds_files(run_dir):
        raise RunDirError(f"run directory {run_dir} already exists and is not empty; resume its run (--resume) or "
                          f"replace it (--overwrite), or choose another directory")


def clear_run(run_dir: Path) -> None:
    """Delete what a previous run wrote (config, results, seed/fold directories, leftover temp files); other files
    and the lock stay."""
    for p in run_dir.iterdir():
        if p.name in (CONFIG_NAME, "results.json") or (p.name.startswith(".") and p.name.endswith(TMP_SUFFIX)):
            p.unlink()
        elif p.is_dir() and p.name.startswith("seed") and "_fold" in p.name:
            shutil.rmtree(p)


@contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``run_dir/.lock``; a second holder is refused at once, not made to wait."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise RunDirError(f"cannot write run directory {run_dir}: {e.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunDirError(f"run directory {run_dir} is in use by another training process (it holds "
                              f"{LOCK_NAME}); wait for it to finish or choose another directory") from None
        if not os.access(run_dir, os.W_OK | os.X_OK):
            raise RunDirError(f"cannot write run directory {run_dir}: permission denied")
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (deleting it would race with a waiting opener)


@contextmanager
def open_run_dir(run_dir: Path, config: dict, *, resume: bool = False, overwrite: bool = False) -> Iterator[Path]:
    """Use ``run_dir`` for the run described by ``config`` (what config.json holds), locked for the duration.

    New or empty directory: writes config.json. ``overwrite``: first deletes the previous run's files.
    ``resume``: the directory must hold a run with the same configuration (except `MAY_DIFFER_ON_RESUME`);
    config.json is kept. Anything else raises RunDirError naming the directory.
    """
    run_dir = Path(run_dir)
    check_run_dir(run_dir, resume=resume, overwrite=overwrite)
    with _locked(run_dir):
        check_run_dir(run_dir, resume=resume, overwrite=overwrite)  # again, now that no one else can write
        if resume:
            _check_same_config(run_dir, config)
        else:
            if overwrite:
                clear_run(run_dir)
            write_json(run_dir / CONFIG_NAME, config)
        yield run_dir


def _check_same_config(run_dir: Path, config: dict) -> None:
    try:
        old = json.loads((run_dir / CONFIG_NAME).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise RunDirError(f"cannot resume {run_dir}: unreadable {CONFIG_NAME} ({e})") from None
    changes = config_changes(old, config)
    if changes:
        raise RunDirError(f"cannot resume {run_dir} with a different configuration: {'; '.join(changes)} "
                          f"(rerun with the original settings, or start a new run)")
