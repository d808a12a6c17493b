"""Bad input fails fast, before any process group or collective, with a message that says what to do."""

import pytest
import torch

from distributed.runner import DistTrainConfig, check_layout
from distributed.train import main
from gnn.data.partition import cached_partition_nodes, partition_nodes


def test_more_partitions_than_nodes(tmp_path, monkeypatch):
    monkeypatch.setenv("GNN_CACHE_DIR", str(tmp_path))
    ring = torch.tensor([[0, 1, 2, 1, 2, 0], [1, 2, 0, 0, 1, 2]])  # 3 nodes
    with pytest.raises(ValueError, match="launch at most 3 ranks"):
        check_layout(4, 4, num_nodes=3)
    check_layout(3, 3, num_nodes=3)  # one node per rank is fine
    for fn in (partition_nodes, lambda *a: cached_partition_nodes("ring3", *a)):
        with pytest.raises(ValueError, match="use at most 3 parts"):
            fn(ring, 3, 4)
    assert not (tmp_path / "partitions").exists() or not list((tmp_path / "partitions").iterdir())


def test_world_size_differs_from_partitions(monkeypatch, capsys):
    with pytest.raises(ValueError, match="--nproc-per-node 4 or pass --parts 2"):
        check_layout(2, 4)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(SystemExit) as exc:
        main(["--parts", "3"])
    assert exc.value.code == 2
    assert "--parts 3 != world size 2" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value", "valid"), [("--exchange", "int3", "fp32, fp16, int8"),
                                                      ("--grad-exchange", "bf16", "int1-2c"),
                                                      ("--quant", "int8", "a2q, degree-aware")])
def test_unknown_names_list_the_valid_ones(flag, value, valid, capsys):
    with pytest.raises(SystemExit) as exc:
        main([flag, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"invalid choice: '{value}'" in err
    for name in valid.split(", "):
        assert f"'{name}'" in err


def test_config_level_names():
    from distributed.halo import ExchangeConfig

    with pytest.raises(ValueError, match="valid codecs: fp32, fp16, fp64, int8, int4, int2, int1, int1-2c"):
        ExchangeConfig(codec="int3")
    with pytest.raises(ValueError, match="valid: none, a2q"):
        DistTrainConfig(quant="int8")
    with pytest.raises(ValueError, match="export_path needs arch 'gcn'"):
        DistTrainConfig(arch="sage", quant="a2q", export_path="x.qgraph")
    with pytest.raises(ValueError, match="crash_marker"):
        DistTrainConfig(crash_at_epoch=3)
    with pytest.raises(ValueError, match="unknown dtype 'float16'; valid: float32, float64"):
        DistTrainConfig(dtype="float16")
    with pytest.raises(ValueError, match="use exchange codec 'fp64'"):
        DistTrainConfig(dtype="float64")  # fp32 halo rows would round the float64 run
    with pytest.raises(ValueError, match="use exchange codec 'fp64'.*'fp64' / 'int1'"):
        DistTrainConfig(dtype="float64", exchange=ExchangeConfig(codec="fp64", grad_codec="int1"))
    with pytest.raises(ValueError, match="export_path needs a float32 run"):
        DistTrainConfig(dtype="float64", exchange=ExchangeConfig(codec="fp64"), quant="a2q", export_path="x.qgraph")
