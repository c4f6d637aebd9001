"""The way to the MLflow tracking store: `client.py` (the URI, a client whose store answered, the
experiment a run goes into), `store_probe.py` (what can be known of a store before MLflow is imported),
`point_filter.py` (repeated values held back, steps kept exact), `shaper.py` (the store's bounded shape
of each timeline), `timelines.py` (the run's full-rate timeline artifact: written, read back),
`run_points.py` (one run's points: filter → artifact, and shape → writer), `compact.py` (`radt-ext
compact`: older runs into the shape),
`writer.py` (batches, retries, a locked SQLite file waited out, the spool when the store is gone),
`bulk_metrics.py` (the writer's direct path into a SQLite or PostgreSQL store), `sync.py`
(`radt-ext sync`: the spool replayed).

Imports only `radt_ext.errors` and MLflow; knows nothing of listeners, runs or figures.
"""
