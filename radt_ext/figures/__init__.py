"""The figures of a run, computed from the readings as they stream by: `summaries.py` (cumulative
checkpoints whose differences give any window's integral, mean and peak; the `summary/*` names),
`active.py` (the run's active phase: phase marks, progress, its own logged metrics, or the whole run),
`energy.py` (any span's energy from the `gpu{i}_energy_j` series), `summary_names.py` (older runs'
summary names read as today's), `repeats.py` (a setting's repeats: mean, 95 % Student-t interval,
whether a difference lies within the noise).

Pure computation: imports only `radt_ext.workload_api` (the progress marks the active phase is read
from); no MLflow, no hardware.
"""
