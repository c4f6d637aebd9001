"""MLflow metric steps: source `mlflow-steps`, `steps` = the highest metric step the script has logged
plus one (steps 0..9 logged: 10 steps), `t` = when the call that raised it was made (the store's write
not counted).

`MlflowClient.log_metric` and `log_batch` (which the fluent `mlflow.log_metric(s)` go through) are
wrapped: the call runs first, unchanged, and only a call that returned is counted; nothing else is
asked of the store. A metric logged without a step has step 0. Imports mlflow's client (only once the
script has imported mlflow), guard.py and records.py.
"""
from __future__ import annotations

import functools
import time

from radt_ext.workload_api.autoprogress.guard import Hook
from radt_ext.workload_api.autoprogress.records import counter

SRC = "mlflow-steps"
HOOK = Hook("mlflow-steps", SRC)


def install(mlflow_module) -> None:
    from mlflow.tracking.client import MlflowClient

    c = counter(SRC)
    HOOK.patch(MlflowClient, "log_metric", lambda original: _wrap(original, _metric_step, c))
    HOOK.patch(MlflowClient, "log_batch", lambda original: _wrap(original, _batch_step, c))
    c.installed()


def _metric_step(args, kwargs):
    # log_metric(self, run_id, key, value, timestamp=None, step=None, ...)
    return (kwargs["step"] if "step" in kwargs else (args[5] if len(args) > 5 else None)) or 0


def _batch_step(args, kwargs):
    # log_batch(self, run_id, metrics=(), params=(), tags=(), ...)
    metrics = kwargs["metrics"] if "metrics" in kwargs else (args[2] if len(args) > 2 else ())
    return max((m.step or 0 for m in metrics or ()), default=None)


def _wrap(original, step_of, c):
    @functools.wraps(original)
    def wrapped(*args, **kwargs):
        called = time.time()  # as the metric's own timestamp, not after the store's write
        result = original(*args, **kwargs)
        if HOOK.on:
            try:
                HOOK.check_fault()
                step = step_of(args, kwargs)
                if step is not None:
                    steps = int(step) + 1
                    if steps > c.values["steps"]:
                        c.values["steps"] = steps
                        c.touch(called)
            except Exception as exc:  # noqa: BLE001 - never into the script
                HOOK.fail(exc)
        return result
    return wrapped
