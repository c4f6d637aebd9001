"""smi listener against the real nvidia-smi (GPU machines only): readings arrive line by line through the
pipe while the tool runs, not in one burst when it is stopped."""
from __future__ import annotations

import shutil
import time

import pytest

from listeners.base import Target
from listeners.smi import SmiListener


@pytest.mark.gpu
def test_real_nvidia_smi_streams_through_the_pipe():
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi not on PATH")
    target = Target(cuda_visible_devices="0")
    assert SmiListener.probe(target) is None
    listener = SmiListener(target, 0.1)
    listener.open()
    batches = []
    try:
        for _ in range(10):
            time.sleep(0.2)
            batches.append(listener.sample())
    finally:
        listener.close()
    readings = [r for batch in batches for r in batch]
    assert len(readings) >= 10
    assert sum(1 for batch in batches if batch) >= 6  # a flushed stream, not one block at the end
    assert {"smi_gpu0_power_w", "smi_gpu0_util_pct", "smi_gpu0_sm_clock_mhz"} <= set(readings[-1].values)
    assert abs(readings[-1].time - time.time()) < 5
    assert listener.stream.returncode is not None
    print(f"{len(readings)} readings in {sum(1 for b in batches if b)}/10 batches; fields {listener.tags()}")
