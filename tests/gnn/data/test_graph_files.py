"""Graphs loaded from a user's file or folder (gnn/data/graph_files.py): each layout round-trips a built-in dataset
and a seeded synthetic graph, the built-in raw files loaded by path equal the datasets loaded by name, and bad input
is a one-line DataError."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp
import torch
from torch_geometric.data import Data

from gnn.data import registry
from gnn.data.graph_files import FILE_FORMATS, detect_format, load_graph_file, source_digest
from gnn.data.loaders import load_dataset
from gnn.data.registry import DataError, cache_dir, get_entry
from gnn.data.splits import Split, fraction_split, per_class_split, stratified_kfold

# ------------------------------------------------------------------------------------------------- helpers


def _raw_dir(key: str) -> Path:
    """The folder of ``key``'s raw files in a data root (mirror / GNN_DATA_ROOT); skips when none holds them."""
    entry = get_entry(key)
    for _label, root in registry.candidate_roots():
        if all((root / entry.raw_dir / f).is_file() for f in entry.files):
            return root / entry.raw_dir
    pytest.skip(f"raw files of {key} are in no data root: the mirror {registry.MIRROR_PATH} is absent and "
                f"GNN_DATA_ROOT is unset")


@functools.cache
def _named_cached(key: str, split_seed: int):
    return load_dataset(key, split_seed=split_seed)


@pytest.fixture(autouse=True, scope="module")
def _forget_named_datasets():
    yield
    _named_cached.cache_clear()  # cornell5's features alone take 350 MB


def _named(key: str, split_seed: int = 0):
    """The built-in dataset by name (skips when neither the cache nor a data root has its raw files)."""
    entry = get_entry(key)
    if not all((cache_dir() / entry.raw_dir / f).is_file() for f in entry.files):
        _raw_dir(key)
    return _named_cached(key, split_seed)


def _by_path(monkeypatch, tmp_path: Path, path: Path, **kwargs):
    """load_graph_file with the writable cache in tmp_path (TUDataset copies go there, not into the checkout)."""
    with monkeypatch.context() as m:
        m.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
        return load_graph_file(path, **kwargs)


def _same_split(a: Split, b: Split) -> None:
    for part in ("train", "val", "test"):
        assert torch.equal(getattr(a, part), getattr(b, part)), part


def _same_graph(a, b, fields=("x", "edge_index", "y")) -> None:
    for f in fields:
        assert torch.equal(getattr(a, f), getattr(b, f)), f


def _same(got, want, node_fields=("x", "edge_index", "y")) -> None:
    """Same task, classes, features, tensors and split(s)."""
    assert (got.task, got.num_classes, got.num_features) == (want.task, want.num_classes, want.num_features)
    if want.task == "node":
        _same_graph(got.data, want.data, node_fields)
    else:
        assert len(got.graphs) == len(want.graphs)
        for g, w in zip(got.graphs, want.graphs, strict=True):
            _same_graph(g, w)
    assert len(got.splits) == len(want.splits)
    for s, t in zip(got.splits, want.splits, strict=True):
        _same_split(s, t)


def _undirected(src: np.ndarray, dst: np.ndarray, n: int) -> torch.Tensor:
    """Reference: symmetrised, deduplicated, self loops dropped, sorted by (row, col). (2, E) int64."""
    keep = src != dst
    keys = np.unique(np.concatenate([src[keep] * n + dst[keep], dst[keep] * n + src[keep]]))
    return torch.from_numpy(np.stack([keys // n, keys % n])).long()


def _no_traceback_error(excinfo) -> str:
    msg = str(excinfo.value)
    assert "\n" not in msg, msg
    return msg


# ------------------------------------------------------------------------------------------------- writers


def _write_npz(path: Path, edge_index: torch.Tensor, x: torch.Tensor | np.ndarray, y, dense: bool = False,
               **extra) -> Path:
    n = len(y)
    ei = np.asarray(edge_index)
    adj = sp.csr_matrix((np.ones(ei.shape[1], dtype=np.float32), (ei[0], ei[1])), shape=(n, n))
    arrays = dict(adj_data=adj.data, adj_indices=adj.indices, adj_indptr=adj.indptr, adj_shape=np.array(adj.shape),
                  labels=np.asarray(y), **extra)
    if dense:
        arrays["attr_matrix"] = np.asarray(x)
    else:
        attr = sp.csr_matrix(np.asarray(x))
        arrays.update(attr_data=attr.data, attr_indices=attr.indices, attr_indptr=attr.indptr,
                      attr_shape=np.array(attr.shape))
    np.savez(path, **arrays)
    return path


def _write_tu(folder: Path, name: str, graphs: list[dict]) -> Path:
    """TU text files from graphs given as dicts: edges (e, 2) local 0-based, node_labels (n,), label, optional
    edge_labels (e,)."""
    folder.mkdir(parents=True, exist_ok=True)
    a, ind, nl, el, gl, offset = [], [], [], [], [], 0
    for gid, g in enumerate(graphs, start=1):
        n = len(g["node_labels"])
        a += [f"{s + offset + 1}, {d + offset + 1}" for s, d in g["edges"]]
        ind += [str(gid)] * n
        nl += [str(v) for v in g["node_labels"]]
        el += [str(v) for v in g.get("edge_labels", [])]
        gl.append(str(g["label"]))
        offset += n
    files = {"A": a, "graph_indicator": ind, "node_labels": nl, "graph_labels": gl, "edge_labels": el}
    for part, lines in files.items():
        if lines:
            (folder / f"{name}_{part}.txt").write_text("\n".join(lines) + "\n")
    return folder


def _one_hot_blocks(x: torch.Tensor) -> torch.Tensor:
    """Undo a concatenation of one-hot blocks (each row has one 1 per block, every column of a block is used):
    (N, B) class index of every row in every block."""
    nz = x.nonzero()  # (N * B, 2) sorted by row, then column
    cols = nz[:, 1].view(x.size(0), -1)  # (N, B): column of the row's 1 in each block
    assert torch.equal(nz[:, 0].view(x.size(0), -1), torch.arange(x.size(0))[:, None].expand_as(cols))
    return cols - cols.min(dim=0).values  # a block starts at the smallest column any row uses in it


# ------------------------------------------------------------------------------------------------- .npz


def test_npz_round_trip_of_amazon_computers(tmp_path, monkeypatch):
    want = _named("amazon-computers")
    d = want.data
    path = _write_npz(tmp_path / "computers.npz", d.edge_index, d.x.numpy(), d.y.numpy())
    got = _by_path(monkeypatch, tmp_path, path)
    _same(got, want)
    assert got.name == "computers" and got.info["source"]["format"] == "npz"
    assert got.info["source"] == {"path": str(path.resolve()), "format": "npz",
                                  "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


@pytest.mark.parametrize("dense", [False, True])
def test_npz_synthetic_graph(tmp_path, monkeypatch, dense):
    rng = np.random.default_rng(7)
    n, e = 160, 700
    y = rng.permutation(np.arange(n) % 3)  # 53-54 nodes per class: enough for 20 + 30
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)  # directed, with self loops and duplicates
    src[:5] = dst[:5]
    x = (rng.random((n, 12)) < 0.3) * rng.integers(1, 4, (n, 12))  # counts 0..3
    path = _write_npz(tmp_path / "syn graph.npz", torch.from_numpy(np.stack([src, dst])), x, y, dense=dense)
    got = _by_path(monkeypatch, tmp_path, path, split_seed=5)
    assert got.task == "node" and got.name == "syn_graph" and got.num_classes == 3 and got.num_features == 12
    assert torch.equal(got.data.edge_index, _undirected(src, dst, n))
    assert torch.equal(got.data.x, torch.from_numpy((x > 0).astype(np.float32)))  # binarised, as PyG's read_npz
    assert torch.equal(got.data.y, torch.from_numpy(y).long())
    _same_split(got.splits[0], per_class_split(torch.from_numpy(y).long(), 20, 30, seed=5))
    frac = _by_path(monkeypatch, tmp_path, path, split_seed=5, split="fraction").splits[0]
    _same_split(frac, fraction_split(torch.from_numpy(y).long(), 0.5, 0.25, seed=5))


def test_npz_masks_are_used_on_request(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    n = 30
    owner = rng.integers(0, 3, n)
    masks = {f"{p}_mask": owner == i for i, p in enumerate(("train", "val", "test"))}
    path = _write_npz(tmp_path / "m.npz", torch.tensor([[0, 1], [1, 2]]), np.eye(n), rng.integers(0, 2, n), **masks)
    s = _by_path(monkeypatch, tmp_path, path, split="masks").splits[0]
    for i, p in enumerate(("train", "val", "test")):
        assert torch.equal(getattr(s, p), torch.from_numpy(np.flatnonzero(owner == i)))


def test_amazon_computers_by_path_equals_by_name(tmp_path, monkeypatch):
    raw = _raw_dir("amazon-computers") / "amazon_electronics_computers.npz"
    got = _by_path(monkeypatch, tmp_path, raw, split_seed=2)  # the round trip above uses seed 0
    _same(got, _named("amazon-computers", 2))
    assert got.name == "amazon_electronics_computers"
    assert got.info["source"]["sha256"] == get_entry("amazon-computers").files[raw.name]


# ------------------------------------------------------------------------------------------------- TUDataset


def _tu_dicts_from(graphs) -> list[dict]:
    """TU dicts of PyG graphs whose x and edge_attr are one-hot labels (MUTAG): labels = argmax."""
    return [dict(edges=g.edge_index.t().tolist(), node_labels=g.x.argmax(1).tolist(),
                 edge_labels=g.edge_attr.argmax(1).tolist(), label=int(g.y)) for g in graphs]


def test_tudataset_round_trip_of_mutag(tmp_path, monkeypatch):
    want = _named("mutag")
    folder = _write_tu(tmp_path / "user" / "mine", "MINE", _tu_dicts_from(want.graphs))
    before = sorted(p.name for p in folder.iterdir())
    got = _by_path(monkeypatch, tmp_path, folder)
    _same(got, want)
    for g, w in zip(got.graphs, want.graphs, strict=True):
        assert torch.equal(g.edge_attr, w.edge_attr)
    assert got.name == "MINE" and detect_format(folder) == "tudataset"
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing written into the user's folder
    assert any((tmp_path / "cache").rglob("MINE_A.txt"))


def test_tudataset_synthetic_graphs(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    dicts, want_x, want_ei = [], [], []
    labels = rng.permutation([1] * 8 + [-1] * 6)
    for label in labels:
        n = int(rng.integers(3, 8))
        src, dst = rng.integers(0, n, 2 * n), rng.integers(0, n, 2 * n)
        src[0] = dst[0]  # a self loop, which PyG drops
        nl = rng.integers(2, 5, n)  # node labels 2..4: PyG subtracts the minimum over all graphs
        dicts.append(dict(edges=list(zip(src.tolist(), dst.tolist(), strict=True)), node_labels=nl.tolist(),
                          label=int(label)))
        want_ei.append((src, dst, n))
        want_x.append(nl)
    folder = _write_tu(tmp_path / "syn", "SYN", dicts)
    got = _by_path(monkeypatch, tmp_path, folder, split_seed=4)
    lo = min(int(v.min()) for v in want_x)
    hi = max(int(v.max()) for v in want_x)
    assert got.task == "graph" and len(got.graphs) == 14 and got.num_features == hi - lo + 1
    y = torch.from_numpy((labels > 0).astype(np.int64))  # -1 -> 0, 1 -> 1 (sorted unique)
    for g, (src, dst, n), nl, yy in zip(got.graphs, want_ei, want_x, y, strict=True):
        keep = src != dst
        keys = np.unique(src[keep] * n + dst[keep])  # directed, deduplicated, sorted
        assert torch.equal(g.edge_index, torch.from_numpy(np.stack([keys // n, keys % n])))
        assert torch.equal(g.x, torch.from_numpy(np.eye(hi - lo + 1, dtype=np.float32)[nl - lo]))
        assert int(g.y) == int(yy)
    for s, t in zip(got.splits, stratified_kfold(y, 10, seed=4), strict=True):
        _same_split(s, t)
    assert got.num_classes == 2


def test_mutag_by_path_equals_by_name(tmp_path, monkeypatch):
    raw = _raw_dir("mutag")
    stamps = {p: p.stat().st_mtime_ns for p in raw.iterdir()}
    for seed in (0, 5):
        _same(_by_path(monkeypatch, tmp_path, raw, split_seed=seed), _named("mutag", seed))
    parent = _by_path(monkeypatch, tmp_path, raw.parent)  # the folder holding raw/ works too
    _same(parent, _named("mutag"))
    assert parent.name == "MUTAG"
    assert {p: p.stat().st_mtime_ns for p in raw.iterdir()} == stamps  # the data root is never written


def test_tudataset_cache_is_refreshed_when_a_cached_raw_file_changed(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    dicts = [dict(edges=[(0, 1), (1, 2)], node_labels=rng.integers(0, 3, 3).tolist(), label=i % 2) for i in range(10)]
    folder = _write_tu(tmp_path / "t", "T", dicts)
    first = _by_path(monkeypatch, tmp_path, folder)
    victim = next((tmp_path / "cache").rglob("T_graph_labels.txt"))
    victim.write_text("0\n" * 10)  # tampered copy in the cache
    again = _by_path(monkeypatch, tmp_path, folder)
    assert torch.equal(torch.cat([g.y for g in again.graphs]), torch.cat([g.y for g in first.graphs]))
    assert torch.cat([g.y for g in again.graphs]).tolist() == [i % 2 for i in range(10)]


# ------------------------------------------------------------------------------------------------- .mat


def _write_facebook(path: Path, edge_index: torch.Tensor, local_info: np.ndarray) -> Path:
    n = local_info.shape[0]
    ei = edge_index.numpy()
    adj = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n))
    scipy.io.savemat(path, {"A": adj, "local_info": local_info})
    return path


def test_mat_round_trip_of_cornell5(tmp_path, monkeypatch):
    want = _named("cornell5", 1)  # the seed of test_cornell5_by_path_equals_by_name: one load by name for both
    d = want.data
    blocks = _one_hot_blocks(d.x)  # the columns of local_info but the gender, as class indices
    local_info = torch.cat([blocks[:, :1], (d.y + 1)[:, None], blocks[:, 1:]], dim=1).numpy()
    path = _write_facebook(tmp_path / "cornell.mat", d.edge_index, local_info)
    got = _by_path(monkeypatch, tmp_path, path, split_seed=1)
    _same(got, want)
    assert got.name == "cornell"


def test_mat_synthetic_facebook_graph(tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    n = 90
    local_info = np.stack([rng.integers(0, 4, n), rng.integers(0, 3, n), rng.integers(1990, 1995, n),
                           rng.choice([0, 7, 300], n)], axis=1).astype(np.uint16)
    src, dst = rng.integers(0, n, 400), rng.integers(0, n, 400)
    path = _write_facebook(tmp_path / "Tiny41.mat", torch.from_numpy(np.stack([src, dst])), local_info)
    got = _by_path(monkeypatch, tmp_path, path, split_seed=2)
    y = torch.from_numpy(local_info[:, 1].astype(np.int64) - 1)
    want_x = np.concatenate([np.eye(len(np.unique(c)), dtype=np.float32)[np.unique(c, return_inverse=True)[1]]
                             for c in local_info[:, [0, 2, 3]].T], axis=1)
    keys = np.unique(src * n + dst)  # A's non-zeros in row-major order
    assert got.task == "node" and got.name == "Tiny41" and got.num_classes == 2
    assert torch.equal(got.data.edge_index, torch.from_numpy(np.stack([keys // n, keys % n])))
    assert torch.equal(got.data.x, torch.from_numpy(want_x)) and torch.equal(got.data.y, y)
    _same_split(got.splits[0], fraction_split(y, 0.5, 0.25, seed=2))
    assert got.num_features == 4 + 5 + 3


def test_cornell5_by_path_equals_by_name(tmp_path, monkeypatch):
    raw = _raw_dir("cornell5") / "data.mat"
    got = _by_path(monkeypatch, tmp_path, raw, split_seed=1)
    _same(got, _named("cornell5", 1))
    assert got.name == "cornell5"  # PyG's generic raw/data.mat is named after its dataset folder


# ------------------------------------------------------------------------------------------------- .pt


def test_pt_round_trip_of_cora_keeps_its_public_masks(tmp_path, monkeypatch):
    want = _named("cora")
    path = tmp_path / "cora.pt"
    torch.save(want.data, path)
    got = _by_path(monkeypatch, tmp_path, path)
    _same(got, want)
    assert got.info["split"] == "masks" and len(got.splits[0].train) == 140
    per_class = _by_path(monkeypatch, tmp_path, path, split="per-class", split_seed=3)
    _same_split(per_class.splits[0], per_class_split(want.data.y, 20, 30, seed=3))


def test_pt_round_trip_of_mutag_as_a_list(tmp_path, monkeypatch):
    want = _named("mutag", 6)
    path = tmp_path / "mutag_graphs.pt"
    torch.save([want.graphs[i] for i in range(len(want.graphs))], path)
    got = _by_path(monkeypatch, tmp_path, path, split_seed=6)
    _same(got, want)


def test_pt_synthetic_node_graph_and_graph_list(tmp_path, monkeypatch):
    gen = torch.Generator().manual_seed(5)
    n = 120
    y = torch.randperm(n, generator=gen) % 2
    data = Data(x=torch.randn(n, 6, generator=gen), edge_index=torch.randint(0, n, (2, 300), generator=gen), y=y)
    torch.save(data, tmp_path / "node.pt")
    got = _by_path(monkeypatch, tmp_path, tmp_path / "node.pt", split_seed=9)
    _same_graph(got.data, data)  # as stored: no symmetrising
    _same_split(got.splits[0], per_class_split(y, 20, 30, seed=9))
    assert (got.task, got.num_features, got.num_classes, got.info["split"]) == ("node", 6, 2, "per-class")

    graphs = []
    for i in range(23):
        k = int(torch.randint(2, 6, (1,), generator=gen))
        graphs.append(Data(x=torch.randn(k, 4, generator=gen), edge_index=torch.randint(0, k, (2, 2 * k)),
                           y=torch.tensor([i % 3])))
    torch.save(tuple(graphs), tmp_path / "graphs.pth")
    got = _by_path(monkeypatch, tmp_path, tmp_path / "graphs.pth", split_seed=1)
    assert (got.task, len(got.graphs), got.num_features, got.num_classes) == ("graph", 23, 4, 3)
    assert "split" not in got.info  # folds: no node split to record
    for g, w in zip(got.graphs, graphs, strict=True):
        _same_graph(g, w)
    y_all = torch.tensor([i % 3 for i in range(23)])
    for s, t in zip(got.splits, stratified_kfold(y_all, 10, seed=1), strict=True):
        _same_split(s, t)
    torch.save([data], tmp_path / "one.pt")  # a one-element list is one graph: node task unless told otherwise
    assert _by_path(monkeypatch, tmp_path, tmp_path / "one.pt").task == "node"
    with pytest.raises(DataError, match="10-fold cross-validation needs at least 10"):
        _by_path(monkeypatch, tmp_path, tmp_path / "one.pt", task="graph")


# ------------------------------------------------------------------------------------------------- Planetoid


def _write_planetoid(folder: Path, name: str, x: np.ndarray, y: np.ndarray, num_train: int, test_ids: np.ndarray,
                     adjacency: dict[int, list[int]]) -> Path:
    """The ind.<name>.* pickles of Yang et al. 2016: train rows ``0..num_train-1`` (x, y), every non-test row
    (allx, ally), the test rows in ``test_ids`` order (tx, ty, test.index), the adjacency lists (graph)."""
    import pickle

    folder.mkdir(parents=True, exist_ok=True)
    rest = np.setdiff1d(np.arange(x.shape[0]), test_ids)
    onehot = np.eye(int(y.max()) + 1)[y]
    parts = {"x": sp.csr_matrix(x[:num_train]), "y": onehot[:num_train], "allx": sp.csr_matrix(x[rest]),
             "ally": onehot[rest], "tx": sp.csr_matrix(x[test_ids]), "ty": onehot[test_ids], "graph": adjacency}
    for part, obj in parts.items():
        with open(folder / f"ind.{name}.{part}", "wb") as f:
            pickle.dump(obj, f)
    (folder / f"ind.{name}.test.index").write_text("".join(f"{i}\n" for i in test_ids))
    return folder


def test_cora_by_path_equals_by_name(tmp_path, monkeypatch):
    """The Planetoid folder of Cora by path: same features (row-normalized by default), graph, labels, public split."""
    raw = _raw_dir("cora")
    with monkeypatch.context() as m:
        m.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
        got = load_dataset(raw.parent)  # the folder holding raw/, as PyG lays it out
        plain = load_dataset(raw, features="raw")
    _same(got, _named("cora"))
    assert got.info["features"] == "row-normalized" and got.info["split"] == "masks"
    assert got.info["source"]["format"] == "planetoid" and got.name == "cora"
    assert set(plain.data.x.unique().tolist()) == {0.0, 1.0}  # binary, as stored
    assert torch.equal(got.data.x, plain.data.x / plain.data.x.sum(dim=1, keepdim=True).clamp(min=1e-12))


def test_planetoid_synthetic_graph(tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    n, f = 700, 9
    x = (rng.random((n, f)) < 0.3).astype(np.float64)
    y = rng.integers(0, 4, n)
    test_ids = rng.permutation(np.arange(600, n))  # the test rows, stored out of order as in the real files
    adjacency: dict[int, list[int]] = {i: [] for i in range(n)}
    for a, b in rng.integers(0, n, (1500, 2)):
        if a != b and b not in adjacency[a]:
            adjacency[a].append(int(b))
            adjacency[b].append(int(a))
    folder = _write_planetoid(tmp_path / "syn", "syn", x, y, 30, test_ids, adjacency)
    got = _by_path(monkeypatch, tmp_path, folder)
    assert (got.task, got.name, got.num_classes, got.num_features) == ("node", "syn", 4, f)
    assert torch.equal(got.data.x, torch.from_numpy(x).float())  # the reader leaves features raw
    assert torch.equal(got.data.y, torch.from_numpy(y).long())
    want = torch.tensor([(a, b) for a, nbrs in adjacency.items() for b in nbrs]).t()
    assert set(map(tuple, got.data.edge_index.t().tolist())) == set(map(tuple, want.t().tolist()))
    _same_split(got.splits[0], Split(torch.arange(30), torch.arange(30, 530), torch.from_numpy(np.sort(test_ids))))
    (folder / "ind.syn.ty").unlink()
    with pytest.raises(DataError, match="missing ind.syn.ty") as e:
        _by_path(monkeypatch, tmp_path, folder)
    _no_traceback_error(e)
    (folder / "ind.syn.ty").write_bytes(b"not a pickle")
    with pytest.raises(DataError, match="PyG could not read the Planetoid files"):
        _by_path(monkeypatch, tmp_path, folder)


# ------------------------------------------------------------------------------------------------- digests


def test_source_digest_of_file_and_folder(tmp_path):
    f = tmp_path / "a.npz"
    f.write_bytes(b"abc")
    assert source_digest(f) == hashlib.sha256(b"abc").hexdigest()
    folder = tmp_path / "folder"
    (folder / "sub").mkdir(parents=True)
    (folder / "X_A.txt").write_text("1, 2\n")
    (folder / "sub" / "b.txt").write_text("b")
    lines = "".join(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {name}\n"
                    for name, p in sorted([("X_A.txt", folder / "X_A.txt"), ("sub/b.txt", folder / "sub" / "b.txt")]))
    first = source_digest(folder)
    assert first == hashlib.sha256(lines.encode()).hexdigest()
    (folder / "sub" / "b.txt").write_text("c")
    assert source_digest(folder) != first


# ------------------------------------------------------------------------------------------------- bad input


def _tiny_npz(path: Path) -> Path:
    return _write_npz(path, torch.tensor([[0], [1]]), np.eye(3), np.array([0, 1, 0]))


@pytest.mark.parametrize("setup,kwargs,pattern", [
    (lambda p: (p / "g.csv").write_text("a,b\n") and p / "g.csv", {},
     r"g\.csv: unsupported file type '\.csv'.*TUDataset folder"),
    (lambda p: p / "missing.npz", {}, r"missing\.npz: no such file or folder"),
    (lambda p: p / "nothing", {}, r"nothing: no such file or folder"),
    (lambda p: (p / "empty").mkdir() or p / "empty", {}, r"holds no <NAME>_A\.txt nor ind\.<name>\.graph"),
    (lambda p: _tiny_npz(p / "t.npz"), {"split": "random"},
     r"unknown split 'random'; valid: per-class, fraction, masks"),
    (lambda p: _tiny_npz(p / "t.npz"), {"task": "edge"}, r"unknown task 'edge'; valid: node, graph"),
    (lambda p: _tiny_npz(p / "t.npz"), {"split_seed": -1}, r"split_seed -1 must be a non-negative integer"),
    (lambda p: _tiny_npz(p / "t.npz"), {"task": "graph"}, r"t\.npz: a \.npz holds one graph.*task must be 'node'"),
    (lambda p: _tiny_npz(p / "t.npz"), {"split": "masks"}, r"split 'masks' needs boolean train_mask"),
    (lambda p: _tiny_npz(p / "t.npz"), {}, r"class 0 has 2 nodes.*use split 'fraction'"),
])
def test_bad_input_is_a_one_line_data_error(tmp_path, monkeypatch, setup, kwargs, pattern):
    path = setup(tmp_path)
    with pytest.raises(DataError, match=pattern) as e:
        _by_path(monkeypatch, tmp_path, path, **kwargs)
    _no_traceback_error(e)


def test_npz_without_labels(tmp_path, monkeypatch):
    np.savez(tmp_path / "nolabels.npz", adj_data=np.ones(1), adj_indices=np.array([1]), adj_indptr=np.array([0, 1, 1]),
             adj_shape=np.array([2, 2]), attr_matrix=np.eye(2))
    with pytest.raises(DataError, match=r"nolabels\.npz: missing labels \(has adj_data.*gnn-benchmark layout") as e:
        _by_path(monkeypatch, tmp_path, tmp_path / "nolabels.npz")
    _no_traceback_error(e)


@pytest.mark.parametrize("suffix", [".npz", ".pt", ".mat"])
def test_garbled_files(tmp_path, monkeypatch, suffix):
    path = tmp_path / f"garbled{suffix}"
    path.write_bytes(np.random.default_rng(0).bytes(300))
    with pytest.raises(DataError, match=rf"garbled\{suffix}: not a readable") as e:
        _by_path(monkeypatch, tmp_path, path)
    _no_traceback_error(e)


def test_files_that_hold_the_wrong_things(tmp_path, monkeypatch):
    scipy.io.savemat(tmp_path / "other.mat", {"B": np.eye(2)})
    torch.save({"x": torch.ones(2)}, tmp_path / "dict.pt")
    torch.save(Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0], [5]]), y=torch.zeros(3, dtype=torch.long)),
               tmp_path / "range.pt")
    torch.save(Data(x=torch.ones(3, 2), edge_index=torch.tensor([[0], [1]])), tmp_path / "nolabel.pt")
    cases = [("other.mat", r"has B; a LINKX \.mat needs A"), ("dict.pt", r"holds a dict; a \.pt must hold"),
             ("range.pt", r"edge_index .* in \[0, 3\)"), ("nolabel.pt", r"no tensor y")]
    for name, pattern in cases:
        with pytest.raises(DataError, match=pattern) as e:
            _by_path(monkeypatch, tmp_path, tmp_path / name)
        _no_traceback_error(e)


def test_tudataset_folder_problems(tmp_path, monkeypatch):
    no_labels = _write_tu(tmp_path / "nl", "NL", [dict(edges=[(0, 1)], node_labels=[0, 1], label=0)] * 10)
    (no_labels / "NL_graph_labels.txt").unlink()
    with pytest.raises(DataError, match=r"missing NL_graph_labels\.txt") as e:
        _by_path(monkeypatch, tmp_path, no_labels)
    _no_traceback_error(e)
    few = _write_tu(tmp_path / "few", "FEW", [dict(edges=[(0, 1)], node_labels=[0, 1], label=i % 2) for i in range(4)])
    with pytest.raises(DataError, match="holds 4 graphs; 10-fold"):
        _by_path(monkeypatch, tmp_path, few)
    with pytest.raises(DataError, match="split 'fraction' applies to node tasks only"):
        _by_path(monkeypatch, tmp_path, few, split="fraction")
    garbled = _write_tu(tmp_path / "g", "G", [dict(edges=[(0, 1)], node_labels=[0, 1], label=0)] * 10)
    (garbled / "G_A.txt").write_text("1, x\n")
    with pytest.raises(DataError, match="PyG could not read the TUDataset files") as e:
        _by_path(monkeypatch, tmp_path, garbled)
    _no_traceback_error(e)
    with pytest.raises(DataError, match="task must be 'graph'"):
        _by_path(monkeypatch, tmp_path, few, task="node")


def test_dgl_file_without_dgl_says_how_to_get_it(tmp_path, monkeypatch):
    import importlib.util

    if importlib.util.find_spec("dgl") is not None:
        pytest.skip("DGL is installed here: tests/dgl reads its files")
    (tmp_path / "g.bin").write_bytes(b"\0" * 16)
    with pytest.raises(DataError, match=r"g\.bin: DGL is not installed.*make test-dgl") as e:
        _by_path(monkeypatch, tmp_path, tmp_path / "g.bin")
    _no_traceback_error(e)


def test_formats_constant():
    assert FILE_FORMATS == ("npz", "pt", "tudataset", "planetoid", "mat", "dgl")
