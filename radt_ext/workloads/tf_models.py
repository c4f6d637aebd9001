"""Keras model builders (architectures only: weights=None, nothing downloads) and model facts:
FLOPs per sample, size in bytes, parameter and non-zero parameter counts.

Every model ends in a float32 logits layer, so a mixed-precision policy keeps the loss in fp32.
"""
from __future__ import annotations

import numpy as np

MODELS = ("small_cnn", "mobilenet_v2", "resnet50", "mlp")


def keras():
    """The Keras that `tf.keras` names: tf-keras (Keras 2) when tf_train set TF_USE_LEGACY_KERAS=1,
    which TF Model Optimization needs; Keras 3 otherwise."""
    import tensorflow as tf

    return tf.keras


def build(name: str, num_classes: int, input_shape: tuple[int, ...], width: int = 32):
    k = keras()
    inputs = k.Input(shape=input_shape)
    if name == "small_cnn":
        # Same layout as the torch SmallCNN: three conv-BN-ReLU stages, two max-pools, one linear head.
        x = inputs
        for i, channels in enumerate((width, width * 2, width * 4)):
            x = k.layers.Conv2D(channels, 3, padding="same")(x)
            x = k.layers.BatchNormalization()(x)
            x = k.layers.ReLU()(x)
            if i > 0:
                x = k.layers.MaxPooling2D(2)(x)
        x = k.layers.Flatten()(x)
    elif name == "mlp":
        x = k.layers.Flatten()(inputs)
        for _ in range(3):
            x = k.layers.Dense(width * 32, activation="relu")(x)
    elif name in ("mobilenet_v2", "resnet50"):
        if min(input_shape[:2]) < 32:
            raise ValueError(f"{name} halves the image five times; use images of at least 32x32 (dataset=digits, not digits8)")
        app = k.applications.MobileNetV2 if name == "mobilenet_v2" else k.applications.ResNet50
        x = app(weights=None, include_top=False, input_shape=input_shape, pooling="avg")(inputs)
    else:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    logits = k.layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return k.Model(inputs, logits, name=name)


def _layers(model):
    for layer in model.layers:
        if hasattr(layer, "layers"):  # nested functional model (keras.applications) or a prune wrapper's model
            yield from _layers(layer)
        else:
            yield layer


def forward_flops_per_sample(model) -> float:
    """Multiply-adds x2 of the convolution and dense layers for one sample (the layers that
    dominate; activations, norms and pools are left out, as FLOP counters usually do)."""
    flops = 0.0
    for layer in _layers(model):
        inner = getattr(layer, "layer", layer)  # a pruning wrapper holds the real layer
        kind = type(inner).__name__
        try:
            out = layer.output_shape if hasattr(layer, "output_shape") else layer.output.shape
        except (AttributeError, RuntimeError):
            continue
        if isinstance(out, list):
            out = out[0]
        if kind in ("Conv2D", "DepthwiseConv2D"):
            kernel = inner.depthwise_kernel if kind == "DepthwiseConv2D" else inner.kernel
            kh, kw, cin, _ = kernel.shape
            per_output = kh * kw * (1 if kind == "DepthwiseConv2D" else cin)
            flops += 2.0 * per_output * float(np.prod(out[1:]))
        elif kind == "Dense":
            flops += 2.0 * inner.kernel.shape[0] * inner.kernel.shape[1]
    return flops


def param_counts(model) -> tuple[int, int]:
    """(parameters, non-zero parameters) over the trainable weights (the torch family's
    parameters; BatchNorm moving statistics are buffers there and left out here too)."""
    total = nonzero = 0
    for w in model.trainable_weights:
        values = w.numpy()
        total += values.size
        nonzero += int(np.count_nonzero(values))
    return total, nonzero


def size_bytes(model) -> int:
    """Bytes of every weight, trainable or not, at its stored dtype (what a checkpoint weighs)."""
    return int(sum(w.numpy().nbytes for w in model.weights))


def gzip_size_bytes(model) -> int:
    """Bytes of the weights after gzip: where unstructured sparsity shows as a smaller download."""
    import gzip

    raw = b"".join(np.ascontiguousarray(w.numpy()).tobytes() for w in model.weights)
    return len(gzip.compress(raw, compresslevel=6))
