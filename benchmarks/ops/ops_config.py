"""One `model:batch:precision:mode` configuration opened for the ops benchmarks: its network built and
set to the mode, a clock, and on a GPU the energy counter; closed and freed afterwards."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass
class Opened:
    model: Any
    inputs: tuple
    mode: str
    clock: Any
    meter: Any  # the GPU's EnergyCounter, None on the CPU


@contextlib.contextmanager
def opened(config: str, device) -> Iterator[Opened]:
    """The configuration ready to measure, inside `cudnn_pinned` as the profiler measures."""
    import torch

    from radt_ext.ops import catalog
    from radt_ext.ops.measure import Clock
    from radt_ext.ops.profiler import cudnn_pinned

    name, batch, precision, mode = config.split(":")
    net = catalog.build(name, int(batch), precision, device)
    meter = None
    if device.type == "cuda":
        from listeners.energy_counter import EnergyCounter

        meter = EnergyCounter()
    try:
        with cudnn_pinned():
            yield Opened(net.module.train(mode == "training"), net.inputs, mode, Clock(device), meter)
    finally:
        if meter is not None:
            meter.close()
        del net
        if device.type == "cuda":
            torch.cuda.empty_cache()
