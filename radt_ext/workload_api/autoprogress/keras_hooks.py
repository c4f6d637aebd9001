"""Keras (Keras 3 and tf_keras): a callback that `Model.fit`, `evaluate` and `predict` get added to
their `callbacks` (as MLflow's autolog adds its own; never twice, and not again to the evaluate that fit
runs for validation, which gets fit's callbacks): source `keras`.

- on_train_batch_end: `steps`, `train_batches`, `train_samples`;
- on_test_batch_end / on_predict_batch_end: `eval_batches`, `eval_samples`;
- on_epoch_begin / on_epoch_end: the epoch marks, and `epochs` at each end.

A callback is not told a batch's size, so it comes from the call's arguments: `x` with a leading
dimension (arrays, tensors, a list or dict of them) in batches of `batch_size` (32 when not given), the
last one of an epoch holding the rest (after `validation_split` takes its share); a dataset or a
generator gives batches of unknown size (`unsized_batches`). A batch index that jumps (steps_per_execution
> 1) counts every batch it passed. Imports keras or tf_keras (only once the script has), batches.py,
guard.py and records.py.
"""
from __future__ import annotations

import functools
import inspect
import math
import threading
import time

from radt_ext.workload_api.autoprogress.batches import leading_dim
from radt_ext.workload_api.autoprogress.guard import Hook
from radt_ext.workload_api.autoprogress.records import counter

SRC = "keras"
DEFAULT_BATCH = 32
HOOK = Hook("keras-callback", SRC)
_inside = threading.local()  # a patched call under way in this thread (fit's own evaluate)


class Plan:
    """The sizes of one call's batches: `n` samples in batches of `batch` (n None: unknown)."""

    def __init__(self, n: int | None, batch: int | None):
        self.n = n
        self.batch = batch or DEFAULT_BATCH
        self.full = math.ceil(n / self.batch) if n else 0  # batches in one pass over the data

    def size(self, index: int) -> int | None:
        if not self.n:
            return None
        return min(self.batch, self.n - (index % self.full) * self.batch)


class Counting:
    """What the callback does; the Keras callback class of each Keras forwards its methods here."""

    def __init__(self):
        self.counter = counter(SRC)
        self.plans = {"train": Plan(None, None), "eval": Plan(None, None)}
        self.seen = {"train": 0, "eval": 0}  # batches counted in the current epoch / evaluation
        self.lock = threading.Lock()

    def begin(self, kind: str) -> None:
        self.seen[kind] = 0

    def batch_end(self, kind: str, index: int) -> None:
        with self.lock:
            plan, first = self.plans[kind], self.seen[kind]
            if index < first:  # a new run of batches this callback was not told of
                first = index
            batches = index + 1 - first
            self.seen[kind] = index + 1
            values = self.counter.values
            for i in range(first, index + 1):
                n = plan.size(i)
                if n is None:
                    values["unsized_batches"] += 1
                else:
                    values[f"{kind}_samples"] += n
            values[f"{kind}_batches"] += batches
            if kind == "train":
                values["steps"] += batches
            self.counter.touch(time.time())

    def epoch_begin(self) -> None:
        c = self.counter
        c.epoch += 1
        self.seen["train"] = 0
        c.mark(c.epoch, "start", time.time())

    def epoch_end(self) -> None:
        c = self.counter
        now = time.time()
        c.values["epochs"] += 1
        c.last = now
        c.mark(c.epoch, "end", now)


_counting: Counting | None = None


def callback_class(keras_module):
    """A Callback subclass of this Keras whose methods count (through `Counting`)."""
    base = keras_module.callbacks.Callback

    class RadtExtProgress(base):
        async_safe = True  # Keras 3: counting never reads the logs, batches may end off the main thread
        _supports_tf_logs = True  # tf_keras: no conversion of the logs for us

        def on_epoch_begin(self, epoch, logs=None):
            HOOK.call(_counting.epoch_begin)

        def on_epoch_end(self, epoch, logs=None):
            HOOK.call(_counting.epoch_end)

        def on_train_begin(self, logs=None):
            HOOK.call(_counting.begin, "train")

        def on_train_batch_end(self, batch, logs=None):
            HOOK.call(_counting.batch_end, "train", batch)

        def on_test_begin(self, logs=None):
            HOOK.call(_counting.begin, "eval")

        def on_test_batch_end(self, batch, logs=None):
            HOOK.call(_counting.batch_end, "eval", batch)

        def on_predict_begin(self, logs=None):
            HOOK.call(_counting.begin, "eval")

        def on_predict_batch_end(self, batch, logs=None):
            HOOK.call(_counting.batch_end, "eval", batch)

    return RadtExtProgress


def install(keras_module) -> None:
    global _counting
    if _counting is None:
        _counting = Counting()
    cls = callback_class(keras_module)
    model = keras_module.Model
    for method, kind in (("fit", "train"), ("evaluate", "eval"), ("predict", "eval")):
        HOOK.patch(model, method, lambda original, kind=kind: _wrap(original, kind, cls))
    counter(SRC).installed()


def _wrap(original, kind: str, cls):
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapped(self, *args, **kwargs):
        nested = getattr(_inside, "depth", 0)
        if HOOK.on:
            try:
                args, kwargs = _prepare(signature, self, args, kwargs, kind, cls, add=not nested)
            except Exception as exc:  # noqa: BLE001 - the call goes on without us
                HOOK.fail(exc)
        _inside.depth = nested + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            _inside.depth = nested
    return wrapped


def _prepare(signature, model, args, kwargs, kind: str, cls, add: bool):
    """The call's plan of batch sizes, and its arguments with our callback added (unless `add` is off)."""
    HOOK.check_fault()
    try:
        bound = signature.bind(model, *args, **kwargs)
    except TypeError:  # the script's own mistake: Keras says what it is
        return args, kwargs
    arguments = bound.arguments
    n = leading_dim(arguments.get("x"))
    split = arguments.get("validation_split") or 0.0
    if n is not None and split:
        n = int(math.floor(n * (1.0 - split)))
    _counting.plans[kind] = Plan(n, arguments.get("batch_size"))
    if add:
        callbacks = arguments.get("callbacks")
        present = callbacks.callbacks if hasattr(callbacks, "callbacks") else list(callbacks or [])
        if not any(isinstance(cb, cls) for cb in present):
            if hasattr(callbacks, "callbacks"):  # a CallbackList the caller made
                callbacks.callbacks.append(cls())
            else:
                arguments["callbacks"] = [*present, cls()]
    return bound.args[1:], bound.kwargs
