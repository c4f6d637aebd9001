"""Sampling the hardware for a run: `monitor.py` (one thread samples every listener at its own
interval), `recorder.py` (the listeners chosen; monitor → point filter → the run's timeline artifact and,
shaped, the writer; the streaming summaries beside them, fed every reading), `machine.py` (the `machine.*` tags: CPU, GPUs, software versions).

May import `listeners`, `radt_ext.store`, `radt_ext.figures` and `radt_ext.errors`; never the run's
lifecycle above it.
"""
