"""Device choice, precision switches and the measured matmul peak, for the torch workloads."""
from __future__ import annotations

import contextlib
import time

import torch

from .records import say, table_peak_tflops

PRECISIONS = ("fp32", "fp32-strict", "tf32", "bf16", "fp16")


def pick_device(requested: str = "auto") -> torch.device:
    """CUDA when present (or asked for), else CPU, saying so in one line."""
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        say("no CUDA GPU found; running on CPU (device=cpu)")
        return torch.device("cpu")
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("radt-ext: device=cuda was asked for but no CUDA GPU is visible; use -P device=auto or cpu")
    return device


def compute_capability(device: torch.device) -> tuple[int, int] | None:
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_capability(device)


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine() or "cpu"


def set_matmul_precision(precision: str) -> None:
    """fp32 = PyTorch's default (TF32 convolutions, full fp32 matmuls); fp32-strict = no TF32
    anywhere; tf32 = TF32 for both. bf16/fp16 keep the default for what autocast leaves in fp32."""
    conv_tf32, matmul_tf32 = {"fp32-strict": (False, False), "tf32": (True, True)}.get(precision, (True, False))
    torch.backends.cudnn.allow_tf32 = conv_tf32
    torch.backends.cuda.matmul.allow_tf32 = matmul_tf32


def autocast(device: torch.device, precision: str):
    """Autocast context for bf16/fp16, a no-op otherwise."""
    if precision in ("bf16", "fp16"):
        dtype = torch.bfloat16 if precision == "bf16" else torch.float16
        return torch.autocast(device_type=device.type, dtype=dtype)
    return contextlib.nullcontext()


def grad_scaler(device: torch.device, precision: str):
    """fp16 needs loss scaling to keep small gradients; bf16 and fp32 do not."""
    return torch.amp.GradScaler(device.type, enabled=(precision == "fp16"))


def start_device(device: torch.device) -> None:
    """Create the CUDA context now (a start-up phase of its own), not inside the first allocation."""
    if device.type == "cuda":
        torch.zeros(1, device=device)
        torch.cuda.synchronize(device)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_precision(precision: str) -> str:
    # Default fp32 runs its convolutions in TF32, so TF32 is its ceiling; strict fp32 is plain fp32.
    return {"fp32": "tf32", "fp32-strict": "fp32", "tf32": "tf32"}.get(precision, precision)


def measured_peak_tflops(device: torch.device, precision: str, size: int = 8192, iters: int = 20) -> tuple[float | None, str]:
    """Best matmul TFLOP/s reached on this GPU at the training precision, and where it came from.

    A short square matmul is a practical ceiling for model-FLOPs utilisation; on CPU there is
    no meaningful peak to compare with, so MFU is n/a there.
    """
    if device.type != "cuda":
        return None, "n/a on cpu"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = peak_precision(precision) == "tf32"
    try:
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        for _ in range(3):
            a @ b
        synchronize(device)
        start = time.perf_counter()
        for _ in range(iters):
            a @ b
        synchronize(device)
        elapsed = time.perf_counter() - start
        del a, b
        return 2 * size**3 * iters / elapsed / 1e12, "measured"
    except RuntimeError:
        peak = table_peak_tflops(device_name(device), peak_precision(precision))
        return peak, "table" if peak else "unknown"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
