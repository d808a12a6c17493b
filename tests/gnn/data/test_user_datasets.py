"""A user's graph without touching the checkout: ``--dataset <path>`` through training and export (the file's
SHA-256 recorded and checked on reload), and user registries (``GNN_REGISTRY``) whose broken entries break only
themselves."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Data

from gnn.data.loaders import is_graph_path, load_dataset, load_recorded
from gnn.data.registry import USER_REGISTRY_ENV, DataError, dataset_names, get_entry
from gnn.files import sha256_file

ROOT = Path(__file__).resolve().parents[3]


def synthetic_pt(path: Path, seed: int = 0, n: int = 240, f: int = 12, c: int = 3) -> Path:
    """A seeded node-classification graph saved as a PyG Data (.pt): class-correlated binary features."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, c, (n,), generator=g)
    x = ((torch.rand(n, f, generator=g) < 0.15) | (torch.arange(f)[None, :] % c == y[:, None])).float()
    src = torch.randint(0, n, (4 * n,), generator=g)
    dst = torch.where(torch.rand(4 * n, generator=g) < 0.7, src.roll(1), torch.randint(0, n, (4 * n,), generator=g))
    ei = torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], dim=1)
    ei = ei[:, ei[0] != ei[1]]
    torch.save(Data(x=x, edge_index=ei, y=y), path)
    return path


def test_a_path_records_its_digest_and_a_changed_file_is_refused(tmp_path):
    path = synthetic_pt(tmp_path / "mine.pt")
    graph = load_dataset(path, split="fraction")
    assert graph.task == "node" and graph.info["source"]["sha256"] == sha256_file(path)
    config = {"dataset": graph.name, "data": {k: graph.info[k] for k in ("features", "split_seed", "source", "split")}}
    again = load_recorded(config)
    assert torch.equal(again.splits[0].test, graph.splits[0].test)
    synthetic_pt(path, seed=1)  # the same path, other contents
    with pytest.raises(DataError, match="changed since the run was trained"):
        load_recorded(config)


def test_split_and_task_flags_are_for_paths_only():
    with pytest.raises(DataError, match="apply to a dataset given by path"):
        load_dataset("cora", split="fraction")


def test_user_registry_adds_a_file_entry_and_a_broken_entry_breaks_only_itself(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    data = synthetic_pt(tmp_path / "data" / "mine.pt", seed=2)
    (tmp_path / "my.toml").write_text(f'''
[datasets.my-graph]
name = "MyGraph"
family = "user"
loader = "file"
task = "node"
raw_dir = "data"
urls = ["file://{tmp_path}"]
download = "single"
license = "CC0"
split = "20/30 per class"
counts = {{}}
files = {{"mine.pt" = "{sha256_file(data)}"}}

[datasets.half-done]
name = "HalfDone"

[datasets.cora]
name = "NotCora"
''')
    monkeypatch.setenv(USER_REGISTRY_ENV, str(tmp_path / "my.toml"))
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    assert {"cora", "my-graph", "half-done"} <= set(dataset_names())
    graph = load_dataset("my-graph")
    assert graph.name == "my-graph" and graph.data.num_nodes == 240
    with pytest.raises(DataError, match="'half-done' is missing field"):
        get_entry("half-done")
    with pytest.raises(DataError, match="'cora' is a built-in dataset"):
        get_entry("cora")
    data.write_bytes(b"not a graph")  # a file that is not the registered one is refused before it is read
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "fresh-cache"))
    with pytest.raises(DataError, match="checksum mismatch"):
        load_dataset("my-graph")


def test_a_run_trained_on_a_file_exports_like_any_other(tmp_path, refusal):
    path = synthetic_pt(tmp_path / "mine.pt", seed=3)
    run, out = tmp_path / "run", tmp_path / "mine.qgraph"
    train = [sys.executable, "-m", "gnn.train", "--dataset", str(path), "--model", "gcn", "--quant", "a2q",
             "--epochs", "3", "--seeds", "1", "--run-dir", str(run), "--no-progress"]
    export = [sys.executable, "-m", "quant.export", "--run", str(run), "--out", str(out)]
    res = subprocess.run(train, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    res = subprocess.run(export, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "mine gcn (a2q)" in res.stdout
    synthetic_pt(path, seed=4)
    from quant.export import main as export_main

    err = refusal(lambda: export_main(["--run", str(run), "--out", str(tmp_path / "again.qgraph")]))
    assert "changed since the run was trained" in err and len(err.splitlines()) == 1


def test_the_accelerator_model_simulates_a_graph_file(tmp_path, refusal):
    path = synthetic_pt(tmp_path / "mine.pt", seed=5)
    res = subprocess.run([sys.executable, "-m", "hw.simulate", str(path), "--out", str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "functional check ['bit-exact', 'bit-exact']" in res.stdout
    assert (tmp_path / "hw_sim_mine_mega.json").is_file()
    from hw.simulate import main as simulate_main

    err = refusal(lambda: simulate_main([str(tmp_path / "absent.npz")]))
    assert "absent.npz: no such file" in err and len(err.splitlines()) == 1


def test_a_folder_named_like_a_dataset_does_not_shadow_it(tmp_path, monkeypatch):
    (tmp_path / "cora").mkdir()
    monkeypatch.chdir(tmp_path)
    assert load_dataset("cora").name == "cora"  # the registry's, not the empty folder
    assert is_graph_path("./cora") and is_graph_path(tmp_path / "cora") and not is_graph_path("cora")
