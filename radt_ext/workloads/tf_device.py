"""Device choice, precision policy and the measured matmul peak, for the TensorFlow workloads."""
from __future__ import annotations

import platform
import time

from .records import say, table_peak_tflops

PRECISIONS = ("fp32", "bf16", "fp16")
POLICIES = {"fp32": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


class DeviceError(Exception):
    """The device asked for is not there; one line for the user."""


def pick_device(requested: str = "auto") -> tuple[str, str]:
    """("gpu" | "cpu", device name). Must run before TensorFlow creates any tensor: device=cpu
    hides the GPUs from TensorFlow."""
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    if requested == "cpu" and gpus:
        tf.config.set_visible_devices([], "GPU")
        gpus = []
    elif requested == "gpu" and not gpus:
        raise DeviceError("device=gpu was asked for but TensorFlow sees no GPU; use -P device=auto or cpu")
    if not gpus:
        if requested == "auto":
            say("no GPU visible to TensorFlow; running on CPU (device=cpu)")
        return "cpu", platform.processor() or platform.machine() or "cpu"
    details = tf.config.experimental.get_device_details(gpus[0])
    return "gpu", details.get("device_name", "GPU")


def set_precision(precision: str) -> str:
    """Set Keras' global dtype policy; returns its name. Call `reset_precision` when done."""
    from .tf_models import keras

    policy = POLICIES[precision]
    keras().mixed_precision.set_global_policy(policy)
    return policy


def reset_precision() -> None:
    from .tf_models import keras

    keras().mixed_precision.set_global_policy("float32")


def peak_precision(precision: str) -> str:
    # TensorFlow runs fp32 matmuls and convolutions in TF32 on Ampere and later by default.
    return "tf32" if precision == "fp32" else precision


def measured_peak_tflops(device: str, precision: str, size: int = 8192, iters: int = 20) -> tuple[float | None, str]:
    """Best matmul TFLOP/s on this GPU at the training precision (MFU's ceiling); n/a on CPU."""
    if device != "gpu":
        return None, "n/a on cpu"
    import tensorflow as tf

    dtype = {"bf16": tf.bfloat16, "fp16": tf.float16}.get(precision, tf.float32)
    try:
        with tf.device("/GPU:0"):
            a = tf.random.normal((size, size), dtype=dtype)
            b = tf.random.normal((size, size), dtype=dtype)
            for _ in range(3):
                out = tf.linalg.matmul(a, b)
            out[0, 0].numpy()  # one GPU stream: reading the last result waits for all of them
            start = time.perf_counter()
            for _ in range(iters):
                out = tf.linalg.matmul(a, b)
            out[0, 0].numpy()
            elapsed = time.perf_counter() - start
        return 2 * size**3 * iters / elapsed / 1e12, "measured"
    except (tf.errors.OpError, RuntimeError):
        name = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]).get("device_name", "")
        peak = table_peak_tflops(name, peak_precision(precision))
        return peak, "table" if peak else "unknown"
