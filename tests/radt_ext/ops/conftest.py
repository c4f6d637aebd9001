import pytest
import torch


@pytest.fixture
def one_thread():
    """Profile on one CPU thread: times steadier on a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
