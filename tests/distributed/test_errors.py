"""Bad input fails fast, before any process group or collective, with a message that says what to do."""

import pytest
import torch

from distributed.halo import ExchangeConfig
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


@pytest.mark.parametrize(("make", "kwargs", "match"), [
    (ExchangeConfig, {"codec": "int3"}, "valid codecs: fp32, fp16, fp64, int8, int4, int2, int1, int1-2c"),
    (ExchangeConfig, {"sync_every": 5}, "pipeline"),
    (DistTrainConfig, {"quant": "int8"}, "valid: none, a2q, degree-aware, dq-int8, dq-int4"),
    (DistTrainConfig, {"arch": "sage", "quant": "a2q", "export_path": "x.qgraph"}, "export_path needs arch 'gcn'"),
    (DistTrainConfig, {"crash_at_epoch": 3}, "crash_marker"),
    (DistTrainConfig, {"resume": True}, "checkpoint_dir"),
    (DistTrainConfig, {"device": "tpu"}, "valid: cpu, cuda"),
    (DistTrainConfig, {"device": "cuda", "quant": "a2q"}, "use device 'cpu' with --quant"),
    (DistTrainConfig, {"dtype": "float16"}, "unknown dtype 'float16'; valid: float32, float64"),
    # fp32 halo rows would round the float64 run
    (DistTrainConfig, {"dtype": "float64"}, "use exchange codec 'fp64'"),
    (DistTrainConfig, {"dtype": "float64", "exchange": ExchangeConfig(codec="fp64", grad_codec="int1")},
     "use exchange codec 'fp64'.*'fp64' / 'int1'"),
    (DistTrainConfig, {"dtype": "float64", "exchange": ExchangeConfig(codec="fp64"), "quant": "a2q",
                       "export_path": "x.qgraph"}, "export_path needs a float32 run"),
])
def test_config_errors_name_the_fix(make, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make(**kwargs)
