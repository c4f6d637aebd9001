"""Names radt-ext puts into the workload's environment and onto the runs it follows.

Kept apart (no MLflow import) so that the watchdog process starts light.
"""
ENV_MONITOR_RUN = "RADT_EXT_ACTIVE"  # the run radt-ext records the whole command into; marks the workload's processes
ENV_STARTS_FILE = "RADT_EXT_STARTS_FILE"  # where the workload announces the runs it starts
TAG_MONITOR_RUN = "radt_ext.monitor_run_id"  # on a run the workload started: radt-ext's run of that command
TAG_START_ID = "radt_ext.start_id"  # on a run the workload started: the id its start was announced with
