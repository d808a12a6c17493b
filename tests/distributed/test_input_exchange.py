"""The one-time exchange of layer 0's input halo rows: by default with the narrowest codec that keeps them exact
(binary bag-of-words rows: int1), so a run equals the fp32-exchange run bitwise with 24x fewer setup bytes here;
a forced lossy codec changes the run."""

from dataclasses import replace

import pytest
import torch
from torch_geometric.data import Data

from distributed import codecs
from distributed.launch import spawn
from distributed.runner import DistTrainConfig, train_many


@pytest.fixture(scope="module")
def binary_graph(tmp_path_factory):
    """A seeded two-community graph with binary features (as Amazon's or Coauthor's), saved as a .pt file."""
    g = torch.Generator().manual_seed(0)
    n, f = 400, 96
    y = torch.arange(n) % 2
    src, dst = torch.randint(0, n, (2, 3000), generator=g)
    keep = (y[src] == y[dst]) | (torch.rand(3000, generator=g) < 0.2)
    ei = torch.stack([src[keep], dst[keep]])
    x = (torch.rand(n, f, generator=g) < 0.08).float()
    x[torch.arange(n), y * 3] = 1.0  # a label word
    path = tmp_path_factory.mktemp("graph") / "binary.pt"
    torch.save(Data(x=x, edge_index=torch.cat([ei, ei.flip(0)], dim=1), y=y), path)
    return path


def test_auto_input_codec_is_exact_and_narrow(binary_graph, tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path / "cache"))
    base = DistTrainConfig(dataset=str(binary_graph), num_parts=2, hidden_dim=16, epochs=4, log_every=0,
                           dropout=0.0, sparse_input=False)
    cfgs = [base, replace(base, input_codec="fp32"), replace(base, input_codec="int8")]
    for auto, fp32, int8 in spawn(train_many, 2, cfgs, timeout_s=600):
        assert (auto["input_codec"], fp32["input_codec"], int8["input_codec"]) == ("int1", "fp32", "int8")
        assert [h["loss"] for h in auto["history"]] == [h["loss"] for h in fp32["history"]]
        for k, v in fp32["state_dict"].items():
            assert torch.equal(auto["state_dict"][k], v), k
        rows = auto["setup_bytes"] // codecs.row_bytes("int1", 96)  # 12 B of bits + 4 B of fp16 min/step per row
        assert auto["setup_bytes"] == rows * 16 and fp32["setup_bytes"] == rows * codecs.row_bytes("fp32", 96)
        assert [h["loss"] for h in int8["history"]] != [h["loss"] for h in fp32["history"]]  # lossy: 0/1 off grid
