"""The profiler on a real GPU: CUDA-event timing and the NVML energy counter, windows spanning counter updates."""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.gpu


def test_small_cnn_profile_on_the_gpu_has_energy():
    import torch

    from radt_ext.ops import catalog, profiler
    from radt_ext.ops.device import open_meter

    device = torch.device("cuda:0")
    meter, facts, reason = open_meter(device)
    assert meter is not None, reason
    try:
        net = catalog.build("small_cnn", 128, "bf16", device)
        prof = profiler.profile(net, "training", device, meter, window_s=0.1)
    finally:
        meter.close()
    t = prof.table
    assert (t.window_s >= 0.095).all() and (t.time_ms > 0).all()
    assert t.energy_mj.notna().all() and (t.power_w > 0).all()
    # the board draws at least its idle power and at most its limit over a metered window
    assert (t.power_w < facts["power_limit_w"] * 1.1).all()
    assert not math.isnan(prof.network("energy_mj"))
    # the counter is read on its own thread while chunks stay queued: the GPU never waits between chunks
    assert (t.busy > 0.9).all(), t[["op", "phase", "busy"]]
    # the driver's power samples over each window (about five in 0.1 s) agree with the counter's power
    seen = t[t.timeline_w.notna()]
    assert len(seen) >= 0.9 * len(t)
    assert ((seen.timeline_w / seen.power_w - 1).abs().median()) < 0.1, seen[["op", "power_w", "timeline_w"]]
