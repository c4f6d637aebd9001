"""Benchmarks and GPU proofs, grouped by the part of radt-ext they measure (README.md: the groups); run from
the repository root as `python -m benchmarks.<group>.<name>` and `bash benchmarks/<group>/<name>.sh`."""
