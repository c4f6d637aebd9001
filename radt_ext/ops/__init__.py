"""Per-operation time and energy: profile a network op by op (and whole), collect the profiles into
a dataset, fit per-op-type models on it, and predict a workload's time and energy on other GPUs.

profile (capture → measure → cost) → store (MLflow runs, CSV) → dataset → predict → best-gpu.
"""
