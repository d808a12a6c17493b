"""PyG's processed cache is verified against its SHA-256 record before PyG reads it, and rebuilt when it differs."""

import pathlib
import pickle

import pytest
import torch

from gnn.data.loaders import load_dataset
from gnn.data.processed_cache import RECORD, read_record

KEYS = ("x", "edge_index", "y")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private cache holding a fresh, recorded Cora; returns (processed folder, the freshly loaded graph)."""
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    graph = load_dataset("cora", features="raw")
    return tmp_path / "cache" / "Planetoid" / "Cora" / "processed", graph


def _same(a, b) -> bool:
    return all(torch.equal(getattr(a.data, k), getattr(b.data, k)) for k in KEYS)


def _flip(path: pathlib.Path, start_fraction: float = 0.5, count: int = 64) -> None:
    """Invert ``count`` bytes spaced through the file from ``start_fraction`` on (inside Cora's feature matrix)."""
    b = bytearray(path.read_bytes())
    start = int(len(b) * start_fraction)
    for i in range(start, start + 97 * count, 97):
        b[i] ^= 0xFF
    path.write_bytes(bytes(b))


class _Touch:
    """Unpickling this creates ``marker``: stands for a crafted file that runs code when PyG loads it unsafely."""

    def __init__(self, marker: pathlib.Path):
        self.marker = marker

    def __reduce__(self):
        return pathlib.Path.touch, (self.marker,)


def test_fresh_build_is_recorded_and_intact_cache_is_reused(cache, capsys):
    processed, graph = cache
    record = read_record(processed)
    assert record is not None and {"data.pt", "pre_transform.pt", "pre_filter.pt"} <= set(record)
    before = (processed / "data.pt").stat().st_mtime_ns
    again = load_dataset("cora", features="raw")
    assert _same(graph, again)
    assert (processed / "data.pt").stat().st_mtime_ns == before  # not rebuilt
    assert "rebuilding" not in capsys.readouterr().err


def test_flipped_bytes_are_rebuilt_to_identical_data(cache, capsys):
    processed, graph = cache
    _flip(processed / "data.pt")
    again = load_dataset("cora", features="raw")
    assert _same(graph, again)
    err = capsys.readouterr().err
    assert "differs from its SHA-256 record (data.pt)" in err and "rebuilding" in err


@pytest.mark.parametrize("victim", ["data.pt", "pre_transform.pt"])
@pytest.mark.parametrize("keep_record", [True, False])
def test_crafted_pickle_is_never_unpickled(cache, tmp_path, capsys, victim, keep_record):
    processed, graph = cache
    marker = tmp_path / "code-ran"
    (processed / victim).write_bytes(pickle.dumps(_Touch(marker), protocol=2))
    if not keep_record:
        (processed / RECORD).unlink()
    try:
        again = load_dataset("cora", features="raw")
    finally:
        assert not marker.exists(), f"the crafted {victim} was unpickled"
    assert "rebuilding" in capsys.readouterr().err
    assert _same(graph, again)


@pytest.mark.parametrize("record_text", [None, "{not json", '{"files": []}'])
def test_missing_or_invalid_record_is_rebuilt(cache, capsys, record_text):
    processed, graph = cache
    if record_text is None:
        (processed / RECORD).unlink()
    else:
        (processed / RECORD).write_text(record_text)
    again = load_dataset("cora", features="raw")
    assert "has no valid SHA-256 record" in capsys.readouterr().err
    assert read_record(processed) is not None
    assert _same(graph, again)


def test_extra_file_in_processed_is_rebuilt(cache, capsys):
    processed, graph = cache
    (processed / "extra.pt").write_bytes(b"x")
    load_dataset("cora", features="raw")
    assert "(extra.pt)" in capsys.readouterr().err
    assert not (processed / "extra.pt").exists()


def test_graph_datasets_are_recorded_too(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    load_dataset("mutag")
    assert read_record(tmp_path / "cache" / "TUDataset" / "MUTAG" / "processed") is not None
