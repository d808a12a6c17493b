"""Crash-safe file writes and file hashes, shared by run directories, caches and distributed checkpoints.

`atomic_write` leaves either the old file or the complete new one whatever the moment of a crash: it writes a
temporary file in the same directory, flushes and fsyncs it, renames it over the target (``os.replace``) and fsyncs
the directory so that the rename survives a power loss. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

TMP_SUFFIX = ".tmp"


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new entry in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` through ``write(f)``: temp file in the same directory, flush, fsync, ``os.replace``, fsync of
    the directory. A crash leaves the previous file (and at most a stray ``.<name>.*.tmp``), never a torn one."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_bytes(path: Path, data: bytes) -> None:
    """Atomically write ``data`` to ``path``."""
    atomic_write(path, lambda f: f.write(data))


def write_text(path: Path, text: str) -> None:
    """Atomically write a text file (UTF-8)."""
    write_bytes(path, text.encode())


def write_json(path: Path, obj, **dumps_kwargs) -> None:
    """Atomically write ``obj`` as JSON (``indent=2`` unless ``dumps_kwargs`` say otherwise)."""
    write_text(path, json.dumps(obj, **{"indent": 2, **dumps_kwargs}))


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
