"""What runs inside the workload's own process: `log_progress` and `phase` (progress.py), the id of
radt-ext's run (`markers.monitor_run_id`, with the environment and tag names radt-ext and the workload
share), and the MLflow run context provider (run_context.py) that tags and announces the runs the
workload starts itself.

Imports nothing of radt_ext outside this package and no MLflow at import time: it is loaded into every
workload, so it stays light.
"""
