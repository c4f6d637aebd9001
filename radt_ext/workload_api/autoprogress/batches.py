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
    kind = type(batch)
    if kind is tuple or kind is list:  # the common batches first: no attribute look-up that fails
        items = batch
    elif kind is dict:
        items = batch.values()
    else:
        shape = getattr(batch, "shape", None)
        if shape is not None:
            try:
                first = shape[0] if len(shape) else None
            except TypeError:  # a shape of unknown rank
                return None
            return first if isinstance(first, int) else None  # not a dimension unknown yet, nor a traced one
        if isinstance(batch, Mapping):
            items = batch.values()
        elif isinstance(batch, (tuple, list)) and not isinstance(batch, (str, bytes)):
            items = batch
        else:
            return None
    if depth >= MAX_DEPTH:
        return None
    for i, item in enumerate(items):
        if i >= MAX_ITEMS:
            break
        found = leading_dim(item, depth + 1)
        if found is not None:
            return found
    return None
