"""Registry completeness, checksum verification, data-root resolution and error messages."""

import shutil
from pathlib import Path

import pytest

from gnn.data import registry
from gnn.data.loaders import load_dataset
from gnn.data.registry import ChecksumError, DataError, ensure_raw, get_entry, load_registry

EXPECTED = {"cora", "citeseer", "pubmed", "amazon-computers", "coauthor-cs", "mutag", "proteins", "cornell5"}


def test_registry_is_complete():
    reg = load_registry()
    assert set(reg) == EXPECTED
    for key, e in reg.items():
        assert e.loader and e.urls and e.license and e.split, key
        assert e.urls[0].startswith("https://"), key
        assert e.download in ("per_file", "zip", "single"), key
        assert e.files, key
        for fname, digest in e.files.items():
            assert len(digest) == 64 and int(digest, 16) >= 0, (key, fname)
        assert {"num_nodes", "num_edges", "num_features", "num_classes"} <= set(e.counts), key


def test_unknown_feature_preprocessing_is_rejected(tmp_path):
    bad = tmp_path / "registry.toml"
    text = registry.REGISTRY_PATH.read_text()
    bad.write_text(text.replace('features = "row-normalized"', 'features = "z-score"', 1))
    with pytest.raises(DataError, match="'cora': field features = 'z-score' must be one of raw, row-normalized"):
        load_registry(bad)


def _edited_registry(tmp_path, old: str, new: str):
    """A copy of the registry with the first ``old`` replaced by ``new``; returns (path, 1-based line of the edit)."""
    text = registry.REGISTRY_PATH.read_text()
    assert old in text
    bad = tmp_path / "registry.toml"
    bad.write_text(text.replace(old, new, 1))
    return bad, text[: text.index(old)].count("\n") + 1


def test_malformed_registry_is_one_line_with_line_and_column(tmp_path, monkeypatch):
    bad, line = _edited_registry(tmp_path, 'loader = "planetoid"', "loader = planetoid")
    monkeypatch.setattr(registry, "REGISTRY_PATH", bad)
    with pytest.raises(DataError) as e:
        get_entry("cora")  # the path every entry point takes
    msg = str(e.value)
    assert str(bad) in msg and f"line {line}, column" in msg and "git checkout" in msg
    assert "\n" not in msg


def test_unreadable_registry_is_a_data_error(tmp_path):
    with pytest.raises(DataError, match="cannot read the dataset registry"):
        load_registry(tmp_path / "absent.toml")


@pytest.mark.parametrize("old, new, match", [
    ('task = "node"\n', "", r"'cora' is missing field\(s\) task"),
    ('license = "MIT"', 'licence = "MIT"', r"'cora' has unknown field\(s\) licence"),
    ('license = "MIT"', "license = 1", "'cora': field license = 1 must be a string"),
    ("num_nodes = 2708", 'num_nodes = "2708"', "'cora': field counts = .* must be a table of integers"),
    ('urls = ["https://github.com/kimiyoung/planetoid/raw/master/data"]',
     'urls = "https://github.com/kimiyoung/planetoid/raw/master/data"', "'cora': field urls = .* must be a non-empty"),
    ('"ind.cora.allx" = "9419', '"../ind.cora.allx" = "9419', "'cora': field files = .* plain file name"),
    ('"ind.cora.allx" = "9419', '"ind.cora.allx" = "X419', "'cora': field files = .* 64-hex-digit SHA-256"),
    ('raw_dir = "Planetoid/Cora/raw"', 'raw_dir = "../Cora/raw"', "'cora': field raw_dir = .* without '..'"),
    ('download = "per_file"', 'download = "ftp"', "'cora': field download = 'ftp' must be one of"),
])
def test_ill_formed_entry_names_entry_and_field(tmp_path, old, new, match):
    bad, _ = _edited_registry(tmp_path, old, new)
    with pytest.raises(DataError, match=match):
        load_registry(bad)


@pytest.mark.parametrize("text, match", [("[datasets]\ncora = 1\n", "'cora' must be a table"),
                                         ("title = 'x'\n", "no \\[datasets.<name>\\] tables")])
def test_registry_without_dataset_tables(tmp_path, text, match):
    bad = tmp_path / "registry.toml"
    bad.write_text(text)
    with pytest.raises(DataError, match=match):
        load_registry(bad)


def test_unknown_name_lists_valid_ones():
    with pytest.raises(DataError) as e:
        get_entry("coraa")
    for name in ("cora", "citeseer", "mutag"):
        assert name in str(e.value)


def test_checksum_mismatch_names_file_and_hashes(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    ensure_raw("mutag")  # copies verified raw files into the temporary cache
    entry = get_entry("mutag")
    victim = tmp_path / "cache" / entry.raw_dir / "MUTAG_A.txt"
    victim.write_bytes(victim.read_bytes() + b"1, 2\n")
    with pytest.raises(ChecksumError) as e:
        ensure_raw("mutag")
    msg = str(e.value)
    assert "MUTAG_A.txt" in msg and entry.files["MUTAG_A.txt"] in msg
    assert registry.sha256_file(victim) in msg


def test_corrupted_data_root_is_rejected_and_not_copied(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    entry = get_entry("mutag")
    root = tmp_path / "root"
    src = next(r for _, r in registry.candidate_roots() if (r / entry.raw_dir).is_dir())
    shutil.copytree(src / entry.raw_dir, root / entry.raw_dir)
    (root / entry.raw_dir / "MUTAG_graph_labels.txt").write_text("1\n")
    monkeypatch.setattr(registry, "MIRROR_PATH", tmp_path / "no-mirror")
    with pytest.raises(ChecksumError, match="MUTAG_graph_labels.txt"):
        ensure_raw("mutag", data_root=root)
    assert not (tmp_path / "cache" / entry.raw_dir / "MUTAG_graph_labels.txt").exists()


def test_missing_data_offline_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(registry, "MIRROR_PATH", tmp_path / "no-mirror")

    def no_network(entry, dest):
        raise DataError("network unreachable (test)")

    monkeypatch.setattr(registry, "_download", no_network)
    with pytest.raises(DataError) as e:
        ensure_raw("cora", data_root=tmp_path / "empty")
    msg = str(e.value)
    assert str(tmp_path / "empty") in msg and "--data-root" in msg and "GNN_DATA_ROOT" in msg
    assert "kimiyoung/planetoid" in msg


def test_mirror_is_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    roots = registry.candidate_roots()
    assert roots, "no data root: the mirror ../shared/datasets or GNN_DATA_ROOT is needed for the tests"
    before = {p: p.stat().st_mtime_ns for _, r in roots for p in r.rglob("*") if p.is_file()}
    load_dataset("mutag")
    after = {p: p.stat().st_mtime_ns for p in before}
    assert before == after
    assert not any(p.name == "processed" for _, r in roots for p in r.rglob("processed"))


def test_the_registry_ships_inside_the_package():
    """A non-editable install has the registry (package data), and nothing reads a registry from the checkout."""
    import importlib.resources
    import tomllib

    packaged = importlib.resources.files("gnn.data").joinpath("registry.toml")
    assert packaged.is_file() and Path(str(packaged)) == registry.REGISTRY_PATH
    pyproject = tomllib.loads((registry.REPO_ROOT / "pyproject.toml").read_text())
    assert "data/registry.toml" in pyproject["tool"]["setuptools"]["package-data"]["gnn"]


def test_outside_a_checkout_the_cache_is_the_users(tmp_path, monkeypatch):
    monkeypatch.delenv("GNN_CACHE_DIR", raising=False)
    assert registry.cache_dir() == registry.REPO_ROOT / "datasets" / "cache"  # a checkout: beside the code
    monkeypatch.setattr(registry, "REPO_ROOT", tmp_path / "site-packages")  # an installed package: no pyproject
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert registry.cache_dir() == tmp_path / "xdg" / "gnn-codesign" / "datasets"
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "mine"))
    assert registry.cache_dir() == tmp_path / "mine"
