"""DGLGraph <-> the suite's graph (PyG Data), and dgl.save_graphs files through ``--dataset``: round trips keep every
field, edge order and dtype. Runs in DGL's environment (``make test-dgl``); skipped elsewhere."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

dgl = pytest.importorskip("dgl", reason="DGL lives in its own environment: make test-dgl (torch 2.2.1, DGL 2.1)")

from gnn.data.dgl_graphs import from_dgl, to_dgl, write_dgl_file  # noqa: E402
from gnn.data.loaders import load_dataset  # noqa: E402
from gnn.data.registry import DataError  # noqa: E402
from gnn.data.splits import per_class_split, stratified_kfold  # noqa: E402


def node_graph(seed: int = 0, n: int = 150) -> Data:
    g = torch.Generator().manual_seed(seed)
    masks = torch.randint(0, 3, (n,), generator=g)
    return Data(x=torch.randn(n, 6, generator=g), y=torch.randperm(n, generator=g) % 3,
                edge_index=torch.randint(0, n, (2, 400), generator=g),
                edge_weight=torch.rand(400, generator=g), train_mask=masks == 0, val_mask=masks == 1,
                test_mask=masks == 2, degree_feature=torch.arange(n), num_nodes=n)


def test_data_to_dgl_and_back_keeps_every_field():
    data = node_graph()
    g = to_dgl(data)
    assert g.num_nodes() == data.num_nodes and g.num_edges() == 400
    assert set(g.ndata) == {"feat", "label", "train_mask", "val_mask", "test_mask", "degree_feature"}
    assert set(g.edata) == {"weight"}
    back = from_dgl(g)
    for key in ("x", "y", "edge_index", "edge_weight", "train_mask", "val_mask", "test_mask", "degree_feature"):
        assert torch.equal(back[key], data[key]), key
    assert back.num_nodes == data.num_nodes


def test_dgl_names_and_integer_masks():
    g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])), num_nodes=4)  # node 3 isolated
    g.ndata["features"] = torch.eye(4)
    g.ndata["labels"] = torch.tensor([0, 1, 0, 1])
    g.ndata["train_mask"] = torch.tensor([1, 0, 0, 1], dtype=torch.uint8)
    g.edata["w"] = torch.tensor([0.5, 1.0, 2.0])
    d = from_dgl(g)
    assert torch.equal(d.x, torch.eye(4)) and torch.equal(d.y, torch.tensor([0, 1, 0, 1]))
    assert d.train_mask.dtype == torch.bool and d.train_mask.tolist() == [True, False, False, True]
    assert torch.equal(d.edge_weight, torch.tensor([0.5, 1.0, 2.0])) and d.num_nodes == 4
    hetero = dgl.heterograph({("a", "r", "b"): (torch.tensor([0]), torch.tensor([0]))})
    with pytest.raises(ValueError, match="homogeneous"):
        from_dgl(hetero)


def test_saved_node_graph_loads_by_path(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    data = node_graph(1)
    path = write_dgl_file(tmp_path / "mine.bin", data)
    got = load_dataset(path)
    assert (got.task, got.name, got.num_features, got.info["split"]) == ("node", "mine", 6, "masks")
    assert torch.equal(got.data.x, data.x) and torch.equal(got.data.edge_index, data.edge_index)
    assert torch.equal(got.splits[0].train, data.train_mask.nonzero().view(-1))
    del data.train_mask, data.val_mask, data.test_mask
    got = load_dataset(write_dgl_file(tmp_path / "nomasks.bin", data), split_seed=4)
    assert torch.equal(got.splits[0].train, per_class_split(data.y, 20, 30, seed=4).train)


def test_saved_graph_list_loads_as_a_graph_task(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    g = torch.Generator().manual_seed(3)
    graphs = []
    for i in range(20):
        k = int(torch.randint(3, 8, (1,), generator=g))
        graphs.append(Data(x=torch.randn(k, 4, generator=g), edge_index=torch.randint(0, k, (2, 2 * k), generator=g),
                           y=torch.tensor([i % 2]), num_nodes=k))
    got = load_dataset(write_dgl_file(tmp_path / "graphs.bin", graphs), split_seed=2)
    assert (got.task, len(got.graphs), got.num_classes) == ("graph", 20, 2)
    for a, b in zip(got.graphs, graphs, strict=True):
        assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index) and torch.equal(a.y, b.y)
    folds = stratified_kfold(torch.tensor([i % 2 for i in range(20)]), 10, seed=2)
    assert torch.equal(got.splits[0].test, folds[0].test)
    dgl.save_graphs(str(tmp_path / "nolabels.bin"), [to_dgl(d) for d in graphs])
    with pytest.raises(DataError, match="no per-graph labels"):
        load_dataset(tmp_path / "nolabels.bin")
