"""Import layering of the project's packages (issue 34).

Every ``import`` / ``from ... import`` in every ``.py`` file under ``PACKAGES`` is checked, at module level and
inside functions, classes and ``if`` blocks alike (relative imports resolved; ``from pkg import name`` counts as
importing the module ``pkg.name`` when that is a module of the repository). String-based imports are not checked;
the one there is, ``importlib.import_module("pipeline")`` in ``gnn/pipeline.py``'s ``__main__`` block, is the
deprecation alias ``python -m gnn.pipeline`` (it goes in the next release) and is allowlisted nowhere.

The layers, bottom to top:

* ``gnn``: imports no sibling package.
* ``quant``: may import ``gnn``.
* ``hw``: may import ``gnn.cli``, ``gnn.data`` (dataset workloads) and the numpy-only parts of ``quant``
  (:data:`NUMPY_ONLY`: the ``.qgraph`` format ``quant.qgraph``, ``quant.formats``, ``quant.integer``,
  ``quant.readout`` (a graph classifier's pooling and head) and, of the
  architecture registry ``quant.archs``, each architecture's spec, ``integer`` and ``reader``; never its ``convert``
  or ``export``); never ``distributed`` or ``graphtransformer``; and not ``torch`` itself (the accelerator model is
  numpy-only). The numpy-only parts import neither torch nor torch_geometric.
* ``distributed``: may import ``gnn`` and ``quant``.
* ``graphtransformer``: may import ``gnn``, ``quant`` and ``distributed`` (its codecs, launcher and teardown);
  ``distributed`` never imports ``graphtransformer``.
* ``pipeline`` (the main job, ``python -m pipeline``): may import every package above; none imports it.
* ``benchmarks`` may import everything (not checked); no package imports ``benchmarks`` or ``tests``.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gnn", "quant", "hw", "distributed", "graphtransformer", "pipeline")
FIRST_PARTY = (*PACKAGES, "benchmarks", "tests")

# Package -> first-party modules it may import besides its own. "a.b" allows a.b and a.b.*; "a.b*" allows every
# module whose dotted name starts with "a.b".
ALLOWED = {
    "gnn": (),
    "quant": ("gnn",),
    "hw": ("gnn.cli", "gnn.data", "quant.qgraph", "quant.formats", "quant.integer", "quant.readout", "quant.archs"),
    "distributed": ("gnn", "quant"),
    "graphtransformer": ("gnn", "quant", "distributed"),
    "pipeline": ("gnn", "quant", "hw", "distributed", "graphtransformer"),
}
# Package -> first-party modules (fnmatch patterns) it must not import although ALLOWED covers them.
DENIED = {"hw": ("quant.archs.*.convert", "quant.archs.*.export")}
# Package -> third-party top-level modules it must not import.
FORBIDDEN_THIRD_PARTY = {"hw": ("torch",)}
# The numpy-only modules of quant (full-match regexes): what hw may read an export with, so no torch in them.
NUMPY_ONLY = (r"quant\.qgraph(\..+)?", r"quant\.formats(\..+)?", r"quant\.integer", r"quant\.readout",
              r"quant\.archs(\.spec)?",
              r"quant\.archs\.[^.]+(\.integer|\.reader)?")

# Today's violations: (importing module, imported module, reason, issue). To remove; this list may only shrink:
# the test fails for a violation not listed here, and for a listed one that no longer occurs.
ALLOWLIST = ()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    p = REPO_ROOT.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _imported(path: Path) -> set[str]:
    """Modules imported anywhere in ``path``: dotted names for first-party ones, top-level names otherwise."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                found.add(sub if _is_module(sub) else source)
    return {m if m.split(".")[0] in FIRST_PARTY else m.split(".")[0] for m in found}


def _allowed(package: str, target: str) -> bool:
    top = target.split(".")[0]
    if top == package:
        return True
    if top not in FIRST_PARTY:
        return top not in FORBIDDEN_THIRD_PARTY.get(package, ())
    if any(fnmatch.fnmatchcase(target, pattern) for pattern in DENIED.get(package, ())):
        return False
    for rule in ALLOWED[package]:
        if rule.endswith("*") and target.startswith(rule[:-1]):
            return True
        if target == rule or target.startswith(rule + "."):
            return True
    return False


def violations() -> set[tuple[str, str]]:
    """(importing module, imported module) for every import that breaks the layering."""
    found = set()
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            module = _module_name(path)
            found.update((module, target) for target in _imported(path) if not _allowed(package, target))
    return found


@pytest.fixture(scope="module")
def found() -> set[tuple[str, str]]:
    return violations()


def test_packages_exist():
    missing = [p for p in PACKAGES if not (REPO_ROOT / p).is_dir()]
    assert not missing, f"packages not found: {missing}"


def test_allowlist_well_formed():
    keys = [(a, b) for a, b, _, _ in ALLOWLIST]
    assert len(keys) == len(set(keys)), "duplicate allowlist entries"
    for importer, target, reason, issue in ALLOWLIST:
        assert importer.split(".")[0] in PACKAGES and reason and issue == "issue 34", (importer, target)


def test_no_new_layering_violations(found):
    allowed = {(a, b) for a, b, _, _ in ALLOWLIST}
    new = sorted(found - allowed)
    assert not new, "imports that break the package layering (see this file's docstring):\n" + "\n".join(
        f"  {a} imports {b}" for a, b in new)


def test_allowlist_only_shrinks(found):
    stale = sorted({(a, b) for a, b, _, _ in ALLOWLIST} - found)
    assert not stale, "allowlisted imports that no longer occur; remove them from ALLOWLIST:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in stale)


def test_no_package_imports_benchmarks_or_tests():
    """``benchmarks`` may import every package, so none imports it (or ``tests``), whatever ALLOWED may come to say."""
    found = sorted((_module_name(path), target) for package in PACKAGES
                   for path in sorted((REPO_ROOT / package).rglob("*.py"))
                   for target in _imported(path) if target.split(".")[0] in ("benchmarks", "tests"))
    assert not found, "\n".join(f"  {a} imports {b}" for a, b in found)


def test_checker_sees_nested_relative_and_from_imports(tmp_path, monkeypatch):
    """The import collector finds function-level, relative and ``from pkg import module`` imports."""
    (tmp_path / "hw" / "sub").mkdir(parents=True)
    (tmp_path / "quant").mkdir()
    (tmp_path / "quant" / "formats").mkdir()
    for f in ("hw/__init__.py", "hw/sub/__init__.py", "hw/other.py", "quant/__init__.py", "quant/formats/__init__.py",
              "quant/formats/packing.py"):
        (tmp_path / f).write_text("")
    src = tmp_path / "hw" / "sub" / "mod.py"
    src.write_text("import numpy as np\nfrom .. import other\n\ndef f():\n    from quant.formats import packing, x\n"
                   "    import torch.nn\n    from ...distributed.partition import y\n")
    monkeypatch.setitem(globals(), "REPO_ROOT", tmp_path)
    got = _imported(src)
    assert got == {"numpy", "hw.other", "quant.formats.packing", "quant.formats", "torch", "distributed.partition"}
    assert [t for t in sorted(got) if not _allowed("hw", t)] == ["distributed.partition", "torch"]
    assert not _allowed("hw", "quant.archs.gcn.convert") and _allowed("hw", "quant.archs.gcn.reader")


def test_numpy_only_modules_import_no_torch():
    """What hw reads an export with (NUMPY_ONLY) imports neither torch nor torch_geometric, anywhere in the file."""
    bad = []
    for path in sorted((REPO_ROOT / "quant").rglob("*.py")):
        module = _module_name(path)
        if any(re.fullmatch(pattern, module) for pattern in NUMPY_ONLY):
            bad += [(module, t) for t in _imported(path) if t in ("torch", "torch_geometric")
                    or not _allowed("hw", t) and t.split(".")[0] == "quant"]
    assert not bad, "\n".join(f"  {a} imports {b}" for a, b in bad)
