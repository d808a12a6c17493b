"""One loader per dataset family, built on PyG's dataset classes, returning one `GraphData` interface.

Every dataset comes back as a `GraphData`: node-level datasets hold one PyG `Data` and one `Split`
(the public split, or a seeded random one); graph-level datasets hold a PyG dataset of graphs and ten
stratified folds. Synthetic graphs (gnn/data/synthetic.py) use the same interface.
"""

from __future__ import annotations

import pickle
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.utils import remove_self_loops, to_undirected

from gnn.data.processed_cache import load_verified
from gnn.data.registry import FEATURE_PREPROCESSING, DataError, DatasetEntry, ensure_raw, get_entry
from gnn.data.splits import Split, fraction_split, mask_to_index, per_class_split, stratified_kfold


@dataclass(frozen=True)
class GraphData:
    """A loaded dataset.

    Attributes:
        name: registry key, e.g. ``"cora"``.
        task: ``"node"`` (node classification), ``"graph"`` (graph classification) or ``"topology"``
            (structure and labels only, no node features: usable for degree statistics and accelerator
            workloads, not for training).
        data: the whole graph (node and topology tasks); ``None`` for graph tasks.
        graphs: the list-like PyG dataset of graphs (graph tasks); ``None`` otherwise.
        splits: one `Split` for node tasks (public or seeded), ``num_folds`` for graph tasks.
        num_features: input feature width (0 when features are absent).
        num_classes: number of target classes.
    """

    name: str
    task: str
    data: Data | None
    graphs: object | None
    splits: list[Split]
    num_features: int
    num_classes: int
    info: dict = field(default_factory=dict)


def _row_normalize(x: Tensor) -> Tensor:
    """Kipf & Welling's feature preprocessing: each row sums to one (rows of zeros stay zero). The registry's
    ``features = "row-normalized"`` asks for it (the Planetoid datasets)."""
    s = x.sum(dim=-1, keepdim=True)
    return x / s.clamp(min=1e-12)


def _processed_dir(entry: DatasetEntry, family_root: Path) -> Path:
    """Where PyG keeps the processed files of ``entry``: beside its raw folder (e.g. ``Planetoid/Cora/processed``)."""
    return family_root.parent / Path(entry.raw_dir).parent / "processed"


def _pyg(entry: DatasetEntry, family_root: Path, cls, *args, **kwargs):
    """``cls(family_root, *args, **kwargs)`` on a processed cache verified against its SHA-256 record."""
    return load_verified(_processed_dir(entry, family_root), lambda: cls(str(family_root), *args, **kwargs))


def _planetoid(entry: DatasetEntry, root: Path) -> GraphData:
    from torch_geometric.datasets import Planetoid

    ds = _pyg(entry, root, Planetoid, entry.name, split="public")
    data = ds[0]
    split = Split(mask_to_index(data.train_mask), mask_to_index(data.val_mask), mask_to_index(data.test_mask))
    return GraphData(entry.key, "node", data, None, [split], ds.num_features, ds.num_classes)


def _shchur(entry: DatasetEntry, root: Path, split_seed: int) -> GraphData:
    from torch_geometric.datasets import Amazon, Coauthor

    cls = Amazon if entry.family == "Amazon" else Coauthor
    ds = _pyg(entry, root, cls, entry.name)
    data = ds[0]
    split = per_class_split(data.y, 20, 30, seed=split_seed)
    return GraphData(entry.key, "node", data, None, [split], ds.num_features, ds.num_classes)


def _tudataset(entry: DatasetEntry, root: Path, split_seed: int) -> GraphData:
    from torch_geometric.datasets import TUDataset

    ds = _pyg(entry, root, TUDataset, entry.name, use_node_attr=False)
    y = torch.cat([g.y for g in ds])  # (num_graphs,)
    folds = stratified_kfold(y, 10, seed=split_seed)
    return GraphData(entry.key, "graph", None, ds, folds, ds.num_features, ds.num_classes)


def _linkx(entry: DatasetEntry, root: Path, split_seed: int) -> GraphData:
    from torch_geometric.datasets import LINKXDataset

    ds = _pyg(entry, root, LINKXDataset, entry.name)
    data = ds[0]
    split = fraction_split(data.y, 0.5, 0.25, seed=split_seed)
    num_classes = int(data.y.max()) + 1  # label -1 = unknown, never in a split
    return GraphData(entry.key, "node", data, None, [split], ds.num_features, num_classes)


def _pubmed_topology(entry: DatasetEntry, root: Path) -> GraphData:
    """PubMed's graph and labels from the Planetoid files without ``ind.pubmed.allx`` (absent in the mirror)."""
    raw = root / "raw"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # old scipy pickles
        objs = {}
        for part in ("ally", "ty", "graph"):
            with open(raw / f"ind.pubmed.{part}", "rb") as f:
                objs[part] = pickle.load(f, encoding="latin1")  # noqa: S301 (checksum-verified raw file)
    test_index = torch.from_numpy(np.loadtxt(raw / "ind.pubmed.test.index", dtype=np.int64))
    y = torch.from_numpy(np.vstack([objs["ally"], objs["ty"]]).argmax(1)).long()  # (N,)
    sorted_test = test_index.sort()[0]
    y[test_index] = y[sorted_test]  # Planetoid stores test rows in sorted-index order
    graph = objs["graph"]
    rows = np.repeat(np.fromiter(graph.keys(), dtype=np.int64), [len(v) for v in graph.values()])
    cols = np.fromiter((c for v in graph.values() for c in v), dtype=np.int64)
    edge_index = torch.from_numpy(np.stack([rows, cols]))
    edge_index, _ = remove_self_loops(edge_index)
    num_nodes = y.numel()
    edge_index = to_undirected(edge_index, num_nodes=num_nodes)
    data = Data(edge_index=edge_index, y=y, num_nodes=num_nodes)
    return GraphData(entry.key, "topology", data, None, [], 0, 3,
                     info={"note": "features absent (ind.pubmed.allx missing): topology work only"})


def is_graph_path(dataset: str | Path) -> bool:
    """Whether ``--dataset`` names a file or folder rather than a registry name: a ``Path``, text with a folder part
    or a graph-file suffix, or an existing path that is not a registry name (a folder ``cora/`` in the working
    directory does not shadow the dataset ``cora``)."""
    if isinstance(dataset, Path):
        return True
    text = str(dataset)
    if "/" in text or "\\" in text or Path(text).suffix in (".npz", ".mat", ".pt", ".pth"):
        return True
    if not Path(text).exists():
        return False
    from gnn.data.registry import dataset_names

    return text.lower() not in dataset_names()


def load_dataset(name: str | Path, data_root: str | Path | None = None, split_seed: int = 0,
                 features: str | None = None, split: str | None = None, task: str | None = None,
                 expect_sha256: str | None = None) -> GraphData:
    """Load a dataset by registry name or from a graph file / folder of the user's.

    Args:
        name: a dataset key, e.g. ``"cora"``, ``"coauthor-cs"``, ``"mutag"`` (the built-in registry, or a user
            registry named by ``GNN_REGISTRY``), or a path: a gnn-benchmark ``.npz``, a TUDataset folder, a
            Facebook100 ``.mat``, a ``.pt`` of PyG ``Data`` (:mod:`gnn.data.graph_files`).
        data_root: explicit data root (``--data-root``); see the registry module for the resolution order.
        split_seed: seed of random splits and folds (the public Planetoid split ignores it).
        features: ``"raw"`` or ``"row-normalized"`` in place of the registry's preprocessing (None: the registry's;
            a file's: what its layout implies, row-normalized for Planetoid folders, raw otherwise).
        split, task: a file's split (``"per-class"``, ``"fraction"``, ``"masks"``) and task (``"node"``,
            ``"graph"``) when it should not be inferred; only for paths.
        expect_sha256: the digest a run recorded for its file: a file that changed since is refused.
    """
    if is_graph_path(name):
        from gnn.data.graph_files import load_graph_file, source_digest

        if expect_sha256 is not None and Path(name).exists():  # before reading it (a .pt is a pickle)
            digest = source_digest(name)
            if digest != expect_sha256:
                raise DataError(f"{name} changed since the run was trained (sha256 {digest}, the run recorded "
                                f"{expect_sha256}); use the file the run was trained on")
        graph = load_graph_file(name, split_seed=split_seed, split=split, task=task)
        default = graph.info.pop("default_features")  # what the layout implies (Planetoid: row-normalized)
        features = default if features is None else features
        graph.info.update({k: v for k, v in (("split", split), ("task", task)) if v is not None})
    else:
        if split is not None or task is not None:
            raise DataError(f"--split / --task apply to a dataset given by path; {name!r} is a registry name whose "
                            "split and task the registry fixes")
        entry = get_entry(str(name))
        features = entry.features if features is None else features
        graph = None
    if features not in FEATURE_PREPROCESSING:
        raise ValueError(f"load_dataset: unknown features {features!r}; valid: {', '.join(FEATURE_PREPROCESSING)}")
    if graph is None:
        graph = _load_raw_features(entry, ensure_raw(entry.key, data_root), split_seed)
    if features == "row-normalized":
        graph.data.x = _row_normalize(graph.data.x)
    graph.info.update(features=features, split_seed=split_seed)  # what a run must record to reload the same data
    return graph


def load_graph(data_or_path, *, name: str = "graph", **kwargs) -> GraphData:
    """A user's graph as a `GraphData`: a path (see :func:`load_dataset`), a PyG ``Data`` (node task) or a list of
    them (graph task). An object is saved once to the writable cache (``<cache>/user/<name>-<sha256[:16]>.pt``) and
    loaded from there, so a run trained on it records a file and exports with ``python -m quant.export`` like any
    other; ``kwargs`` go to :func:`load_dataset` (split_seed, features, split, task)."""
    if isinstance(data_or_path, (str, Path)):
        return load_dataset(data_or_path, **kwargs)
    if not (isinstance(data_or_path, Data) or (isinstance(data_or_path, (list, tuple)) and data_or_path
                                               and all(isinstance(d, Data) for d in data_or_path))):
        raise DataError(f"load_graph: got {type(data_or_path).__name__}; give a path, a PyG Data or a list of them")
    import io

    from gnn.data.registry import cache_dir
    from gnn.files import sha256_bytes, write_bytes

    buf = io.BytesIO()
    torch.save(list(data_or_path) if isinstance(data_or_path, tuple) else data_or_path, buf)
    path = cache_dir() / "user" / f"{name}-{sha256_bytes(buf.getvalue())[:16]}.pt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(path, buf.getvalue())  # atomically: a concurrent reader never sees half a file
    return load_dataset(path, **kwargs)


def load_recorded(config: dict, data_root: str | Path | None = None) -> GraphData:
    """The dataset a run's ``config.json`` (:func:`gnn.experiment.run_config`) was trained on, with the same features
    and split; a user file is reloaded from its recorded path and refused if its SHA-256 changed."""
    data = config.get("data", {})
    source = data.get("source")
    if source is not None:
        return load_dataset(source["path"], split_seed=data.get("split_seed", 0), features=data.get("features"),
                            split=data.get("split"), task=data.get("task"), expect_sha256=source["sha256"])
    return load_dataset(config["dataset"], data_root=data_root, split_seed=data.get("split_seed", 0),
                        features=data.get("features"))


def _load_raw_features(entry: DatasetEntry, family_root: Path, split_seed: int) -> GraphData:
    if entry.loader == "planetoid":
        return _planetoid(entry, family_root)
    if entry.loader in ("amazon", "coauthor"):
        return _shchur(entry, family_root, split_seed)
    if entry.loader == "tudataset":
        return _tudataset(entry, family_root, split_seed)
    if entry.loader == "linkx":
        return _linkx(entry, family_root, split_seed)
    if entry.loader == "pubmed_topology":
        return _pubmed_topology(entry, family_root)
    if entry.loader == "file":  # a user registry's graph file (gnn.data.graph_files), checksum-verified
        from gnn.data.graph_files import load_graph_file

        (fname,) = entry.files
        graph = load_graph_file(family_root.parent / entry.raw_dir / fname, split_seed=split_seed)
        return replace(graph, name=entry.key)
    raise DataError(f"registry: dataset {entry.key!r} names unknown loader {entry.loader!r}")
