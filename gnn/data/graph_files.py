"""Load a user's graph from a file or folder ("bring your own graph": ``--dataset <path>``).

Four layouts, each processed exactly as the built-in loader of `gnn.data.loaders` processes the same layout, so that
a registered dataset loaded by the path of its raw file(s) gives the same ``x``, ``edge_index``, ``y``, task,
``num_classes`` and split as by name with the same split seed:

- ``npz``: a ``.npz`` in the gnn-benchmark layout (Shchur et al. 2018): ``adj_data/adj_indices/adj_indptr/adj_shape``
  (CSR adjacency), features ``attr_data/attr_indices/attr_indptr/attr_shape`` (CSR) or ``attr_matrix`` (dense),
  ``labels`` (N,). Read by PyG's ``parse_npz`` as PyG's Amazon / Coauthor do: self loops removed, edges symmetrised
  and coalesced, features binarised (``x[x > 0] = 1``, whichever way they are stored). Node task; default split
  20 train / 30 validation nodes per class, seeded. Optional boolean ``train_mask/val_mask/test_mask`` arrays are
  kept for ``split="masks"``.
- ``pt``: a ``torch.save`` of a PyG ``Data`` (node task; its ``train_mask/val_mask/test_mask`` when present,
  otherwise 20/30 per class) or of a list / tuple of ``Data`` (graph task, 10 stratified folds), taken as stored
  (integer features become float32). A ``.pt`` is a pickle: loading one can run code, so load only files you trust.
- ``tudataset``: a folder with ``<NAME>_A.txt``, ``<NAME>_graph_indicator.txt``, ``<NAME>_graph_labels.txt`` and
  optional node / edge labels and attributes (or such a folder's parent holding it as ``raw/``). Read by PyG's
  ``TUDataset`` with ``use_node_attr=False`` after copying the files into the writable cache (never into the user's
  folder). Graph task, 10 stratified folds, seeded.
- ``planetoid``: a folder with the Planetoid files ``ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`` (or such a
  folder's parent holding them as ``raw/``), read by PyG's ``read_planetoid_data`` as PyG's ``Planetoid`` does. Node
  task; default split: the files' public split (``"masks"``: 20 per class, 500 validation, 1000 test); default
  features ``row-normalized``, Kipf & Welling's preprocessing that every Planetoid result uses (``--features raw``
  keeps them as stored). The ``ind.*`` files are pickles: load only files you trust.
- ``dgl``: a ``.bin`` written by ``dgl.save_graphs`` (DGL installed: ``make test-dgl``'s environment): one graph
  is a node task (``ndata`` ``feat`` / ``label`` / masks, as :mod:`gnn.data.dgl_graphs` names them; its masks when
  present, otherwise 20/30 per class), several a graph task with the labels of the file's label dict.
- ``mat``: a LINKX ``.mat``: Facebook100 (``A`` adjacency, ``local_info``; label = gender column minus one, -1 =
  unknown; features = one-hot of every other column) or genius-style (``edge_index``, ``node_feat``, ``label``),
  processed as PyG's ``LINKXDataset``. Node task; random 50/25/25 split of the labelled nodes, seeded.

Features stay as the layout's reader leaves them; the caller applies row normalisation (``info["default_features"]``
says which a layout implies: ``planetoid`` row-normalized, the others raw). Every failure on bad input is
a one-line `DataError` that names the path and what to do.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import warnings
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

from gnn.data.loaders import GraphData
from gnn.data.processed_cache import load_verified, remove_processed
from gnn.data.registry import DataError, cache_dir
from gnn.data.splits import Split, fraction_split, per_class_split, stratified_kfold
from gnn.files import atomic_write, sha256_file

FILE_FORMATS = ("npz", "pt", "tudataset", "planetoid", "mat", "dgl")  # what --dataset <path> accepts
SPLITS = ("per-class", "fraction", "masks")  # node-task split overrides (None: the layout's default)
TASKS = ("node", "graph")
NUM_FOLDS = 10
LAYOUTS = ("a .npz in the gnn-benchmark layout (adj_data/adj_indices/adj_indptr/adj_shape, attr_* or attr_matrix, "
           "labels); a .pt holding a PyG Data or a list of Data; a LINKX .mat (A and local_info, or edge_index, "
           "node_feat and label); a dgl.save_graphs .bin (with DGL installed); a TUDataset folder holding "
           "<NAME>_A.txt, <NAME>_graph_indicator.txt and <NAME>_graph_labels.txt; or a Planetoid folder holding "
           "ind.<name>.x, .tx, .allx, .y, .ty, .ally, .graph and .test.index")
_SUFFIXES = {".npz": "npz", ".pt": "pt", ".pth": "pt", ".mat": "mat", ".bin": "dgl"}
_MASKS = ("train_mask", "val_mask", "test_mask")
_ADJ_KEYS = ("adj_data", "adj_indices", "adj_indptr", "adj_shape")
_ATTR_KEYS = ("attr_data", "attr_indices", "attr_indptr", "attr_shape")
TU_CACHE = "graph-files"  # TUDataset folders are copied to cache_dir()/TU_CACHE/tu-<digest>/<NAME>/raw


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def detect_format(path: Path) -> str:
    """The layout of ``path``, one of `FILE_FORMATS`: by suffix for a file, ``"tudataset"`` for a folder holding
    ``<NAME>_A.txt`` (itself or in ``raw/``). Raises a `DataError` naming the supported layouts otherwise."""
    path = Path(path)
    if path.is_dir():
        if _tu_files_dir(path) is not None:
            return "tudataset"
        if _planetoid_files(path) is not None:
            return "planetoid"
        raise DataError(f"{path}: folder holds no <NAME>_A.txt nor ind.<name>.graph (nor in raw/), so it is neither a "
                        f"TUDataset nor a Planetoid folder; pass one of: {LAYOUTS}")
    if not path.is_file():
        raise DataError(f"{path}: no such file or folder; pass one of: {LAYOUTS}")
    fmt = _SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        hint = " (for a TUDataset pass the folder, not the file)" if path.name.endswith("_A.txt") else ""
        raise DataError(f"{path}: unsupported file type {path.suffix or '(no suffix)'!r}{hint}; pass one of: "
                        f"{LAYOUTS}")
    return fmt


def _file_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder`` (recursively), keyed by relative POSIX name, sorted by name."""
    try:
        files = sorted((p.relative_to(folder).as_posix(), p) for p in folder.rglob("*") if p.is_file())
        return {name: sha256_file(p) for name, p in files}
    except OSError as e:
        raise DataError(f"{folder}: cannot read the folder ({_one_line(e)}); check its permissions") from e


def _digest_of_hashes(hashes: dict[str, str]) -> str:
    lines = "".join(f"{digest}  {name}\n" for name, digest in sorted(hashes.items()))
    return hashlib.sha256(lines.encode()).hexdigest()


def source_digest(path: str | Path) -> str:
    """SHA-256 of a file; of a folder: SHA-256 of the UTF-8 text of one ``"<file sha256>  <relative POSIX name>\\n"``
    line per file under it (recursively), sorted by name (the ``sha256sum`` line format)."""
    path = Path(path)
    if path.is_dir():
        return _digest_of_hashes(_file_hashes(path))
    try:
        return sha256_file(path)
    except OSError as e:
        raise DataError(f"{path}: cannot read the file ({_one_line(e)}); check the path and its permissions") from e


def _plain_name(text: str) -> str:
    """A name safe in file names and logs: characters other than letters, digits, '.', '_', '-' become '_'."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return name or "graph"


def _file_name(path: Path) -> str:
    """The file's stem; for PyG's generic ``<name>/raw/data.mat`` (LINKX) the first folder above that is not ``raw``."""
    if path.stem.lower() == "data":
        folder = next((p for p in path.parents if p.name and p.name != "raw"), None)
        if folder is not None:
            return _plain_name(folder.name)
    return _plain_name(path.stem)


def _check_choice(value: str | None, valid: tuple[str, ...], what: str) -> None:
    if value is not None and value not in valid:
        raise DataError(f"unknown {what} {value!r}; valid: {', '.join(valid)} (or None to infer it from the file)")


def load_graph_file(path: str | Path, *, split_seed: int = 0, split: str | None = None,
                    task: str | None = None) -> GraphData:
    """Load the graph(s) at ``path`` (see the module docstring for the layouts) as a `GraphData`.

    Args:
        path: a ``.npz``, ``.pt`` (a pickle: load only files you trust) or ``.mat`` file, or a TUDataset folder.
        split_seed: seed of the random split (node tasks) or of the folds (graph tasks); unused by ``"masks"``,
            except that masks of shape (N, k) (k stored splits) take column ``split_seed``.
        split: node tasks only: None (the layout's default), ``"per-class"`` (20 train / 30 validation per class,
            the rest test), ``"fraction"`` (random 50% / 25% / 25% of the labelled nodes) or ``"masks"`` (the file's
            ``train_mask/val_mask/test_mask``). Graph tasks always use 10 stratified folds.
        task: None (inferred), ``"node"`` or ``"graph"``: settles a ``.pt`` that could be read either way (a
            one-element list is one graph for node classification unless ``task="graph"``; a ``Batch`` is one graph
            unless ``task="graph"``); a task the file cannot hold raises `DataError`.

    Returns a `GraphData` named after the file or TUDataset, with ``info["source"] = {"path", "format",
    "sha256"}`` (absolute path, one of `FILE_FORMATS`, `source_digest`), ``info["split_seed"]`` and, for node tasks,
    ``info["split"]``: the split used, one of `SPLITS` (passing it back as ``split`` reloads the same split).
    """
    _check_choice(split, SPLITS, "split")
    _check_choice(task, TASKS, "task")
    if isinstance(split_seed, bool) or not isinstance(split_seed, (int, np.integer)) or split_seed < 0:
        raise DataError(f"split_seed {split_seed!r} must be a non-negative integer")
    split_seed = int(split_seed)
    path = Path(path).expanduser().resolve()
    fmt = detect_format(path)
    if fmt == "tudataset":
        hashes = _file_hashes(path)
        digest = _digest_of_hashes(hashes)
        name, graphs = _read_tudataset(path, hashes, digest, task)
    elif fmt == "planetoid":
        digest = source_digest(path)
        name, graphs = _read_planetoid(path, task)
    else:
        digest = source_digest(path)
        name = _file_name(path)
        graphs = {"npz": _read_npz, "pt": _read_pt, "mat": _read_mat, "dgl": _read_dgl}[fmt](path, task)
    if isinstance(graphs, Data):
        default = "fraction" if fmt == "mat" else ("masks" if fmt in ("pt", "planetoid", "dgl") and _has_masks(graphs)
                                                   else "per-class")
        out = _node_graph(path, name, graphs, split or default, split_seed)
    else:
        out = _graph_graphs(path, name, graphs, split, split_seed)
    out.info["source"] = {"path": str(path), "format": fmt, "sha256": digest}
    out.info["default_features"] = "row-normalized" if fmt == "planetoid" else "raw"
    return out


# ---------------------------------------------------------------------------------------------- node tasks


def _has_masks(data: Data) -> bool:
    return all(isinstance(getattr(data, m, None), Tensor) for m in _MASKS)


def _check_node_data(path: Path, data: Data) -> Data:
    """Check shapes and types of a node-task graph; integer features become float32, indices int64."""
    x, edge_index, y = (getattr(data, k, None) for k in ("x", "edge_index", "y"))
    for key, value in (("x", x), ("edge_index", edge_index), ("y", y)):
        if not isinstance(value, Tensor):
            raise DataError(f"{path}: the graph has no tensor {key} (node features x (N, F), edge_index (2, E), "
                            f"labels y (N,)); add it and save again")
    if x.dim() != 2:
        raise DataError(f"{path}: x has shape {tuple(x.shape)}; node features must be (num_nodes, num_features)")
    n = x.size(0)
    if y.dim() == 2 and y.size(1) == 1:
        y = y.view(-1)
    if y.dim() != 1 or y.numel() != n or y.is_floating_point() or y.dtype == torch.bool:
        raise DataError(f"{path}: labels have shape {tuple(y.shape)} and dtype {y.dtype}; need integer class "
                        f"labels of shape ({n},) (-1 = unknown), one per node")
    if not bool((y >= 0).any()):
        raise DataError(f"{path}: no node has a label (all labels < 0); label the nodes (-1 = unknown)")
    bad_edges = (edge_index.dim() != 2 or edge_index.size(0) != 2 or edge_index.is_floating_point()
                 or (edge_index.numel() > 0 and not (0 <= int(edge_index.min()) and int(edge_index.max()) < n)))
    if bad_edges:
        raise DataError(f"{path}: edge_index of shape {tuple(edge_index.shape)} is not (2, E) integer node ids "
                        f"in [0, {n}) for the {n} nodes of x")
    data.x = x if x.is_floating_point() else x.float()
    data.edge_index, data.y = edge_index.long(), y.long()
    return data


def _mask_split(path: Path, data: Data, split_seed: int) -> Split:
    n = data.num_nodes
    masks = [getattr(data, m, None) for m in _MASKS]
    if not all(isinstance(m, Tensor) for m in masks):
        raise DataError(f"{path}: split 'masks' needs boolean {', '.join(_MASKS)} in the file; add them or use "
                        f"split 'per-class' or 'fraction'")
    if any(m.dtype != torch.bool or m.dim() not in (1, 2) or m.size(0) != n for m in masks) or \
            len({m.shape for m in masks}) != 1:
        raise DataError(f"{path}: {', '.join(_MASKS)} must be boolean tensors of one shape ({n},) or ({n}, k)")
    if masks[0].dim() == 2:
        k = masks[0].size(1)
        if split_seed >= k:
            raise DataError(f"{path}: the masks hold {k} splits (columns); pass a split seed in 0..{k - 1}")
        masks = [m[:, split_seed] for m in masks]
    try:
        return Split(*(m.nonzero(as_tuple=False).view(-1) for m in masks))
    except ValueError as e:
        raise DataError(f"{path}: {_one_line(e)}; make the masks disjoint") from e


def _node_graph(path: Path, name: str, data: Data, split: str, split_seed: int) -> GraphData:
    """GraphData of a node task with the split ``split`` (one of `SPLITS`)."""
    data = _check_node_data(path, data)
    if split == "masks":
        s = _mask_split(path, data, split_seed)
    elif split == "fraction":
        s = fraction_split(data.y, 0.5, 0.25, seed=split_seed)
    else:
        try:
            s = per_class_split(data.y, 20, 30, seed=split_seed)
        except ValueError as e:
            raise DataError(f"{path}: {_one_line(e)}; use split 'fraction' (random 50/25/25) or 'masks'") from e
    num_classes = int(data.y.max()) + 1  # label -1 = unknown, never in a split
    return GraphData(name, "node", data, None, [s], data.x.size(1), num_classes,
                     info={"split": split, "split_seed": split_seed})


# --------------------------------------------------------------------------------------------- graph tasks


def _graph_graphs(path: Path, name: str, graphs: Sequence, split: str | None, split_seed: int) -> GraphData:
    """GraphData of a graph task (``graphs``: a PyG dataset or list of Data) with 10 stratified folds."""
    if split is not None:
        raise DataError(f"{path}: holds {len(graphs)} graphs (graph classification), which use "
                        f"{NUM_FOLDS} stratified folds; split {split!r} applies to node tasks only (pass none)")
    if len(graphs) < NUM_FOLDS:
        raise DataError(f"{path}: holds {len(graphs)} graphs; {NUM_FOLDS}-fold cross-validation needs at least "
                        f"{NUM_FOLDS}")
    ys = [g.y for g in graphs]
    if any(not isinstance(t, Tensor) or t.numel() != 1 or t.is_floating_point() for t in ys):
        raise DataError(f"{path}: every graph needs one integer class label y (graph_labels); regression targets "
                        f"and missing labels are not supported")
    y = torch.cat([t.view(-1) for t in ys]).long()  # (num_graphs,)
    if int(y.min()) < 0:
        raise DataError(f"{path}: graph labels must be >= 0 (got {int(y.min())})")
    folds = stratified_kfold(y, NUM_FOLDS, seed=split_seed)
    num_features = getattr(graphs, "num_features", None)
    if num_features is None:
        first = graphs[0].x
        num_features = 0 if first is None else first.size(-1)
    num_classes = getattr(graphs, "num_classes", None) or int(y.max()) + 1
    return GraphData(name, "graph", None, graphs, folds, num_features, num_classes, info={"split_seed": split_seed})


def _check_graph_list(path: Path, graphs: list[Data]) -> list[Data]:
    """Check a list of graphs from a .pt: every one needs edge_index (2, e) in range and the same feature width."""
    widths = set()
    for i, g in enumerate(graphs):
        x, ei = g.x, g.edge_index
        n = g.num_nodes
        if not isinstance(ei, Tensor) or ei.dim() != 2 or ei.size(0) != 2 or ei.is_floating_point() or \
                (ei.numel() > 0 and not (n is not None and 0 <= int(ei.min()) and int(ei.max()) < n)):
            raise DataError(f"{path}: graph {i} has no edge_index (2, E) of integer node ids in [0, num_nodes)")
        if x is not None and (not isinstance(x, Tensor) or x.dim() != 2):
            raise DataError(f"{path}: graph {i} has node features x that are not a (num_nodes, F) tensor")
        widths.add(None if x is None else x.size(1))
        if x is not None and not x.is_floating_point():
            g.x = x.float()
        g.edge_index = ei.long()
    if len(widths) > 1:
        raise DataError(f"{path}: graphs have different node feature widths {sorted(map(str, widths))}; give every "
                        f"graph x of the same width (or none)")
    return graphs


# ------------------------------------------------------------------------------------------------- readers


def _node_only(path: Path, fmt: str, task: str | None) -> None:
    if task == "graph":
        raise DataError(f"{path}: a {fmt} holds one graph for node classification; task must be 'node' (or None)")


def _read_npz(path: Path, task: str | None) -> Data:
    """A gnn-benchmark .npz through PyG's ``parse_npz`` (what PyG's Amazon / Coauthor use)."""
    from torch_geometric.io.npz import parse_npz

    _node_only(path, ".npz", task)
    try:
        f = np.load(path)  # allow_pickle stays False: object arrays are refused
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(f"{path}: not a readable .npz ({_one_line(e)}); save it with numpy.savez") from e
    if not isinstance(f, np.lib.npyio.NpzFile):
        raise DataError(f"{path}: holds a single array, not a .npz archive of named arrays; save it with numpy.savez")
    try:
        with f:
            arrays = _npz_arrays(path, f, set(f.files))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise DataError(f"{path}: not a readable .npz ({_one_line(e)}); save it with numpy.savez") from e
    try:
        data = parse_npz(arrays, to_undirected=True)
    except Exception as e:  # inconsistent CSR arrays of a user file
        raise DataError(f"{path}: inconsistent gnn-benchmark arrays ({_one_line(e)}); check adj_* / attr_*") from e
    for m in _MASKS:
        if m in arrays:
            data[m] = torch.from_numpy(np.asarray(arrays[m]))
    return data


def _npz_arrays(path: Path, f, keys: set[str]) -> dict[str, np.ndarray]:
    """The arrays ``parse_npz`` reads, a dense ``attr_matrix`` turned into the CSR ``attr_*`` triple."""
    missing = [k for k in _ADJ_KEYS if k not in keys]
    if "labels" not in keys:
        what = " (multi-label labels_* are not supported)" if "labels_data" in keys else ""
        missing.append("labels" + what)
    has_attr = all(k in keys for k in _ATTR_KEYS)
    if not has_attr and "attr_matrix" not in keys:
        missing.append("attr_data/attr_indices/attr_indptr/attr_shape or attr_matrix")
    if missing:
        raise DataError(f"{path}: missing {', '.join(missing)} (has {', '.join(sorted(keys)) or 'nothing'}); a .npz "
                        f"must be in the gnn-benchmark layout: adj_data/adj_indices/adj_indptr/adj_shape, attr_* or "
                        f"attr_matrix, labels")
    arrays = {k: f[k] for k in (*_ADJ_KEYS, "labels", *(m for m in _MASKS if m in keys))}
    if has_attr:
        arrays.update({k: f[k] for k in _ATTR_KEYS})
    else:
        import scipy.sparse as sp

        dense = np.asarray(f["attr_matrix"])
        if dense.ndim != 2:
            raise DataError(f"{path}: attr_matrix has shape {dense.shape}; need (num_nodes, num_features)")
        csr = sp.csr_matrix(dense)
        arrays.update(attr_data=csr.data, attr_indices=csr.indices, attr_indptr=csr.indptr,
                      attr_shape=np.array(csr.shape))
    n = int(np.asarray(arrays["attr_shape"]).reshape(-1)[0])
    adj_shape = tuple(int(v) for v in np.asarray(arrays["adj_shape"]).reshape(-1))
    if adj_shape != (n, n) or np.asarray(arrays["labels"]).shape != (n,):
        raise DataError(f"{path}: adj_shape {adj_shape}, labels of shape {np.asarray(arrays['labels']).shape} and "
                        f"{n} feature rows disagree; need adj_shape ({n}, {n}) and labels ({n},)")
    return arrays


def _read_mat(path: Path, task: str | None) -> Data:
    """A LINKX .mat, processed as PyG's ``LINKXDataset`` processes Facebook100 (or genius)."""
    from scipy.io import loadmat

    _node_only(path, ".mat", task)
    try:
        mat = loadmat(path)
    except NotImplementedError as e:  # MATLAB v7.3 is HDF5
        raise DataError(f"{path}: MATLAB v7.3 (HDF5) .mat files are not supported; save it with -v7 or "
                        f"scipy.io.savemat") from e
    except Exception as e:  # scipy raises assorted errors for a garbled file
        raise DataError(f"{path}: not a readable .mat ({_one_line(e)}); save it with scipy.io.savemat") from e
    try:
        if "A" in mat and "local_info" in mat:
            return _facebook(path, mat)
        if all(k in mat for k in ("edge_index", "node_feat", "label")):
            return Data(x=torch.from_numpy(mat["node_feat"]).to(torch.float),
                        edge_index=torch.from_numpy(mat["edge_index"]).to(torch.long),
                        y=torch.from_numpy(mat["label"]).squeeze().to(torch.long))
    except DataError:
        raise
    except Exception as e:
        raise DataError(f"{path}: unexpected arrays in the .mat ({_one_line(e)}); see the LINKX layout") from e
    keys = sorted(k for k in mat if not k.startswith("__"))
    raise DataError(f"{path}: has {', '.join(keys) or 'no arrays'}; a LINKX .mat needs A (sparse adjacency) and "
                    f"local_info (Facebook100), or edge_index, node_feat and label")


def _facebook(path: Path, mat: dict) -> Data:
    """``LINKXDataset._process_facebook`` (PyG 2.x) without its fixed list of names."""
    import scipy.sparse as sp
    from torch_geometric.utils import one_hot

    a, info = mat["A"], np.asarray(mat["local_info"])
    a = a if sp.issparse(a) else sp.csr_matrix(np.asarray(a))
    if info.ndim != 2 or info.shape[1] < 2 or a.shape != (info.shape[0],) * 2:
        raise DataError(f"{path}: A has shape {a.shape} and local_info {info.shape}; need A (N, N) and "
                        f"local_info (N, C >= 2) with the gender in column 1")
    coo = a.tocsr().tocoo()
    edge_index = torch.stack([torch.from_numpy(coo.row).to(torch.long), torch.from_numpy(coo.col).to(torch.long)])
    metadata = torch.from_numpy(info.astype("int64"))
    y = metadata[:, 1] - 1  # gender label, -1 means unlabeled
    x = torch.cat([metadata[:, :1], metadata[:, 2:]], dim=-1)
    xs = [one_hot(x[:, i].unique(return_inverse=True)[1]) for i in range(x.size(1))]
    return Data(x=torch.cat(xs, dim=-1), edge_index=edge_index, y=y)


def _read_pt(path: Path, task: str | None) -> Data | list[Data]:
    """A ``torch.save`` of a PyG Data (one graph) or a list / tuple of Data (graphs). A pickle: trusted files only."""
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)  # the user's own file, see the docstring
    except Exception as e:  # unpickling a garbled or foreign file raises anything
        raise DataError(f"{path}: not a readable torch file ({_one_line(e)}); save a PyG Data or a list of Data "
                        f"with torch.save") from e
    from torch_geometric.data import Dataset

    if isinstance(obj, Dataset):
        obj = [obj[i] for i in range(len(obj))]
    if isinstance(obj, Data):
        if task != "graph":
            return obj
        if isinstance(obj, Batch) and obj.num_graphs > 1:
            return _check_graph_list(path, obj.to_data_list())
        raise DataError(f"{path}: holds one Data (one graph); for graph classification save a list of Data")
    if isinstance(obj, (list, tuple)) and obj and all(isinstance(g, Data) for g in obj):
        if task == "node" or (task is None and len(obj) == 1):
            if len(obj) != 1:
                raise DataError(f"{path}: holds {len(obj)} graphs; node classification needs one graph (a Data)")
            return obj[0]
        return _check_graph_list(path, list(obj))
    raise DataError(f"{path}: holds a {type(obj).__name__}; a .pt must hold a torch_geometric.data.Data (node task) "
                    f"or a non-empty list / tuple of Data (graph task)")


def _tu_files_dir(folder: Path) -> Path | None:
    """The folder holding ``<NAME>_A.txt``: ``folder`` itself or its ``raw/``; None when neither does."""
    for d in (folder, folder / "raw"):
        if d.is_dir() and any(d.glob("*_A.txt")):
            return d
    return None


def _read_tudataset(folder: Path, hashes: dict[str, str], digest: str, task: str | None) -> tuple[str, object]:
    """PyG's ``TUDataset`` (``use_node_attr=False``) on a copy of the folder's files in the writable cache."""
    from torch_geometric.datasets import TUDataset

    if task == "node":
        raise DataError(f"{folder}: a TUDataset folder holds graphs for graph classification; task must be 'graph' "
                        f"(or None)")
    files_dir = _tu_files_dir(folder)
    names = sorted(p.name[: -len("_A.txt")] for p in files_dir.glob("*_A.txt"))
    if len(names) != 1:
        raise DataError(f"{files_dir}: holds several TUDatasets ({', '.join(n + '_A.txt' for n in names)}); "
                        f"put each in its own folder")
    name = names[0]
    for part in ("graph_indicator", "graph_labels"):
        if not (files_dir / f"{name}_{part}.txt").is_file():
            raise DataError(f"{files_dir}: missing {name}_{part}.txt; a TUDataset folder needs {name}_A.txt, "
                            f"{name}_graph_indicator.txt and {name}_graph_labels.txt")
    root = cache_dir() / TU_CACHE / f"tu-{digest[:20]}"
    prefix = "" if files_dir == folder else files_dir.relative_to(folder).as_posix() + "/"
    wanted = {n[len(prefix):]: d for n, d in hashes.items()
              if n.startswith(prefix) and "/" not in n[len(prefix):] and n[len(prefix):].startswith(name + "_")}
    processed = root / name / "processed"
    if _sync_raw(files_dir, wanted, root / name / "raw"):
        remove_processed(processed)  # built from other raw files: rebuild
    try:
        ds = load_verified(processed, lambda: TUDataset(str(root), name, use_node_attr=False))
    except Exception as e:  # PyG's reader fails in many ways on a garbled file
        raise DataError(f"{files_dir}: PyG could not read the TUDataset files ({_one_line(e)}); check that they "
                        f"follow the TU format (https://chrsmrrs.github.io/datasets/docs/format/)") from e
    if len(ds) == 0 or ds._data.y is None or ds._data.y.size(0) != len(ds):
        raise DataError(f"{files_dir}: {name}_graph_labels.txt must hold one integer label per graph")
    return _plain_name(name), ds


def _read_dgl(path: Path, task: str | None) -> Data | list[Data]:
    """A ``dgl.save_graphs`` file (:mod:`gnn.data.dgl_graphs`): one graph is a node task, several a graph task."""
    from gnn.data.dgl_graphs import DGL_ENV, read_dgl_file

    try:
        graphs = read_dgl_file(path, task)
    except ImportError:
        raise DataError(f"{path}: {DGL_ENV}") from None
    except Exception as e:  # DGL's reader fails in many ways on a garbled file
        raise DataError(f"{path}: could not read it as a dgl.save_graphs file ({_one_line(e)})") from e
    if isinstance(graphs, Data):
        if task == "graph":
            raise DataError(f"{path}: holds one graph; graph classification needs a list of graphs")
        return graphs
    return _check_graph_list(path, graphs)


PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")


def _planetoid_files(folder: Path) -> tuple[Path, str] | None:
    """(the folder holding ``ind.<name>.graph``: ``folder`` or its ``raw/``, ``<name>``); None when neither does."""
    for d in (folder, folder / "raw"):
        graphs = sorted(d.glob("ind.*.graph")) if d.is_dir() else []
        if graphs:
            return d, graphs[0].name[len("ind."):-len(".graph")]
    return None


def _read_planetoid(folder: Path, task: str | None) -> tuple[str, Data]:
    """PyG's ``read_planetoid_data`` on the folder's ``ind.<name>.*`` files (the public split's masks included)."""
    from torch_geometric.io import read_planetoid_data

    _node_only(folder, "Planetoid folder", task)
    files_dir, name = _planetoid_files(folder)
    missing = [p for p in PLANETOID_PARTS if not (files_dir / f"ind.{name}.{p}").is_file()]
    if missing:
        raise DataError(f"{files_dir}: missing {', '.join(f'ind.{name}.{p}' for p in missing)}; a Planetoid folder "
                        f"needs all of {', '.join(PLANETOID_PARTS)}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # old scipy pickles
            data = read_planetoid_data(str(files_dir), name)
    except Exception as e:  # a garbled pickle fails in many ways
        raise DataError(f"{files_dir}: PyG could not read the Planetoid files ({_one_line(e)}); check that they are "
                        "the ind.<name>.* files of Yang et al. 2016") from e
    return _plain_name(name), data


def _sync_raw(src_dir: Path, wanted: dict[str, str], raw: Path) -> bool:
    """Make ``raw`` hold exactly the files ``wanted`` (name -> SHA-256) copied from ``src_dir``; return True when a
    file already there differed or had to be removed (so that a processed folder built from it is stale)."""
    raw.mkdir(parents=True, exist_ok=True)
    stale = False
    for p in raw.iterdir():
        if p.name not in wanted and not p.name.endswith(".tmp"):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            stale = True
    for fname, digest in wanted.items():
        dest = raw / fname
        if dest.is_file() and not dest.is_symlink() and sha256_file(dest) == digest:
            continue
        stale = stale or dest.exists() or dest.is_symlink()
        with open(src_dir / fname, "rb") as src:
            atomic_write(dest, lambda f, src=src: shutil.copyfileobj(src, f))
        if sha256_file(dest) != digest:
            raise DataError(f"{src_dir / fname}: changed while it was being copied; load it again")
    return stale
