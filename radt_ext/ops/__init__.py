"""Per-operation time and energy: profile a network op by op (and whole), collect the profiles into
a dataset, fit per-op-type models on it, and predict a workload's time and energy on other GPUs.

profile (capture → measure → cost) → store (MLflow runs, CSV) → dataset → predict → best-gpu.

May import `radt_ext.store`, `radt_ext.workloads`, `radt_ext.errors` and `listeners`.
"""

WINDOW_S = 0.1  # an operation's window: one update period of a Hopper GPU's energy counter
NET_WINDOW_S = 0.3  # a network round's window: several steps, so no part of a step weighs more than another
