"""The dataset registry: where raw files come from, how they are verified, where they are cached.

`gnn/data/registry.toml` (shipped inside the package, so a non-editable install has it too) lists every dataset
with its loader, canonical URLs, the SHA-256 of every raw file, its license and its expected counts. This module is
its only reader.

A user adds datasets without touching the checkout: ``GNN_REGISTRY=/path/my.toml`` (several: joined with the path
separator) names registries of the same format, whose entries join the built-in ones. An entry of a user registry
that fails validation breaks only itself (asking for it names the field), and may not reuse a built-in name. Its
``raw_dir`` may also be relative to the user registry's own folder; ``loader = "file"`` reads its one raw file (a
``.npz``, ``.mat`` or ``.pt``, see ``gnn.data.graph_files``) like ``--dataset <path>``.

Data root resolution (first hit wins):
  1. an explicit ``data_root`` argument (``--data-root``) or the env var ``GNN_DATA_ROOT``;
  2. the read-only mirror ``../shared/datasets`` beside the checkout, when present (user entries: their
     registry's folder);
  3. a download from the canonical source.
Raw files are checksum-verified and copied into the writable cache (``datasets/cache/`` or ``GNN_CACHE_DIR``)
before PyG processes them. Nothing is ever written into a data root.
"""

from __future__ import annotations

import dataclasses
import io
import os
import shutil
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from gnn.data.toml_file import read_toml
from gnn.files import sha256_file

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY_PATH = Path(__file__).with_name("registry.toml")
MIRROR_PATH = REPO_ROOT.parent / "shared" / "datasets"


FEATURE_PREPROCESSING = ("raw", "row-normalized")
USER_REGISTRY_ENV = "GNN_REGISTRY"


class DataError(RuntimeError):
    """A dataset could not be found, verified or loaded; the message says what to do."""


class ChecksumError(DataError):
    """A raw file's SHA-256 differs from the registry."""


@dataclass(frozen=True, kw_only=True)
class DatasetEntry:
    """One dataset of the registry (see gnn/data/registry.toml for the meaning of each field)."""

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
    base: Path | None = None  # a user registry's folder (another data root for its entries); not a TOML field


def load_registry(path: str | Path | None = None) -> dict[str, DatasetEntry]:
    """Parse the registry TOML into entries keyed by dataset name (lower-case, e.g. ``"cora"``).

    A file that cannot be read or parsed, or an entry with a missing, unknown or ill-typed field, raises a
    one-line `DataError` naming the file, the entry and the field (or the line and column). ``path`` defaults to
    `REGISTRY_PATH`, read at call time."""
    path = Path(REGISTRY_PATH if path is None else path)
    raw = read_toml(path, DataError, "the dataset registry",
                    f"; fix that line or restore the file from git (`git checkout {path}`)")
    datasets = raw.get("datasets")
    if not isinstance(datasets, dict) or not datasets:
        raise DataError(f"{path}: no [datasets.<name>] tables; restore the file from git (`git checkout {path}`)")
    return {key: _entry(path, key, d) for key, d in datasets.items()}


# field -> (check, what it must be); fields of DatasetEntry with a default are optional.
_FIELD_CHECKS = {
    "urls": (lambda v: isinstance(v, list) and bool(v) and all(isinstance(u, str) for u in v),
             "a non-empty list of strings"),
    "counts": (lambda v: isinstance(v, dict) and all(type(n) is int for n in v.values()),
               "a table of integers"),
    "files": (lambda v: isinstance(v, dict) and bool(v) and all(_is_sha256(h) and _is_plain_name(n)
                                                                for n, h in v.items()),
              "a non-empty table of plain file name = 64-hex-digit SHA-256"),
    "raw_dir": (lambda v: isinstance(v, str) and _is_relative_path(v), "a relative path without '..'"),
    "features": (lambda v: v in FEATURE_PREPROCESSING, f"one of {', '.join(FEATURE_PREPROCESSING)}"),
    "download": (lambda v: v in ("per_file", "zip", "single"), "one of per_file, zip, single"),
}


def _entry(path: Path, key: str, d: object, base: Path | None = None) -> DatasetEntry:
    """One validated `DatasetEntry` from the table ``[datasets.<key>]``."""
    where = f"{path}: dataset {key!r}"
    if not isinstance(d, dict):
        raise DataError(f"{where} must be a table [datasets.{key}]")
    known = {f.name: f for f in dataclasses.fields(DatasetEntry) if f.name not in ("key", "base")}
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise DataError(f"{where} has unknown field(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    required = [n for n, f in known.items()
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [n for n in required if n not in d]
    if missing:
        raise DataError(f"{where} is missing field(s) {', '.join(missing)}")
    for name, value in d.items():
        check, what = _FIELD_CHECKS.get(name, (lambda v: isinstance(v, str), "a string"))
        if not check(value):
            raise DataError(f"{where}: field {name} = {_short(value)} must be {what}")
    return DatasetEntry(key=key, **{**d, "urls": tuple(d["urls"])}, base=base)


def _short(value: object, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, so that an error stays one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _is_sha256(digest: object) -> bool:
    return isinstance(digest, str) and len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


def _is_plain_name(name: str) -> bool:
    """A file name without a folder part, so that a registry cannot make us write outside the cache."""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name


def _is_relative_path(p: str) -> bool:
    parts = Path(p).parts
    return bool(parts) and not Path(p).is_absolute() and ".." not in parts


def user_registry_paths() -> list[Path]:
    """The user registries named by ``GNN_REGISTRY`` (path-separator joined), in order."""
    return [Path(p) for p in os.environ.get(USER_REGISTRY_ENV, "").split(os.pathsep) if p]


def user_entries(builtin: dict[str, DatasetEntry]) -> tuple[dict[str, DatasetEntry], dict[str, str]]:
    """The valid entries of the user registries, and for each invalid one its one-line error (it breaks only
    itself). An unreadable user registry file is an error of its own."""
    entries: dict[str, DatasetEntry] = {}
    errors: dict[str, str] = {}
    for path in user_registry_paths():
        raw = read_toml(path, DataError, f"the user dataset registry ({USER_REGISTRY_ENV})")
        datasets = raw.get("datasets")
        if not isinstance(datasets, dict):
            raise DataError(f"{path} ({USER_REGISTRY_ENV}): no [datasets.<name>] tables")
        for key, d in datasets.items():
            if key in builtin:
                errors[key] = f"{path}: dataset {key!r} is a built-in dataset; give your entry another name"
                continue
            try:
                entries[key] = _entry(path, key, d, base=path.resolve().parent)
            except DataError as e:
                errors[key] = str(e)
    return entries, errors


def dataset_names() -> list[str]:
    """Every name ``--dataset`` takes: the built-in registry's and the user registries' (invalid ones included:
    asking for one says what is wrong with it)."""
    builtin = load_registry()
    user, errors = user_entries(builtin)
    return [*builtin, *user, *errors]


def get_entry(name: str) -> DatasetEntry:
    """The registry entry for ``name`` (built-in or from a user registry); an unknown name lists the valid ones."""
    registry = load_registry()
    user, errors = user_entries(registry) if user_registry_paths() else ({}, {})
    key = name.lower()
    if key in errors:
        raise DataError(errors[key])
    registry = {**registry, **user}
    if key not in registry:
        raise DataError(f"unknown dataset {name!r}; valid names: {', '.join(sorted(registry))} (or a path to a graph "
                        f"file; add names with {USER_REGISTRY_ENV}=<your registry.toml>)")
    return registry[key]


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
    """The writable cache: ``GNN_CACHE_DIR``; else ``datasets/cache/`` in a checkout; else (an installed package)
    ``$XDG_CACHE_HOME/gnn-codesign/datasets`` (``~/.cache/...``)."""
    if os.environ.get("GNN_CACHE_DIR"):
        return Path(os.environ["GNN_CACHE_DIR"])
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT / "datasets" / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gnn-codesign" / "datasets"


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
    roots = candidate_roots(data_root) + ([("its user registry's folder", entry.base)] if entry.base else [])
    for label, root in roots:
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
