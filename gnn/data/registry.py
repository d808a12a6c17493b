"""The dataset registry: where raw files come from, how they are verified, where they are cached.

`datasets/registry.toml` lists every dataset with its loader, canonical URLs, the SHA-256 of every raw file,
its license and its expected counts. This module is the only reader of that folder.

Data root resolution (first hit wins):
  1. an explicit ``data_root`` argument (``--data-root``) or the env var ``GNN_DATA_ROOT``;
  2. the read-only mirror ``../shared/datasets`` beside the checkout, when present;
  3. a download from the canonical source.
Raw files are checksum-verified and copied into the writable cache (``datasets/cache/`` or ``GNN_CACHE_DIR``)
before PyG processes them. Nothing is ever written into a data root.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tomllib
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY_PATH = REPO_ROOT / "datasets" / "registry.toml"
MIRROR_PATH = REPO_ROOT.parent / "shared" / "datasets"


FEATURE_PREPROCESSING = ("raw", "row-normalized")


class DataError(RuntimeError):
    """A dataset could not be found, verified or loaded; the message says what to do."""


class ChecksumError(DataError):
    """A raw file's SHA-256 differs from the registry."""


@dataclass(frozen=True, kw_only=True)
class DatasetEntry:
    """One dataset of the registry (see datasets/registry.toml for the meaning of each field)."""

    key: str
    name: str
    family: str
    loader: str
    task: str  # "node", "graph" or "topology"
    raw_dir: str  # relative to a data root, e.g. "Planetoid/Cora/raw"
    urls: tuple[str, ...]
    download: str  # "per_file", "zip" or "single"
    license: str
    split: str
    counts: dict[str, int]
    files: dict[str, str]  # file name -> SHA-256
    note: str = ""
    features: str = "raw"  # "raw" or "row-normalized" (each feature row divided by its sum)


def load_registry(path: Path = REGISTRY_PATH) -> dict[str, DatasetEntry]:
    """Parse the registry TOML into entries keyed by dataset name (lower-case, e.g. ``"cora"``)."""
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    entries = {}
    for key, d in raw["datasets"].items():
        entries[key] = DatasetEntry(key=key, urls=tuple(d.pop("urls")), **d)
        if entries[key].features not in FEATURE_PREPROCESSING:
            raise DataError(f"registry: dataset {key!r} has features = {entries[key].features!r}; "
                            f"valid: {', '.join(FEATURE_PREPROCESSING)}")
    return entries


def get_entry(name: str) -> DatasetEntry:
    """The registry entry for ``name``; an unknown name lists the valid ones."""
    registry = load_registry()
    key = name.lower()
    if key not in registry:
        raise DataError(f"unknown dataset {name!r}; valid names: {', '.join(sorted(registry))}")
    return registry[key]


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_file(path: Path, expected: str) -> None:
    """Raise `ChecksumError` naming the file and both hashes when ``path`` does not hash to ``expected``."""
    actual = sha256_file(path)
    if actual != expected:
        raise ChecksumError(
            f"checksum mismatch for {path}: expected sha256 {expected}, got {actual}. "
            f"The file is corrupted or is not the registered version; delete it (or the cache with "
            f"`make clean-cache`) and supply the original file."
        )


def cache_dir() -> Path:
    """The writable cache: ``GNN_CACHE_DIR`` or ``datasets/cache/`` in the checkout."""
    return Path(os.environ.get("GNN_CACHE_DIR", REPO_ROOT / "datasets" / "cache"))


def candidate_roots(data_root: str | Path | None = None) -> list[tuple[str, Path]]:
    """Data roots in resolution order, each with a label that says where it came from."""
    roots: list[tuple[str, Path]] = []
    if data_root is not None:
        roots.append(("--data-root", Path(data_root)))
    elif os.environ.get("GNN_DATA_ROOT"):
        roots.append(("GNN_DATA_ROOT", Path(os.environ["GNN_DATA_ROOT"])))
    if MIRROR_PATH.is_dir():
        roots.append(("mirror beside the checkout", MIRROR_PATH))
    return roots


def _root_has_all(root: Path, entry: DatasetEntry) -> bool:
    return all((root / entry.raw_dir / fname).is_file() for fname in entry.files)


def _download(entry: DatasetEntry, dest_raw: Path) -> None:
    """Fetch raw files from the canonical source into ``dest_raw`` (verified by the caller)."""
    dest_raw.mkdir(parents=True, exist_ok=True)
    url = entry.urls[0]
    try:
        if entry.download == "per_file":
            for fname in entry.files:
                with urllib.request.urlopen(f"{url}/{fname}", timeout=60) as r:
                    (dest_raw / fname).write_bytes(r.read())
        elif entry.download == "single":
            (fname,) = entry.files
            with urllib.request.urlopen(url, timeout=60) as r:
                (dest_raw / fname).write_bytes(r.read())
        elif entry.download == "zip":
            with urllib.request.urlopen(url, timeout=60) as r:
                archive = zipfile.ZipFile(io.BytesIO(r.read()))
            for member in archive.namelist():
                base = Path(member).name
                if base in entry.files:
                    (dest_raw / base).write_bytes(archive.read(member))
        else:
            raise DataError(f"registry: unknown download mode {entry.download!r} for {entry.key}")
    except (urllib.error.URLError, OSError, TimeoutError) as e:
        shutil.rmtree(dest_raw, ignore_errors=True)
        raise DataError(f"download of {entry.key} from {url} failed: {e}") from e


def ensure_raw(name: str, data_root: str | Path | None = None) -> Path:
    """Make the verified raw files of ``name`` available in the cache; return the cache *family* root.

    The returned path is what PyG's dataset classes take as ``root`` (e.g. ``cache/Planetoid`` for Cora,
    whose raw files end up in ``cache/Planetoid/Cora/raw``).
    """
    entry = get_entry(name)
    cached_raw = cache_dir() / entry.raw_dir
    if _root_has_all(cache_dir(), entry):
        for fname, digest in entry.files.items():
            verify_file(cached_raw / fname, digest)
        return cache_dir() / entry.family

    looked: list[str] = []
    for label, root in candidate_roots(data_root):
        looked.append(f"{label}: {root / entry.raw_dir}")
        if _root_has_all(root, entry):
            for fname, digest in entry.files.items():
                verify_file(root / entry.raw_dir / fname, digest)
            cached_raw.mkdir(parents=True, exist_ok=True)
            for fname in entry.files:
                shutil.copyfile(root / entry.raw_dir / fname, cached_raw / fname)
            return cache_dir() / entry.family

    looked.append(f"download: {entry.urls[0]}")
    try:
        _download(entry, cached_raw)
    except DataError as e:
        raise DataError(
            f"dataset {entry.key!r} not found. Looked in:\n  " + "\n  ".join(looked) + f"\n{e}\n"
            f"Supply the raw files ({', '.join(entry.files)}) under <root>/{entry.raw_dir} and pass "
            f"--data-root <root> or set GNN_DATA_ROOT=<root>."
        ) from e
    for fname, digest in entry.files.items():
        verify_file(cached_raw / fname, digest)
    return cache_dir() / entry.family
