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
