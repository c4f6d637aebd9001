"""Magnitude pruning with TF Model Optimization's `prune_low_magnitude`.

TF Model Optimization works on Keras 2 only, so the TensorFlow family runs on tf-keras
(`TF_USE_LEGACY_KERAS=1`, set by tf_train before TensorFlow loads). `semi24` asks
`prune_low_magnitude` for a 2:4 pattern (`sparsity_m_by_n`); TensorFlow has no 2:4 sparse
kernels, so it changes accuracy and the non-zero count, not speed.
"""
from __future__ import annotations

import importlib.util

METHODS = ("unstructured", "semi24")


def missing() -> str | None:
    """Why pruning cannot run here (one line), or None."""
    lacking = [name for name, module in (("tf-keras", "tf_keras"), ("tensorflow-model-optimization", "tensorflow_model_optimization"))
               if importlib.util.find_spec(module) is None]
    if lacking:
        return (f"variant=pruned needs {' and '.join(lacking)} (TF Model Optimization works on Keras 2 only); "
                "install them with pip install 'radt-ext[tensorflow]'")
    return None


def keras_problem() -> str | None:
    """Why pruning cannot run in this process (TensorFlow already loaded with Keras 3), or None."""
    from .tf_models import keras

    if not keras().__name__.startswith("tf_keras"):
        return ("variant=pruned needs tf-keras, but TensorFlow is using Keras 3 here; "
                "leave TF_USE_LEGACY_KERAS unset or set it to 1")
    return None


def _prunable_24(layer) -> bool:
    # 2:4 groups run along the kernel's input dimension, which must split into groups of four.
    kernel = getattr(layer, "kernel", None)
    return kernel is not None and kernel.shape[-2] % 4 == 0


def wrap(model, method: str, sparsity: float, steps: int):
    """The model with its conv and dense layers wrapped for pruning, and the callbacks `fit` needs.

    Unstructured: sparsity ramps from 0 to the target over the first half of the fine-tuning
    steps (polynomial decay), then masks stay fixed while the surviving weights recover.
    semi24: a fixed 2:4 mask from the first step, on the layers whose inputs split into fours.
    """
    import tensorflow_model_optimization as tfmot

    from .tf_models import keras

    k = keras()
    sparsity_api = tfmot.sparsity.keras
    if method == "semi24":
        schedule = sparsity_api.ConstantSparsity(0.5, begin_step=0, frequency=1)
        pick = lambda layer: _prunable_24(layer) and isinstance(layer, (k.layers.Conv2D, k.layers.Dense))  # noqa: E731
        kwargs = {"sparsity_m_by_n": (2, 4)}
    else:
        end = max(1, steps // 2)
        schedule = sparsity_api.PolynomialDecay(0.0, sparsity, begin_step=0, end_step=end, frequency=max(1, end // 4))
        pick = lambda layer: isinstance(layer, (k.layers.Conv2D, k.layers.Dense))  # noqa: E731
        kwargs = {}
    wrapped = []

    def clone(layer):
        if pick(layer):
            wrapped.append(layer.name)
            return sparsity_api.prune_low_magnitude(layer, pruning_schedule=schedule, **kwargs)
        return layer  # reused as it is: the trained weights carry over

    pruned = k.models.clone_model(model, clone_function=clone)
    return pruned, wrapped, [sparsity_api.UpdatePruningStep()]


def strip(model):
    """The plain Keras model with the masks applied to the weights for good."""
    import tensorflow_model_optimization as tfmot

    return tfmot.sparsity.keras.strip_pruning(model)
