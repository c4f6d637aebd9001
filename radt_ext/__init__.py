"""radt-ext: record what the hardware did during every MLflow run.

    radt-ext run -- python train.py          # command line
    with radt_ext.track(): train()           # inside a script
    radt_ext.log_progress(samples=batch)     # from the workload: throughput, J/sample
    with radt_ext.phase("train"): ...        # the active phase the summaries are taken over
"""
from radt_ext.progress import log_progress, phase

__version__ = "0.1.0"


def track(*args, **kwargs):
    from radt_ext.tracking import track as _track

    return _track(*args, **kwargs)


track.__doc__ = "Sample the hardware while a `with` block runs; see radt_ext.tracking.track."

__all__ = ["log_progress", "phase", "track", "__version__"]
