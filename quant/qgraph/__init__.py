"""The ``.qgraph`` export format, read back with numpy only: :func:`load` validates an export and returns a
:class:`QGraph`. Which architectures the format holds is the registry :mod:`quant.archs`.

Why numpy only: the writer (:mod:`quant.export`) converts trained models and needs torch; a consumer (``hw/``, the
RTL flow) only reads arrays, and importing torch and torch_geometric for that costs seconds. This package imports
numpy, the standard library and numpy-only ``quant`` modules; per-architecture readers
(``quant.archs.<arch>.reader``) load lazily, on first use. The arrays of each architecture are documented by its
``quant.archs.<arch>.export`` module; :mod:`quant.qgraph.write` writes them.

:func:`load` validates an export before returning anything, and raises :class:`ExportError` naming the problem:
the manifest (an integer schema version, a known ``model.arch``, sane per-layer entries), every file (a plain file
name of a regular file inside the export; its .npy header's shape and dtype against the manifest and the file size
before any data is read; its SHA-256) and the contents (the CSR and in-degrees against ``graph.edge_index``, node ids
within ``[0, N)``, bitwidths within the schema's range, input and weight codes within their bitwidths). The
integer path itself is recomputed by :meth:`QGraph.verify`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from quant.archs import ARCHS, integer_archs, reader
from quant.formats import adaptive_package, packing
from quant.formats.fixed_point import code_limit

if TYPE_CHECKING:
    from quant.archs.gcn.integer import QuantizedGCN

FORMAT = "qgraph"
SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
MANIFEST = "manifest.json"
MAX_CODE_BITS = 8  # int8 code containers (a GIN's 16-bit fixed-point hidden codes live in int16)


class ExportError(ValueError):
    """An export that cannot be written or read back intact."""


DEGREE_TABLE = ("degree_min", "degree_max", "degree_bits", "degree_step")  # a degree-bucketed tensor's table
CSR_ARRAYS = ("graph.edge_index", "graph.indptr", "graph.indices")


def layer_array_names(manifest: dict, graph_arrays: tuple[str, ...], layer_suffixes) -> list[str]:
    """``graph_arrays`` + ``"logits"``, then for every layer ``layer<i>.<s>`` for each suffix ``s`` of
    ``layer_suffixes(meta)`` (the layer's manifest entry): the names a complete integer export holds."""
    names = [*graph_arrays, "logits"]
    for li, meta in enumerate(manifest.get("layers", [])):
        names += [f"layer{li}.{s}" for s in layer_suffixes(meta)]
    return names


def degree_table(prefix: str, meta: dict, scheme_key: str) -> list[str]:
    """The degree table's suffixes (``prefix`` + name) when ``meta[scheme_key]`` is ``"degree"``, else none."""
    return [prefix + s for s in DEGREE_TABLE] if meta.get(scheme_key) == "degree" else []


def check_arch(arch, where: str) -> str:
    """``arch`` if it is one this package exports; else ExportError naming the known ones (an unknown arch must never
    be read as another, e.g. simulated as a GCN)."""
    if not isinstance(arch, str) or arch not in ARCHS:
        raise ExportError(f"{where}: unknown architecture (model.arch) {arch!r}; known: {', '.join(ARCHS)}")
    return arch


# ---------------------------------------------------------------------------------------- a loaded export


@dataclass(frozen=True)
class QGraph:
    """A loaded, verified export: ``manifest`` (dict) and ``arrays`` (name -> read-only ndarray)."""

    path: Path
    manifest: dict
    arrays: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            raise ExportError(f"{self.path}: no array {name!r}; the export has {len(self.arrays)} arrays "
                              f"(e.g. {', '.join(sorted(self.arrays)[:5])})")
        return self.arrays[name]

    @property
    def arch(self) -> str | None:
        """The exported model's architecture (``"gcn"``, ``"sage"``, ``"graph-transformer"``)."""
        model = self.manifest.get("model")
        return model.get("arch") if isinstance(model, dict) else None

    @property
    def is_graph_transformer(self) -> bool:
        """A graph-transformer export (:mod:`quant.archs.transformer.export`): quantized tensors, no integer path."""
        return _is_transformer(self.manifest)

    def feature_streams(self, prefix: str, num_nodes: int, num_features: int, name: str = "x") -> tuple[
            packing.PackedRows, adaptive_package.AdaptivePackageStream]:
        """The packed rows (``<prefix><name>_packed.*``) and Adaptive-Package stream (``<prefix><name>_ap.*``) of
        one feature tensor of (num_nodes, num_features) codes."""
        p = prefix + name
        packed = packing.PackedRows(payload=self[p + "_packed.payload"], bits=self[p + "_packed.bits"],
                                    bit_offsets=self[p + "_packed.bit_offsets"],
                                    group_byte_offsets=self[p + "_packed.group_byte_offsets"],
                                    num_features=num_features)
        ap = adaptive_package.AdaptivePackageStream(
            words=self[p + "_ap.words"], bitmap=self[p + "_ap.bitmap"], first_node=self[p + "_ap.first_node"],
            first_value=self[p + "_ap.first_value"], num_values=self[p + "_ap.num_values"], num_nodes=num_nodes,
            num_features=num_features)
        return packed, ap

    def packed_checks(self, prefix: str, codes: np.ndarray, name: str = "x"
                      ) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """``(array name, codes, decoded)`` for both packed layouts of one exported feature tensor (for
        :meth:`check_recomputed`)."""
        packed, ap = self.feature_streams(prefix, *codes.shape, name=name)
        return [(f"{name}_packed.payload", codes, packing.unpack_rows(packed)),
                (f"{name}_ap.words", codes, adaptive_package.decode(ap))]

    def check_recomputed(self, prefix: str, checks: list[tuple[str, np.ndarray, np.ndarray]]) -> None:
        """Raise ExportError naming the first ``prefix + name`` whose exported (or decoded) integers differ from the
        ones recomputed from the exported parameters."""
        for name, want, got in checks:
            if not np.array_equal(np.asarray(want, dtype=np.int64), np.asarray(got, dtype=np.int64)):
                raise ExportError(f"{self.path}: array '{prefix}{name}' disagrees with the integer path recomputed "
                                  "from the exported parameters")

    def verify_layers(self, model, graph_fn, layer_checks) -> None:
        """Recompute every layer of ``model`` (the integer model the arrays describe) from the exported parameters:
        ``layer_checks(q, li, layer, codes, csr) -> (checks, trace)`` gives layer ``li``'s ``(name, recomputed,
        exported)`` triples (see :meth:`check_recomputed`) and its trace, whose ``"out"`` codes feed the next layer;
        ``csr = graph_fn(edge_index, N)``."""
        csr = graph_fn(self["graph.edge_index"], model.x_codes.shape[0])
        codes = model.x_codes
        for li, layer in enumerate(model.layers):
            checks, trace = layer_checks(self, li, layer, codes, csr)
            self.check_recomputed(f"layer{li}.", checks)
            codes = trace["out"]

    def integer_model(self):
        """The integer golden model the arrays describe (its architecture's ``reader.integer_model``)."""
        check_arch(self.arch, str(self.path))
        if not ARCHS[self.arch].integer_path:
            raise ExportError(f"{self.path}: a {ARCHS[self.arch].display_name} export carries quantized tensors, no "
                              "integer path")
        return reader(self.arch).integer_model(self)

    def to_quantized_gcn(self) -> QuantizedGCN:
        """The integer GCN the arrays describe (:class:`quant.archs.gcn.integer.QuantizedGCN`); ExportError for
        any other architecture."""
        if self.is_graph_transformer:
            raise ExportError(f"{self.path}: a graph-transformer export carries quantized tensors, not a GCN "
                              "integer path; read its tensors with quant.archs.transformer.reader.point_streams or "
                              "hw.tensor_traffic")
        if self.arch in integer_archs() and self.arch != "gcn":
            raise ExportError(f"{self.path}: a {ARCHS[self.arch].display_name} export, not a GCN; its integer model "
                              f"is q.integer_model() ({ARCHS[self.arch].package}.reader); "
                              "hw.workload.workload_from_export reads GIN and GraphSAGE exports for the accelerator "
                              "model")
        check_arch(self.arch, str(self.path))  # what is left of the known archs is a GCN
        return reader("gcn").integer_model(self)

    def verify(self) -> None:
        """Recompute the integer path and decode both packed layouts; raise ExportError naming the first array
        that disagrees (a consumer's bit-exactness check). Graph-transformer exports: decode every packed tensor.
        A graph classifier's export: also its readout (pooled sums, the head's hidden values, the graph logits)."""
        check_arch(self.arch, str(self.path))  # an unknown arch is never verified as a GCN
        reader(self.arch).verify(self)
        if self.is_graph_level:
            r = self.graph_forward()
            checks = [(k, v, self[f"readout.{k}"]) for k, v in r.items() if k != "logits" and k.startswith(("pooled",
                                                                                                     "hidden"))]
            self.check_recomputed("readout.", checks)
            for k in [k for k in r if k.startswith("pool_unit")] + ["logits"]:  # float64: computed the same way
                name = k if k == "logits" else f"readout.{k}"
                if not np.array_equal(r[k], self[name]):
                    raise ExportError(f"{self.path}: array '{name}' disagrees with the readout recomputed from the "
                                      "exported parameters")

    @property
    def is_graph_level(self) -> bool:
        """A graph classifier's export: a batch of graphs as one block-diagonal graph plus the readout."""
        return isinstance(self.manifest.get("readout"), dict)

    def readout(self):
        """The integer readout (:class:`quant.readout.QuantizedReadout`) of a graph classifier's export."""
        from quant.readout import QuantizedReadout, ReadoutLinear

        if not self.is_graph_level:
            raise ExportError(f"{self.path}: a node-level export has no readout")
        ro = self.manifest["readout"]
        linears = tuple(ReadoutLinear(w_codes=self[f"readout.linear{i}.w_codes"],
                                      w_steps=self[f"readout.linear{i}.w_steps"], w_bits=lin["w_bits"],
                                      bias=self[f"readout.linear{i}.bias"] if lin["has_bias"] else None)
                        for i, lin in enumerate(ro["linears"]))
        return QuantizedReadout(pool=ro["pool"], head=ro["head"], readout_input=ro["readout_input"], linears=linears)

    def graph_forward(self) -> dict[str, np.ndarray]:
        """The integer forward of a graph classifier's export (layers, then the readout): the readout's arrays
        (:func:`quant.readout.readout_int`), ``"logits"`` (G, C) per graph."""
        from quant.readout import graph_forward_int

        golden = ARCHS[self.arch].module("integer").GOLDEN
        _, r = graph_forward_int(golden, self.integer_model(), self.readout(), self["graph.edge_index"],
                                 self["graph.graph_ptr"])
        return r


# ---------------------------------------------------------------------------------------- reading (validated)

# Every dtype the exporter writes, in either byte order; the manifest and the .npy header must name one of these.
_NUMERIC_DTYPES = frozenset(np.dtype(order + t).str for order in "<>"
                            for t in ("b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8"))
_MAX_NDIM = 32
_INTEGER_PATH = {"frac_bits": (0, 62), "psum_bits": (2, 64)}


def load(path: Path | str) -> QGraph:
    """Load and validate an export; raises ExportError naming the problem. Checks, before any consumer sees an array:
    the manifest (schema version, architecture, per-layer entries), each file (a regular file inside the export;
    its .npy header against the manifest's shape and dtype and the file size, then its SHA-256) and the contents
    (CSR and degrees against ``graph.edge_index``, bitwidths in range, codes within their bitwidths)."""
    path = Path(path)
    manifest = _read_manifest(path)
    root = path.resolve()
    arrays = {name: _read_array(path, root, name, e) for name, e in manifest["arrays"].items()}
    missing = [n for n in _required(manifest) if n not in arrays]
    if missing:
        raise ExportError(f"load: {path} lacks required array(s) {missing}; the export is incomplete")
    _check_contents(path, manifest, arrays)
    return QGraph(path=path, manifest=manifest, arrays=arrays)


def _read_manifest(path: Path) -> dict:
    """The parsed, structurally checked manifest of the export at ``path``."""
    mpath = path / MANIFEST
    if mpath.is_symlink():
        raise ExportError(f"load: {mpath} is a symbolic link; an export holds its own regular files")
    if not mpath.is_file():
        raise ExportError(f"load: {mpath} not found; {path} is not a .qgraph export directory")
    try:
        manifest = json.loads(mpath.read_text())
    except OSError as e:
        raise ExportError(f"load: cannot read {mpath} ({e.strerror or e})") from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ExportError(f"load: {mpath} is not valid JSON ({e}); the manifest is truncated or corrupted") from None
    if not isinstance(manifest, dict):
        raise ExportError(f"load: {mpath} holds a JSON {type(manifest).__name__}, not an object")
    if manifest.get("format") != FORMAT:
        raise ExportError(f"load: {mpath} has format {manifest.get('format')!r}, expected {FORMAT!r}")
    _check_version(path, manifest.get("schema_version"))
    model = manifest.get("model")
    arch = check_arch(model.get("arch") if isinstance(model, dict) else None, f"load: {path}")
    if not isinstance(manifest.get("arrays"), dict):
        raise ExportError(f"load: {mpath} has no 'arrays' object")
    if arch == "graph-transformer":
        _check_tensor_entries(path, manifest)
    else:
        _check_integer_meta(path, arch, manifest)
    if "readout" in manifest:
        _check_readout_meta(path, manifest)
    return manifest


def _check_readout_meta(path: Path, manifest: dict) -> None:
    """``readout`` of a graph classifier's export: pool, head and per-linear entries its reader indexes."""
    from quant.readout import HEADS, POOLS

    ro = manifest["readout"]
    ok = (isinstance(ro, dict) and ro.get("pool") in POOLS and ro.get("head") in HEADS
          and type(ro.get("readout_input")) is bool and _meta_ok("dim", ro.get("num_readouts"))
          and _meta_ok("dim", ro.get("num_graphs")) and isinstance(ro.get("linears"), list) and ro["linears"]
          and all(isinstance(lin, dict) and _meta_ok("dim", lin.get("in_dim")) and _meta_ok("dim", lin.get("out_dim"))
                  and _meta_ok("bits", lin.get("w_bits")) and type(lin.get("has_bias")) is bool
                  for lin in ro["linears"]))
    if not ok:
        raise ExportError(f"load: {path}: 'readout' needs pool ({', '.join(POOLS)}), head ({', '.join(HEADS)}), "
                          "readout_input, num_readouts, num_graphs and linears [{in_dim, out_dim, w_bits, has_bias}]")
    if ro["head"] == "linear-sum" and len(ro["linears"]) != ro["num_readouts"]:
        raise ExportError(f"load: {path}: a 'linear-sum' readout has one linear map per readout; got "
                          f"{len(ro['linears'])} for {ro['num_readouts']}")


def _check_version(path: Path, version) -> None:
    if type(version) is not int:  # True == 1 == 1.0 in Python: bools, floats and strings never pass
        raise ExportError(f"load: {path} has schema_version {version!r} ({type(version).__name__}); it must be an "
                          f"integer; this reader supports {SUPPORTED_SCHEMA_VERSIONS}")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        newer = version > SCHEMA_VERSION
        raise ExportError(f"load: {path} has schema_version {version!r}; this reader supports "
                          f"{SUPPORTED_SCHEMA_VERSIONS}" + ("; it was written by a newer exporter, update the "
                                                            "quant package" if newer else ""))


def _meta_ok(kind, v) -> bool:
    """Whether a manifest value ``v`` is of ``kind`` (a type, or "dim", "bits", "number", "step_scheme")."""
    if kind == "dim":
        return type(v) is int and v >= 1
    if kind == "bits":
        return type(v) is int and 1 <= v <= MAX_CODE_BITS
    if kind == "number":
        return type(v) in (int, float) and np.isfinite(v)
    if kind == "step_scheme":
        return v in ("node", "channel")
    return type(v) is kind


def _check_integer_meta(path: Path, arch: str, manifest: dict) -> None:
    """``integer_path`` and ``layers`` of a GCN, GraphSAGE, GIN or GAT export: what their readers index."""
    ip = manifest.get("integer_path")
    for key, (lo, hi) in _INTEGER_PATH.items():
        v = ip.get(key) if isinstance(ip, dict) else None
        if type(v) is not int or not lo <= v <= hi:
            raise ExportError(f"load: {path}: integer_path.{key} is {v!r}; expected an integer in [{lo}, {hi}]")
    layers = manifest.get("layers")
    if not isinstance(layers, list) or not layers or not all(isinstance(m, dict) for m in layers):
        raise ExportError(f"load: {path}: 'layers' must be a non-empty list of per-layer objects")
    for li, meta in enumerate(layers):
        if meta.get("index", li) != li:
            raise ExportError(f"load: {path}: layers[{li}] has index {meta.get('index')!r}")
        for key, kind in ARCHS[arch].layer_meta.items():
            if not _meta_ok(kind, meta.get(key)):
                want = kind.__name__ if isinstance(kind, type) else {
                    "dim": "an integer >= 1", "bits": f"a bitwidth in 1..{MAX_CODE_BITS}", "number": "a finite number",
                    "step_scheme": "'node' or 'channel'"}[kind]
                raise ExportError(f"load: {path}: layers[{li}].{key} is {meta.get(key)!r}; expected {want}")


def _check_tensor_entries(path: Path, manifest: dict) -> None:
    """``points`` and ``weights`` of a graph-transformer export: lists of objects with a string ``name``."""
    for key in ("points", "weights"):
        items = manifest.get(key)
        if not isinstance(items, list) or not all(isinstance(i, dict) and isinstance(i.get("name"), str)
                                                  for i in items):
            raise ExportError(f"load: {path}: '{key}' must be a list of objects with a string 'name'")


def _entry(name: str, e) -> tuple[str, tuple[int, ...], np.dtype]:
    """(file name, shape, dtype) of a manifest array entry, each checked to be sane before any file is opened."""
    if not isinstance(e, dict) or not isinstance(e.get("sha256"), str):
        raise ExportError(f"load: array {name!r}: the manifest entry needs 'file', 'sha256', 'shape' and 'dtype'")
    file, shape, dtype = e.get("file"), e.get("shape"), e.get("dtype")
    if not isinstance(file, str) or file in ("", ".", "..") or any(c in file for c in "/\\\0") or \
            os.path.basename(file) != file:
        raise ExportError(f"load: array {name!r}: file {file!r} is not a plain file name inside the export (no "
                          "directories, '..' or absolute paths)")
    if not isinstance(shape, list) or len(shape) > _MAX_NDIM or not all(type(d) is int and d >= 0 for d in shape):
        raise ExportError(f"load: array {name!r}: manifest shape {shape!r} is not a list of non-negative integers")
    if dtype not in _NUMERIC_DTYPES:
        raise ExportError(f"load: array {name!r}: manifest dtype {dtype!r} is not a numeric dtype the exporter "
                          f"writes ({', '.join(sorted(_NUMERIC_DTYPES))})")
    return file, tuple(shape), np.dtype(dtype)


def _read_array(path: Path, root: Path, name: str, e) -> np.ndarray:
    """One array, read only after its file, .npy header and size agree with the manifest entry ``e``."""
    file, shape, dtype = _entry(name, e)
    f = path / file
    try:
        st = os.lstat(f)
    except FileNotFoundError:
        raise ExportError(f"load: array {name!r}: file {f} is missing") from None
    except OSError as err:
        raise ExportError(f"load: array {name!r}: cannot read {f} ({err.strerror or err})") from None
    if stat.S_ISLNK(st.st_mode):
        raise ExportError(f"load: array {name!r}: {f} is a symbolic link; an export holds its own regular files")
    if not stat.S_ISREG(st.st_mode) or f.resolve().parent != root:
        raise ExportError(f"load: array {name!r}: {f} is not a regular file inside the export")
    try:
        return _read_npy(name, f, e["sha256"], shape, dtype)
    except OSError as err:  # e.g. replaced by a symlink since the lstat (O_NOFOLLOW)
        raise ExportError(f"load: array {name!r}: cannot read {f} ({err.strerror or err})") from None


def _read_npy(name: str, f: Path, sha256: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Header first (shape, dtype, size against the manifest: a forged header never allocates), then the
    checksum of the whole file, then the data (read-only)."""
    with os.fdopen(os.open(f, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), "rb") as fh:
        h_shape, fortran, h_dtype = _npy_header(name, f, fh)
        offset = fh.tell()
        if h_dtype.str != dtype.str or tuple(h_shape) != shape:
            raise ExportError(f"load: array {name!r}: shape {h_shape} dtype {h_dtype.str} in the header of {f.name} "
                              f"differ from the manifest ({list(shape)}, {dtype.str})")
        count = math.prod(shape)
        data_bytes, want = os.fstat(fh.fileno()).st_size - offset, count * dtype.itemsize
        if data_bytes != want:
            raise ExportError(f"load: array {name!r}: {f.name} holds {data_bytes} data bytes but its header declares "
                              f"{shape} {dtype.str} ({want} bytes); the file is truncated or padded")
        fh.seek(0)
        raw = fh.read()
    if hashlib.sha256(raw).hexdigest() != sha256:
        raise ExportError(f"load: array {name!r}: SHA-256 of {f.name} does not match the manifest (the file is "
                          "truncated or corrupted); re-export")
    arr = np.frombuffer(raw, dtype=dtype, count=count, offset=offset) if count else np.empty(0, dtype=dtype)
    return arr.reshape(shape, order="F" if fortran else "C")  # a view of immutable bytes: read-only


def _npy_header(name: str, f: Path, fh) -> tuple:
    """(shape, fortran_order, dtype) of an open .npy file (format 1.0 or 2.0, as ``np.save`` writes)."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"format version {version} is not 1.0 or 2.0")
        return (fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0)(fh)
    except (ValueError, TypeError, SyntaxError) as e:
        raise ExportError(f"load: array {name!r}: {f.name} has no valid .npy header ({e})") from None


# ---------------------------------------------------------------------------------------- contents


def _check_contents(path: Path, manifest: dict, arrays: dict[str, np.ndarray]) -> None:
    """The structural invariants every consumer relies on (the graph, bitwidths, codes)."""
    arch = manifest["model"]["arch"]
    n = _num_nodes(path, manifest, arrays)
    _check_graph(path, arch, arrays, n)
    _check_bitwidths(path, arrays)
    if arch == "graph-transformer":
        for p in manifest["points"]:
            b = f"point.{p['name']}."
            codes = _codes(path, arrays, b + "x_codes", (n, None))
            _check_within(path, arrays, b + "x_codes", codes, b + "x_bits")
        for w in manifest["weights"]:
            b = f"weight.{w['name']}."
            _check_within(path, arrays, b + "w_codes", _codes(path, arrays, b + "w_codes", (None, None)), b + "w_bits")
        return
    if "readout" in manifest:
        _check_readout_arrays(path, manifest["readout"], arrays, n)
    for li, meta in enumerate(manifest["layers"]):
        p = f"layer{li}."
        codes = _codes(path, arrays, p + "x_codes", (n, meta["in_dim"]))
        _check_within(path, arrays, p + "x_codes", codes, p + "x_bits", per_channel=meta.get("x_step_scheme") ==
                      "channel")
        for wname, bits_key, shape in ARCHS[arch].layer_weights:
            _check_within(path, arrays, p + wname, _codes(path, arrays, p + wname, shape(meta)), meta[bits_key])


def _check_readout_arrays(path: Path, ro: dict, arrays: dict, n: int) -> None:
    """The batch's graphs (``graph.graph_ptr`` from 0 to N, non-decreasing; one label per graph) and the head's
    weight codes (shape and bitwidth of their manifest entries)."""
    ptr = _index_array(path, arrays, "graph.graph_ptr", 1)
    if ptr.shape != (ro["num_graphs"] + 1,) or ptr[0] != 0 or ptr[-1] != n or np.any(np.diff(ptr) < 0):
        raise ExportError(f"load: {path}: array 'graph.graph_ptr' must run non-decreasing from 0 to {n} nodes with "
                          f"num_graphs + 1 = {ro['num_graphs'] + 1} entries")
    if _index_array(path, arrays, "graph.graph_labels", 1).shape != (ro["num_graphs"],):
        raise ExportError(f"load: {path}: array 'graph.graph_labels' needs one label per graph ({ro['num_graphs']})")
    for i, lin in enumerate(ro["linears"]):
        name = f"readout.linear{i}.w_codes"
        _check_within(path, arrays, name, _codes(path, arrays, name, (lin["out_dim"], lin["in_dim"])), lin["w_bits"])


def _index_array(path: Path, arrays: dict, name: str, ndim: int) -> np.ndarray:
    """Array ``name`` as int64, refused unless it is a signed-integer array of ``ndim`` dimensions."""
    a = arrays[name]
    if a.dtype.kind != "i" or a.ndim != ndim:
        raise ExportError(f"load: {path}: array '{name}' is {a.dtype.str} of shape {a.shape}; expected a {ndim}-D "
                          "signed-integer array")
    return a.astype(np.int64, copy=False)


def _check_ids(path: Path, name: str, a: np.ndarray, n: int) -> None:
    if a.size and (a.min() < 0 or a.max() >= n):
        raise ExportError(f"load: {path}: array '{name}' holds node ids in [{a.min()}, {a.max()}], outside [0, {n})")


def _num_nodes(path: Path, manifest: dict, arrays: dict) -> int:
    """N, the length of ``graph.in_degree`` (the manifest's ``dataset.num_nodes`` must agree)."""
    n = _index_array(path, arrays, "graph.in_degree", 1).shape[0]
    ds = manifest.get("dataset")
    declared = ds.get("num_nodes", n) if isinstance(ds, dict) else n
    if type(declared) is not int or declared != n:
        raise ExportError(f"load: {path}: dataset.num_nodes {declared!r} disagrees with 'graph.in_degree' ({n} "
                          "nodes)")
    return n


def _check_graph(path: Path, arch: str, arrays: dict, n: int) -> None:
    """Edges within [0, N), in-degrees of them, and (GCN, GraphSAGE, GIN, GAT) the exported CSR equal to the one
    the golden model builds from ``graph.edge_index``: consumers rebuild it from the edges, so the two must agree."""
    ei = _index_array(path, arrays, "graph.edge_index", 2)
    if ei.shape[0] != 2:
        raise ExportError(f"load: {path}: array 'graph.edge_index' has shape {ei.shape}; expected (2, E)")
    _check_ids(path, "graph.edge_index", ei, n)
    if not np.array_equal(arrays["graph.in_degree"], np.bincount(ei[1], minlength=n)):
        raise ExportError(f"load: {path}: array 'graph.in_degree' disagrees with the in-degrees of 'graph.edge_index'")
    if "graph.labels" in arrays and _index_array(path, arrays, "graph.labels", 1).shape != (n,):
        raise ExportError(f"load: {path}: array 'graph.labels' has shape {arrays['graph.labels'].shape}; expected "
                          f"({n},)")
    if "graph.test_index" in arrays:
        _check_ids(path, "graph.test_index", _index_array(path, arrays, "graph.test_index", 1), n)
    if ARCHS[arch].graph is not None:
        _check_csr(path, arch, arrays, ei, n)


def _check_csr(path: Path, arch: str, arrays: dict, ei: np.ndarray, n: int) -> None:
    indptr = _index_array(path, arrays, "graph.indptr", 1)
    indices = _index_array(path, arrays, "graph.indices", 1)
    if indptr.shape != (n + 1,):
        raise ExportError(f"load: {path}: array 'graph.indptr' has shape {indptr.shape}; expected ({n + 1},)")
    if indptr[0] != 0 or indptr[-1] != indices.size:
        raise ExportError(f"load: {path}: array 'graph.indptr' runs from {indptr[0]} to {indptr[-1]}; a CSR runs "
                          f"from 0 to len('graph.indices') = {indices.size}")
    rows = np.diff(indptr)
    if (rows < 0).any():
        raise ExportError(f"load: {path}: array 'graph.indptr' is not non-decreasing (row {int(np.argmax(rows < 0))})")
    _check_ids(path, "graph.indices", indices, n)
    fmt = ARCHS[arch]
    want = fmt.graph(ei, n)
    if not np.array_equal(rows, np.diff(want[0])):
        raise ExportError(f"load: {path}: row lengths of 'graph.indptr' disagree with the in-degrees of "
                          f"'graph.edge_index' (the {fmt.display_name} graph)")
    if not np.array_equal(indices, want[1]):
        raise ExportError(f"load: {path}: array 'graph.indices' is not the {fmt.display_name} CSR of "
                          "'graph.edge_index'")
    slot = fmt.slot_array
    if slot in arrays and not np.array_equal(arrays[slot], want[2]):
        raise ExportError(f"load: {path}: array '{slot}' disagrees with the CSR of 'graph.edge_index'")


def _check_bitwidths(path: Path, arrays: dict) -> None:
    """Every bitwidth array (``*_bits``, ``*.bits``) holds integers in 1..the width of its codes' container."""
    for name, a in arrays.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf != "bits" and not leaf.endswith("_bits"):
            continue
        codes = arrays.get(name[: -len("bits")] + "codes")
        cap = 8 * codes.dtype.itemsize if codes is not None and codes.dtype.kind == "i" else MAX_CODE_BITS
        if a.dtype.kind not in "iu":
            raise ExportError(f"load: {path}: array '{name}' is {a.dtype.str}; bitwidths are integers")
        if a.size and (a.min() < 1 or a.max() > cap):
            raise ExportError(f"load: {path}: array '{name}' holds bitwidths in [{a.min()}, {a.max()}], outside "
                              f"the schema's 1..{cap}")


def _codes(path: Path, arrays: dict, name: str, shape: tuple) -> np.ndarray:
    """Array ``name``: signed-integer codes of ``shape`` (None: any length)."""
    a = arrays[name]
    if a.dtype.kind != "i" or a.ndim != len(shape) or any(w is not None and w != d for w, d in zip(shape, a.shape,
                                                                                                  strict=True)):
        raise ExportError(f"load: {path}: array '{name}' is {a.dtype.str} of shape {a.shape}; expected integer codes "
                          f"of shape {tuple('*' if w is None else w for w in shape)}")
    return a


def _check_within(path: Path, arrays: dict, name: str, codes: np.ndarray, bits, per_channel: bool = False) -> None:
    """Codes within their signed bitwidths (``|code| <= 2^(b-1) - 1``, :func:`quant.formats.fixed_point.code_limit`,
    as the
    exporter writes every tensor, unsigned post-ReLU ones included). ``bits``: an int (all codes), or the name of a
    per-row (per-column when ``per_channel``) bitwidth array."""
    if not codes.size:
        return
    if isinstance(bits, str):
        b, want = arrays[bits], codes.shape[1 if per_channel else 0]
        if b.shape != (want,):
            raise ExportError(f"load: {path}: array '{bits}' has shape {b.shape}; expected ({want},), one bitwidth "
                              f"per {'column' if per_channel else 'row'} of '{name}'")
        axis = 0 if per_channel else 1  # reduce over the other axis: a max and a min per bitwidth
        hi, lo, limit = codes.max(axis=axis), codes.min(axis=axis), code_limit(b)
    else:
        hi, lo, limit = codes.max(), codes.min(), code_limit(bits)
    if (hi > limit).any() or (lo < -limit).any():
        raise ExportError(f"load: {path}: array '{name}' holds codes outside their bitwidths")


def _is_transformer(manifest: dict) -> bool:
    model = manifest.get("model")
    return isinstance(model, dict) and model.get("arch") == "graph-transformer"


def _required(manifest: dict) -> list[str]:
    """The array names a complete export of the manifest's architecture holds (its reader says which)."""
    model = manifest.get("model")
    arch = model.get("arch") if isinstance(model, dict) else None
    names = reader(arch if isinstance(arch, str) and arch in ARCHS else "gcn").required_arrays(manifest)
    return names + readout_array_names(manifest)


def readout_array_names(manifest: dict) -> list[str]:
    """The arrays of a graph classifier's readout (none for node-level exports): the graphs of the batch, the head's
    weights, the pooled sums per readout and the MLP head's hidden values."""
    ro = manifest.get("readout")
    if not isinstance(ro, dict):
        return []
    names = ["graph.graph_ptr", "graph.graph_labels"]
    for i, lin in enumerate(ro["linears"]):
        p = f"readout.linear{i}."
        names += [p + "w_codes", p + "w_steps", *([p + "bias"] if lin["has_bias"] else [])]
    for r in range(ro["num_readouts"]):
        names += [f"readout.pooled{r}", f"readout.pool_unit{r}"]
    return names + (["readout.hidden"] if ro["head"] == "mlp" else [])
