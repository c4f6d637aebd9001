"""A sweep's first job started before MLflow is imported.

Importing MLflow and reaching the store take seconds (4 s on some GPU hosts) before a sweep knows which
of its variants are done; a queue of short jobs pays them once, first. Where the store can be read without
MLflow (a SQLite file, or one still to be made: `store_probe`) and says the first variant to run is not
done, that variant's first workload and its device listeners start now, as `radt-ext run` starts its
workload; its parent and child runs are made, and the points held so far written, when the executor
reaches it. Only an exclusive variant without host settings, on this machine's local executor.
"""
from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass

from radt_ext.errors import UsageError
from radt_ext.store.store_probe import StoreProbe, tracking_uri
from radt_ext.sweep.plan import Variant

EXECUTORS = ("local", "sequential")


@dataclass
class HeadStart:
    variant: Variant
    runner: object  # the variant's GroupRunner, its first workload running
    devices: list[str] | None  # a pooled variant's devices (the pool's first); None: the variant's own
    mlflow_loaded: bool = False  # whether MLflow was imported when the workload started (RADT_EXT_TIMINGS)
    taken: bool = False  # the executor took it over: it ends the group as usual

    def is_for(self, v: Variant) -> bool:
        return not self.taken and v.index == self.variant.index

    def take(self):
        self.taken = True
        return self.runner

    def stop(self, signum: int) -> None:
        self.runner.stop(signum)

    def release(self) -> None:
        """Never taken (the sweep stopped or failed before its turn): its workload stopped, its run spooled."""
        if not self.taken:
            self.taken = True
            self.runner.abandon(signal.SIGTERM)


def first_to_run(variants: list[Variant], probe: StoreProbe) -> Variant | None:
    """The variant the executor runs first (plan order; exclusive ones come first) when the store can tell,
    without MLflow, that it and none before it is still to run; else None."""
    for v in variants:
        done = probe.finished_with_tag(v.experiment, "sweep.hash", v.hash)
        if done is None:
            return None
        if not done:
            return v
    return None


def begin(variants: list[Variant], executor: str, echo=print) -> HeadStart | None:
    """The first variant's first workload started (a HeadStart), or None: the sweep goes the usual way.
    A GPU the plan names that this machine lacks is refused here, in one line, before anything runs."""
    if executor not in EXECUTORS or not variants or any(v.system for v in variants):
        return None  # host settings are checked, and applied, on the usual way
    try:
        probe = StoreProbe(tracking_uri())
    except UsageError:
        return None  # the usual way says what is wrong with the store
    first = first_to_run(variants, probe)
    if first is None or first.mode != "exclusive":
        return None
    probed = time.time()
    from radt_ext.sweep.variant_run import check_devices, runner_for

    check_devices(variants)
    checked = time.time()
    devices = model = None
    if first.pool:
        from radt_ext.sweep.lanes import pool_of

        pool = pool_of([v for v in variants if v.pool])
        devices = [d for d in pool.devices if d in first.pool][:first.gpus]
        model = pool.model(devices)
    runner = runner_for(None, first, probe.uri, echo=echo, devices=devices, model=model)
    runner.timings.update(store_probed=probed, devices_checked=checked)
    if not runner.head_start():
        return None
    return HeadStart(first, runner, devices, mlflow_loaded="mlflow" in sys.modules)
