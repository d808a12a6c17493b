"""Shared fixtures. Tests run offline: datasets come from the mirror beside the checkout (or GNN_DATA_ROOT)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _deterministic_threads():
    torch.manual_seed(0)
    yield


@pytest.fixture(scope="session")
def cora():
    from gnn.data.loaders import load_dataset

    return load_dataset("cora")


@pytest.fixture
def refusal(capsys):
    """refusal(call) -> stderr: runs ``call()`` (an entry point's main in this process), asserts it refused the
    command line with exit status 2 as every entry point must, and returns what it printed on stderr."""

    def run(call) -> str:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            call()
        assert exit_info.value.code == 2, exit_info.value.code
        return capsys.readouterr().err

    return run
