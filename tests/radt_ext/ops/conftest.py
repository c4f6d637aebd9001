from pathlib import Path

import pytest
import torch

from radt_ext.ops import dataset as ds, predict

SLICE = Path(__file__).with_name("data") / "slice.csv.gz"  # a slice of the real H100/H200 dataset


@pytest.fixture
def one_thread():
    """Profile on one CPU thread: times steadier on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def data():
    """The dataset slice, loaded once per test module."""
    return ds.load(SLICE)


@pytest.fixture(scope="module")
def models(data):
    """The predictor fitted on the slice."""
    return predict.fit(data)
