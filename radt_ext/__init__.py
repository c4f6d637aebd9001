"""radt-ext: record what the hardware did during every MLflow run.

    radt-ext run -- python train.py          # command line
    with radt_ext.track(): train()           # inside a script
    radt_ext.log_progress(samples=batch)     # from the workload: throughput, J/sample
    with radt_ext.phase("train"): ...        # the active phase the summaries are taken over

The packages, from the bottom up (each one's docstring says what it may import; docs/architecture.md
draws them): `workload_api` (what runs inside the workload), `figures` (summaries, active phase,
energy), `store` (the way to the MLflow store), `sampling` (monitor and recorder), `report`, `run`
(the run's lifecycle: session, watchdog, `track()`, the project backend), `collocation`, `sweep`,
`packing`, `compare`, `ops`, `workloads` (the recipes' training code); `cli.py` on top.
"""
from radt_ext.workload_api.progress import log_progress, phase

__version__ = "0.1.0"


def track(*args, **kwargs):
    from radt_ext.run.tracking import track as _track

    return _track(*args, **kwargs)


track.__doc__ = "Sample the hardware while a `with` block runs; see radt_ext.run.tracking.track."

__all__ = ["log_progress", "phase", "track", "__version__"]
