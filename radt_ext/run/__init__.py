"""A run's lifecycle: the workload started, signalled and reaped, its MLflow run opened and closed.
`session.py` is the centre (one command, one run: checks, start, wait, finish, exit code);
`workload_runs.py` follows the runs the workload starts itself; `watchdog.py` ends everything as KILLED
when radt-ext is killed outright; `spills.py` is where the session's runs spill their full-rate timelines
and what the watchdog logs of them after such a kill; `reaper.py` follows and ends the process tree; `signals.py` turns
SIGINT/SIGTERM into a clean stop; `streams.py` and `stderr_tail.py` deal with the workload's output;
`tracking.py` + `monitor_process.py` are `radt_ext.track()` (a monitor in a separate process);
`backend.py` is the MLflow project backend (`mlflow run --backend radt-ext`).

May import `radt_ext.sampling`, `radt_ext.store`, `radt_ext.figures`, `radt_ext.report`,
`radt_ext.workload_api`, `radt_ext.errors` and `listeners`; collocation, sweeps and packing build on it.
"""
