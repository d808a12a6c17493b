"""gnn.files: an atomic write that fails at any step leaves the previous content and no temporary file."""

import pytest

import gnn.files as files


@pytest.mark.parametrize("failing", ["fsync", "replace"])
def test_atomic_write_keeps_the_old_content_when_it_fails(tmp_path, monkeypatch, failing):
    path = tmp_path / "f"
    files.write_bytes(path, b"old")

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, failing, fail)
    with pytest.raises(OSError, match="disk full"):
        files.write_bytes(path, b"new")
    monkeypatch.undo()
    assert path.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["f"]


def test_written_bytes_hash_as_read_back(tmp_path):
    path = tmp_path / "g.json"
    files.write_json(path, {"a": [1, 2]})
    assert path.read_text() == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert files.sha256_file(path) == files.sha256_bytes(path.read_bytes())
