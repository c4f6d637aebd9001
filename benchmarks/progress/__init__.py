"""Benchmarks and proofs of progress counting (the start-up hook); run from the repository root."""
