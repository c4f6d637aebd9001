"""Training code the recipes call: models, data, variants, the training loop and its records.

Framework-neutral record keeping (MLflow params/tags/metrics, early stopping, latency
percentiles, MFU) lives in `records`; everything that imports torch lives in the `torch_*`
modules and the variant modules, so the TensorFlow family can reuse `records` alone.

Runs inside the workload's process: may import `radt_ext.workload_api` only (and the frameworks).
"""
