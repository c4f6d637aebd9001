"""The size of a batch: the leading dimension of the first tensor in it.

A batch may be a tensor, a tuple or list, a dict or other mapping (Hugging Face's BatchEncoding), nested
a few levels, or any object with a `.shape` (NumPy, TensorFlow); None when no sized tensor is found
(the caller counts it as unsized). Imports nothing.
"""
from __future__ import annotations

from collections.abc import Mapping

MAX_DEPTH = 4
MAX_ITEMS = 16  # items looked at in one container: a batch's first tensor comes early


def leading_dim(batch, depth: int = 0) -> int | None:
    shape = getattr(batch, "shape", None)
    if shape is not None:
        try:
            return int(shape[0]) if len(shape) else None
        except TypeError:  # a dimension not known yet (a symbolic shape)
            return None
    if depth >= MAX_DEPTH or isinstance(batch, (str, bytes)):
        return None
    if isinstance(batch, Mapping):
        items = batch.values()
    elif isinstance(batch, (tuple, list)):
        items = batch
    else:
        return None
    for i, item in enumerate(items):
        if i >= MAX_ITEMS:
            break
        found = leading_dim(item, depth + 1)
        if found is not None:
            return found
    return None
