"""TFLite post-training quantization and inference through the TFLite interpreter.

static_int8: full-integer int8 (weights and activations, calibrated on a representative
dataset; the model keeps float32 input and output with one quantize / dequantize at the ends).
dynamic_int8: int8 weights, activations quantized on the fly. float16: fp16 weights.
The fp32 baseline is the same model converted without quantization and timed in the same
interpreter, so the speed-up compares like with like.
"""
from __future__ import annotations

import time

import numpy as np

from radt_ext.workload_api.progress import log_progress

from .records import latency_summary

SCHEMES = ("static_int8", "dynamic_int8", "float16")


def convert(model, scheme: str | None, calibration=None, calibration_batches: int = 16) -> bytes:
    """TFLite flatbuffer of a Keras model; scheme None = plain fp32."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if scheme is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if scheme == "static_int8":
        def representative():
            for images, _ in calibration.take(calibration_batches):
                yield [tf.cast(images, tf.float32)]

        converter.representative_dataset = representative
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    elif scheme == "float16":
        converter.target_spec.supported_types = [tf.float16]
    return converter.convert()


def interpreter(flatbuffer: bytes):
    """LiteRT's interpreter where installed (TensorFlow's own is deprecated), else tf.lite's."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        import warnings

        import tensorflow as tf

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return tf.lite.Interpreter(model_content=flatbuffer)
    return Interpreter(model_content=flatbuffer)


class Runner:
    """Runs batches of any size through one interpreter, resizing its input when the size changes."""

    def __init__(self, flatbuffer: bytes):
        self.interp = interpreter(flatbuffer)
        self.input = self.interp.get_input_details()[0]
        self.output = self.interp.get_output_details()[0]
        self.batch = None

    def __call__(self, images: np.ndarray) -> np.ndarray:
        if images.shape[0] != self.batch:
            self.interp.resize_tensor_input(self.input["index"], list(images.shape))
            self.interp.allocate_tensors()
            self.batch = images.shape[0]
        self.interp.set_tensor(self.input["index"], images.astype(self.input["dtype"], copy=False))
        self.interp.invoke()
        return self.interp.get_tensor(self.output["index"])


def evaluate(runner: Runner, batches) -> tuple[float, float]:
    """(mean cross-entropy loss, accuracy) over a tf.data set of (images, labels)."""
    total_loss, correct, seen = 0.0, 0, 0
    for images, labels in batches.as_numpy_iterator():
        logits = runner(images).astype(np.float64)
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        total_loss -= float(log_probs[np.arange(len(labels)), labels].sum())
        correct += int((logits.argmax(1) == labels).sum())
        seen += len(labels)
    return total_loss / max(seen, 1), correct / max(seen, 1)


def latency(runner: Runner, example: np.ndarray, iters: int = 30, warmup: int = 5, prefix: str = "inference") -> dict[str, float]:
    """p50/p95/p99 of `iters` interpreter calls on one batch, and the phase's wall-clock bounds."""
    for _ in range(warmup):
        runner(example)
    times = []
    start_wall = time.time()
    for _ in range(iters):
        t0 = time.perf_counter()
        runner(example)
        times.append(time.perf_counter() - t0)
        log_progress(inference_samples=example.shape[0])
    out = latency_summary(times, example.shape[0], prefix)
    out[f"{prefix}_start_time_s"] = start_wall
    out[f"{prefix}_end_time_s"] = time.time()
    return out
