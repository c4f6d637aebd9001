"""Inference measurement: accuracy on the validation set and per-batch latency."""
from __future__ import annotations

import contextlib
import time

import torch

from radt_ext.workload_api.progress import log_progress

from .records import latency_summary


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate(model, batches, device: torch.device, context=contextlib.nullcontext, dtype=None) -> tuple[float, float]:
    """(mean cross-entropy loss, accuracy) of `model` over `batches`."""
    model.eval()
    total_loss, correct, seen = 0.0, 0, 0
    with torch.no_grad(), context():
        for batch in batches:
            *inputs, target = (t.to(device, non_blocking=True) for t in batch)
            if dtype is not None:
                inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
            logits = model(*inputs).float()
            total_loss += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
            correct += (logits.argmax(1) == target).sum().item()
            seen += target.numel()
    return total_loss / max(seen, 1), correct / max(seen, 1)


def latency(model, example: tuple[torch.Tensor, ...], device: torch.device, iters: int = 30, warmup: int = 5,
            context=contextlib.nullcontext, prefix: str = "inference") -> dict[str, float]:
    """Time `iters` forward passes of one batch; p50/p95/p99 latency and throughput, plus the
    phase's wall-clock bounds so the session's power samples can be attributed to it."""
    model.eval()
    batch = example[0].shape[0]
    times = []
    with torch.no_grad(), context():
        for _ in range(warmup):
            model(*example)
        _sync(device)
        start_wall = time.time()
        for _ in range(iters):
            t0 = time.perf_counter()
            model(*example)
            _sync(device)
            times.append(time.perf_counter() - t0)
            log_progress(inference_samples=batch)
        end_wall = time.time()
    out = latency_summary(times, batch, prefix)
    out[f"{prefix}_start_time_s"] = start_wall
    out[f"{prefix}_end_time_s"] = end_wall
    return out
