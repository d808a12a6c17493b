"""Hostile .qgraph exports: every file stays inside the export, a forged .npy header never allocates, and the graph,
bitwidths, codes and manifest entries are validated on load. Each case copies one valid export, applies one attack
(re-signing the SHA-256 in the manifest where an attacker would) and expects an ExportError naming the problem."""

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import arch_cases
import numpy as np
import pytest

from quant.export import export_model
from quant.export import main as export_main
from quant.formats.fixed_point import code_limit
from quant.qgraph import ExportError, QGraph, load


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    """One small valid GCN export (a degree-aware second layer: per-node bits from a degree table)."""
    helpers = arch_cases
    graph = helpers.tiny_graph(3)
    model = helpers.quantized_model(graph, "degree-aware", seed=3)
    return export_model(model, graph, tmp_path_factory.mktemp("valid") / "tiny_gcn.qgraph")


# ---------------------------------------------------------------------------------------- what an attacker does


def _manifest(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _write_manifest(d: Path, m: dict) -> None:
    (d / "manifest.json").write_text(json.dumps(m))


def _edit_manifest(fn):
    """A mutation that edits the manifest dict in place."""
    def mutate(d: Path) -> None:
        m = _manifest(d)
        fn(m)
        _write_manifest(d, m)
    return mutate


def _resign(d: Path, name: str, *, shape=None, dtype=None) -> None:
    """Recompute the manifest's SHA-256 of array ``name`` (and optionally its shape and dtype)."""
    m = _manifest(d)
    e = m["arrays"][name]
    e["sha256"] = hashlib.sha256((d / e["file"]).read_bytes()).hexdigest()
    e["shape"] = e["shape"] if shape is None else list(shape)
    e["dtype"] = e["dtype"] if dtype is None else dtype
    _write_manifest(d, m)


def _array(d: Path, name: str) -> np.ndarray:
    return np.load(d / _manifest(d)["arrays"][name]["file"])


def _tamper(name: str, edit, *, update_manifest: bool = True):
    """Rewrite array ``name`` as ``edit(array)`` and re-sign it (shape and dtype too unless ``update_manifest`` is
    False: then only the checksum)."""
    def mutate(d: Path) -> None:
        a = edit(np.array(_array(d, name)))
        np.save(d / _manifest(d)["arrays"][name]["file"], a, allow_pickle=False)
        _resign(d, name, **({"shape": a.shape, "dtype": a.dtype.str} if update_manifest else {}))
    return mutate


def _set(index, value):
    def edit(a):
        a[index] = value
        return a
    return edit


def _point_file_outside(make_name):
    """Copy a real array file next to the export and point the manifest entry at it (``make_name(outside path)``)."""
    def mutate(d: Path) -> None:
        outside = d.parent / "outside.npy"
        shutil.copy(d / "layer0.w_codes.npy", outside)
        m = _manifest(d)
        m["arrays"]["layer0.w_codes"]["file"] = make_name(outside)
        _write_manifest(d, m)
    return mutate


def _symlink(d: Path) -> None:
    outside = d.parent / "outside.npy"
    shutil.copy(d / "layer0.w_codes.npy", outside)  # the same bytes: the checksum still matches
    (d / "layer0.w_codes.npy").unlink()
    (d / "layer0.w_codes.npy").symlink_to(outside)


def _huge_header(d: Path) -> None:
    """A .npy header declaring 10^11 x 1000 float64 over 16 bytes of data, manifest and checksum consistent."""
    f = d / "layer0.x_steps.npy"
    with open(f, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f8", "fortran_order": False, "shape": (10**11, 1000)})
        fh.write(b"\0" * 16)
    _resign(d, "layer0.x_steps", shape=(10**11, 1000), dtype="<f8")


def _truncate(d: Path) -> None:
    f = d / "layer0.w_codes.npy"
    f.write_bytes(f.read_bytes()[:-5])
    _resign(d, "layer0.w_codes")


def _not_npy(d: Path) -> None:
    (d / "layer0.w_codes.npy").write_bytes(b"PK\x03\x04 not a numpy file at all")
    _resign(d, "layer0.w_codes")


def _directory(d: Path) -> None:
    (d / "layer0.w_codes.npy").unlink()
    (d / "layer0.w_codes.npy").mkdir()


def _beyond_x_bits(a: np.ndarray, bits: np.ndarray) -> np.ndarray:
    row = int(np.argmin(bits))
    a[row, 0] = code_limit(bits[row]) + 1
    return a


def _code_beyond_its_bitwidth(d: Path) -> None:
    bits = _array(d, "layer1.x_bits")
    _tamper("layer1.x_codes", lambda a: _beyond_x_bits(a, bits))(d)


def _swap_sources_across_rows(a: np.ndarray) -> np.ndarray:
    i, j = 0, next(k for k in range(1, a.size) if a[k] != a[0])
    a[[i, j]] = a[[j, i]]
    return a


def _swap(i: int, j: int):
    def edit(a):
        a[[i, j]] = a[[j, i]]
        return a
    return edit


def _delete_entry(name: str):
    return _edit_manifest(lambda m: m["arrays"].pop(name))


def _set_key(*keys_and_value):
    *keys, value = keys_and_value

    def edit(m):
        for k in keys[:-1]:
            m = m[k]
        m[keys[-1]] = value
    return _edit_manifest(edit)


CASES = [
    # files stay inside the export
    ("path traversal", _point_file_outside(lambda p: "../outside.npy"), "not a plain file name"),
    ("deep traversal", _point_file_outside(lambda p: "../../x.npy"), "not a plain file name"),
    ("absolute path", _point_file_outside(lambda p: str(p.resolve())), "not a plain file name"),
    ("symlinked array", _symlink, "symbolic link"),
    ("directory in place of a file", _directory, "not a regular file"),
    ("missing file", lambda d: (d / "layer0.w_codes.npy").unlink(), r"'layer0\.w_codes'.*missing"),
    # the .npy header and size are checked before any data is read
    ("huge shape header", _huge_header, r"'layer0\.x_steps'.*truncated or padded"),
    ("truncated file, re-signed", _truncate, r"'layer0\.w_codes'.*truncated or padded"),
    ("not a .npy file", _not_npy, r"'layer0\.w_codes'.*no valid \.npy header"),
    ("wrong dtype in the file", _tamper("layer1.x_steps", lambda a: a.astype(np.float32), update_manifest=False),
     r"'layer1\.x_steps'.*differ from the manifest"),
    ("object dtype in the manifest", _set_key("arrays", "layer0.w_codes", "dtype", "|O"), "not a numeric dtype"),
    ("negative shape in the manifest", _set_key("arrays", "layer0.w_codes", "shape", [-1, 24]),
     "not a list of non-negative integers"),
    ("float shape in the manifest", _set_key("arrays", "layer0.w_codes", "shape", [8.0, 24]),
     "not a list of non-negative integers"),
    # the graph
    ("indices out of range", _tamper("graph.indices", _set(5, 10**9)), r"'graph\.indices'.*outside \[0, 80\)"),
    ("negative index", _tamper("graph.indices", _set(5, -1)), r"'graph\.indices'.*outside \[0, 80\)"),
    ("edge_index out of range", _tamper("graph.edge_index", _set((0, 0), 80)), r"'graph\.edge_index'.*outside"),
    ("non-monotone indptr", _tamper("graph.indptr", _swap(3, 4)), "not non-decreasing"),
    ("indptr not ending at len(indices)", _tamper("graph.indptr", _set(-1, 553)), "runs from 0 to"),
    ("wrong in_degree", _tamper("graph.in_degree", _set(7, 99)), r"'graph\.in_degree' disagrees"),
    ("row lengths off by one", _tamper("graph.indptr", lambda a: _set(10, a[10] + 1)(a)), "row lengths"),
    ("sources swapped across rows", _tamper("graph.indices", _swap_sources_across_rows), "not the GCN CSR"),
    ("gcn_weight tampered", _tamper("graph.gcn_weight", _set(0, 0.25)), r"'graph\.gcn_weight' disagrees"),
    ("float edge_index", _tamper("graph.edge_index", lambda a: a.astype(np.float64)), "signed-integer array"),
    ("dataset.num_nodes disagrees", _set_key("dataset", "num_nodes", 81), r"dataset\.num_nodes 81"),
    # bitwidths and codes
    ("code beyond its bitwidth", _code_beyond_its_bitwidth, r"'layer1\.x_codes' holds codes outside"),
    ("weight beyond w_bits", _tamper("layer0.w_codes", _set((0, 0), 8)), r"'layer0\.w_codes' holds codes outside"),
    ("bitwidth above 8", _tamper("layer1.x_bits", _set(0, 9)), r"'layer1\.x_bits'.*outside the schema's 1\.\.8"),
    ("bitwidth 0", _tamper("layer1.degree_bits", _set(0, 0)), r"'layer1\.degree_bits'.*outside"),
    ("per-node bits of the wrong length", _tamper("layer1.x_bits", lambda a: a[:-1]), r"expected \(80,\)"),
    ("float codes", _tamper("layer0.x_codes", lambda a: a.astype(np.float32)), "expected integer codes"),
    ("w_bits out of range in the manifest", _set_key("layers", 0, "w_bits", 9), r"layers\[0\]\.w_bits"),
    ("w_bits a bool", _set_key("layers", 0, "w_bits", True), r"layers\[0\]\.w_bits is True"),
    ("has_bias not a bool", _set_key("layers", 1, "has_bias", "yes"), r"layers\[1\]\.has_bias"),
    ("psum_bits out of range", _set_key("integer_path", "psum_bits", 1000), r"integer_path\.psum_bits"),
    ("layers not a list", _set_key("layers", {"0": {}}), "'layers' must be a non-empty list"),
    # architecture and schema
    ("unknown arch", _set_key("model", "arch", "mlp"),
     r"unknown architecture.*'mlp'.*gcn, sage, gin, gat, graph-transformer"),
    ("no arch", _edit_manifest(lambda m: m["model"].pop("arch")), "unknown architecture.*None"),
    ("schema_version true", _set_key("schema_version", True), r"schema_version True \(bool\).*must be an integer"),
    ("schema_version '1'", _set_key("schema_version", "1"), r"schema_version '1' \(str\).*must be an integer"),
    ("schema_version 1.0", _set_key("schema_version", 1.0), r"schema_version 1\.0 \(float\).*must be an integer"),
    ("missing required array", _delete_entry("layer1.xw_codes"), r"lacks required.*layer1\.xw_codes"),
    ("manifest not an object", lambda d: (d / "manifest.json").write_text("[1, 2]"), "not an object"),
]


@pytest.fixture
def copy(valid, tmp_path):
    return Path(shutil.copytree(valid, tmp_path / "case" / "tiny_gcn.qgraph"))


def test_the_untouched_copy_loads(copy):
    load(copy).verify()


@pytest.mark.parametrize(("mutate", "match"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_hostile_export_is_refused(copy, mutate, match):
    mutate(copy)
    with pytest.raises(ExportError, match=match):
        load(copy)


def test_consumers_refuse_an_unknown_arch(valid):
    """A QGraph built around load()'s checks still never reads an unknown arch as a GCN."""
    from hw.workload import workload_from_export

    q = load(valid)
    mlp = QGraph(path=q.path, manifest={**q.manifest, "model": {**q.manifest["model"], "arch": "mlp"}},
                 arrays=q.arrays)
    for consume, who in ((workload_from_export, "hw.workload"), (QGraph.to_quantized_gcn, "tiny_gcn")):
        with pytest.raises(ExportError, match=f"{who}.*unknown architecture.*'mlp'.*known: gcn, sage, gin, gat"):
            consume(mlp)


def test_simulate_cli_prints_one_error_line(copy):
    _tamper("graph.indices", _set(5, 10**9))(copy)
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-m", "hw.simulate", str(copy), "--no-check"], cwd=root,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "graph.indices" in lines[0], res.stderr


def _one_error_line(run: Path, out: Path, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        export_main(["--run", str(run), "--out", str(out)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def test_export_cli_bad_run_dir_is_one_line(tmp_path, capsys):
    run, out = tmp_path / "run", tmp_path / "x.qgraph"
    assert "config.json" in _one_error_line(run, out, capsys)  # no directory
    run.mkdir()
    assert "config.json" in _one_error_line(run, out, capsys)  # a directory without a run
    (run / "config.json").write_text("{not json")
    _one_error_line(run, out, capsys)
    (run / "seed0_fold0").mkdir()
    (run / "seed0_fold0" / "best.pt").write_bytes(b"not a checkpoint")
    (run / "config.json").write_text("{}")  # parses, but holds no run
    assert "cannot read the run directory" in _one_error_line(run, out, capsys)
