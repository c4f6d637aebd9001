"""Benchmark scripts (issue 6); run from the repository root as `python -m benchmarks.<name>`."""
