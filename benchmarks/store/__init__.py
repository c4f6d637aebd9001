"""What reaches the tracking store and what it costs: logging throughput, rows and bytes per GPU-hour,
the MLflow UI on a long run, the writer's faults. (README.md beside this file.)"""
