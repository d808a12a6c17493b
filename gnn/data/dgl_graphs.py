"""DGL graphs in and out: a homogeneous ``dgl.DGLGraph`` <-> the suite's graph (a PyG ``Data``), and the graph files
``dgl.save_graphs`` writes.

DGL is optional and lives in its own environment (``make test-dgl`` builds ``.venv-dgl``: DGL 2.1's wheels need
torch 2.2.1); every function here imports it on first use and says so when it is missing.

Names. DGL keeps features in ``g.ndata`` / ``g.edata`` under names of the user's choosing; DGL's own datasets use
``feat``, ``label`` and ``train_mask`` / ``val_mask`` / ``test_mask``. :func:`from_dgl` takes the first present of
:data:`FEATURE_KEYS` as ``x``, of :data:`LABEL_KEYS` as ``y``, the masks by their names, the first of
:data:`WEIGHT_KEYS` in ``edata`` as ``edge_weight`` and keeps every other tensor under its own name;
:func:`to_dgl` writes ``feat``, ``label``, the masks and ``weight`` (DGL's conventions), so a round trip keeps every
field. Edges keep their order (edge ``e`` is ``(src[e], dst[e])`` on both sides, as PyG's ``edge_index[:, e]``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor
from torch_geometric.data import Data

FEATURE_KEYS = ("feat", "x", "features", "h")
LABEL_KEYS = ("label", "y", "labels")
WEIGHT_KEYS = ("weight", "w", "edge_weight")
MASKS = ("train_mask", "val_mask", "test_mask")
GRAPH_LABEL_KEYS = ("labels", "label", "glabel", "y")  # the label dict of dgl.save_graphs for graph tasks
DGL_ENV = ("DGL is not installed in this environment; `make test-dgl` builds .venv-dgl with DGL 2.1 (torch 2.2.1), "
           "or convert the graph there with gnn.data.dgl_graphs.from_dgl and torch.save it as a .pt")


def require_dgl():
    """The ``dgl`` module, or ImportError naming how to get it."""
    try:
        import dgl
    except ImportError as e:
        raise ImportError(DGL_ENV) from e
    return dgl


def _first(store, keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in store), None)


def from_dgl(g) -> Data:
    """A homogeneous ``DGLGraph`` as a PyG ``Data``: ``edge_index`` (2, E) int64 in DGL's edge order, ``num_nodes``,
    ``x``, ``y``, masks and ``edge_weight`` by the names above, every other node / edge tensor under its own name.
    Raises ValueError for a heterogeneous graph (one node and one edge type only)."""
    if not g.is_homogeneous:
        raise ValueError(f"from_dgl: the graph has node types {g.ntypes} and edge types {g.etypes}; the suite reads "
                         "homogeneous graphs (dgl.to_homogeneous first)")
    src, dst = g.edges(order="eid")
    data = Data(edge_index=torch.stack([src, dst]).long(), num_nodes=g.num_nodes())
    nkeys, ekeys = dict(g.ndata), dict(g.edata)
    renames = {_first(nkeys, FEATURE_KEYS): "x", _first(nkeys, LABEL_KEYS): "y"}
    for key, value in nkeys.items():
        if key in MASKS and not value.is_floating_point() and value.dtype != torch.bool:
            value = value.bool()  # DGL's older datasets store masks as uint8 / int64 0-1 tensors
        data[renames.get(key, key)] = value
    weight = _first(ekeys, WEIGHT_KEYS)
    for key, value in ekeys.items():
        data["edge_weight" if key == weight else key] = value
    return data


def to_dgl(data: Data):
    """A PyG ``Data`` as a ``DGLGraph``: ``x`` -> ``ndata["feat"]``, ``y`` -> ``ndata["label"]``, masks by name,
    ``edge_weight`` -> ``edata["weight"]``; other tensors go to ``edata`` when their name holds "edge" (PyG's
    convention) and they have one row per edge, else to ``ndata`` with one row per node (``edata`` with one per
    edge), under their own names; anything else (graph-level values) is left out."""
    dgl = require_dgl()
    n, e = data.num_nodes, data.edge_index.size(1)
    g = dgl.graph((data.edge_index[0], data.edge_index[1]), num_nodes=n)
    names = {"x": "feat", "y": "label", "edge_weight": "weight"}
    for key, value in data.items():
        if key == "edge_index" or not isinstance(value, Tensor) or value.dim() == 0:
            continue
        target = names.get(key, key)
        if "edge" in key and value.size(0) == e:  # PyG's naming (edge_weight, edge_attr): an edge field
            g.edata[target] = value
        elif value.size(0) == n:
            g.ndata[target] = value
        elif value.size(0) == e:
            g.edata[target] = value
    return g


def read_dgl_file(path: str | Path, task: str | None = None) -> Data | list[Data]:
    """The graphs of a ``dgl.save_graphs`` file: one graph -> a ``Data`` (node task), several -> a list of ``Data``
    with each graph's label from the file's label dict (graph task; ``task`` forces either)."""
    dgl = require_dgl()
    graphs, labels = dgl.load_graphs(str(path))
    if len(graphs) == 1 and task != "graph":
        return from_dgl(graphs[0])
    key = _first(labels, GRAPH_LABEL_KEYS)
    if key is None or labels[key].size(0) != len(graphs):
        raise ValueError(f"{path}: holds {len(graphs)} graphs but its label dict has no per-graph labels under "
                         f"{', '.join(GRAPH_LABEL_KEYS)} (dgl.save_graphs(path, graphs, {{'labels': y}}))")
    out = []
    for g, y in zip(graphs, labels[key], strict=True):
        d = from_dgl(g)
        d.y = y.view(1).long()
        out.append(d)
    return out


def write_dgl_file(path: str | Path, data: Data | list[Data]) -> Path:
    """Save a ``Data`` (node task) or a list of them with their graph labels (graph task) as ``dgl.save_graphs``
    does, the inverse of :func:`read_dgl_file`."""
    dgl = require_dgl()
    if isinstance(data, Data):
        dgl.save_graphs(str(path), [to_dgl(data)])
    else:
        graphs = [to_dgl(Data(**{k: v for k, v in d.items() if k not in ("y", "num_nodes")}, num_nodes=d.num_nodes))
                  for d in data]
        dgl.save_graphs(str(path), graphs, {"labels": torch.cat([d.y.view(-1) for d in data])})
    return Path(path)


__all__ = ["FEATURE_KEYS", "LABEL_KEYS", "MASKS", "WEIGHT_KEYS", "from_dgl", "read_dgl_file", "require_dgl",
           "to_dgl", "write_dgl_file"]
