"""The per-operation profiler and predictor: metering, repeatability, the held-out suites, the hosts. (README.md beside this file.)"""
