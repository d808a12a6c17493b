"""Published counts of every dataset, split sizes and fold properties."""

import pytest
import torch

from gnn.data.loaders import load_dataset
from gnn.data.registry import get_entry
from gnn.data.splits import stratified_kfold

NODE = ["cora", "citeseer", "amazon-computers", "coauthor-cs", "cornell5"]


@pytest.mark.parametrize("name", NODE)
def test_node_dataset_counts(name):
    g = load_dataset(name)
    c = get_entry(name).counts
    assert g.task == "node"
    assert g.data.num_nodes == c["num_nodes"]
    assert g.data.edge_index.size(1) == c["num_edges"]
    assert g.num_features == c["num_features"] == g.data.x.size(1)
    assert g.num_classes == c["num_classes"]
    s = g.splits[0]
    assert len(set(s.train.tolist()) & set(s.test.tolist())) == 0
    row_sums = g.data.x.sum(dim=1)
    if get_entry(name).features == "row-normalized":
        nonzero = row_sums[row_sums > 0]
        torch.testing.assert_close(nonzero, torch.ones_like(nonzero))
    else:
        assert float(row_sums.max()) > 1.5  # raw counts or binary bag-of-words, untouched


def test_cora_public_split():
    g = load_dataset("cora")
    s = g.splits[0]
    assert (len(s.train), len(s.val), len(s.test)) == (140, 500, 1000)
    assert torch.allclose(g.data.x.sum(1)[g.data.x.sum(1) > 0], torch.ones(1))  # row-normalised


@pytest.mark.parametrize("name", ["amazon-computers", "coauthor-cs"])
def test_shchur_split_is_20_30_per_class_and_seeded(name):
    g = load_dataset(name)
    s = g.splits[0]
    y = g.data.y
    assert torch.equal(torch.bincount(y[s.train]), torch.full((g.num_classes,), 20))
    assert torch.equal(torch.bincount(y[s.val]), torch.full((g.num_classes,), 30))
    assert len(s.train) + len(s.val) + len(s.test) == g.data.num_nodes
    again = load_dataset(name).splits[0]
    other = load_dataset(name, split_seed=1).splits[0]
    assert torch.equal(s.train, again.train) and not torch.equal(s.train, other.train)


def test_pubmed_is_topology_only():
    g = load_dataset("pubmed")
    assert g.task == "topology" and g.data.x is None and g.num_features == 0
    assert (g.data.num_nodes, g.data.edge_index.size(1)) == (19717, 88648)
    assert "features" in g.info["note"]


@pytest.mark.parametrize("name,graphs,classes", [("mutag", 188, (125, 63)), ("proteins", 1113, (663, 450))])
def test_tu_counts_and_folds(name, graphs, classes):
    g = load_dataset(name)
    c = get_entry(name).counts
    assert g.task == "graph" and len(g.graphs) == graphs
    assert sum(d.num_nodes for d in g.graphs) == c["num_nodes"]
    assert sum(d.edge_index.size(1) for d in g.graphs) == c["num_edges"]
    y = torch.cat([d.y for d in g.graphs])
    assert tuple(sorted(torch.bincount(y).tolist(), reverse=True)) == classes
    assert len(g.splits) == 10
    tests = torch.cat([s.test for s in g.splits])
    assert torch.equal(tests.sort().values, torch.arange(graphs))  # every graph is tested exactly once


def test_stratified_folds_keep_class_ratio():
    y = torch.tensor([0] * 60 + [1] * 30 + [2] * 10)
    folds = stratified_kfold(y, 10, seed=3)
    for f in folds:
        assert torch.equal(torch.bincount(y[f.test], minlength=3), torch.tensor([6, 3, 1]))
        assert len(f.train) == 80 and len(f.val) == 10
    assert not torch.equal(stratified_kfold(y, 10, seed=4)[0].test, folds[0].test)


def test_feature_preprocessing_override():
    raw = load_dataset("cora", features="raw")
    assert float(raw.data.x.sum(dim=1).max()) > 1.5  # binary bag-of-words counts
    normalized = load_dataset("cora")  # the registry's row-normalized
    torch.testing.assert_close(normalized.data.x, raw.data.x / raw.data.x.sum(dim=1, keepdim=True).clamp(min=1e-12))
    with pytest.raises(ValueError, match="valid: raw, row-normalized"):
        load_dataset("cora", features="l2")
