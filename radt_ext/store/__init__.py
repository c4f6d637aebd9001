"""The way to the MLflow tracking store: `client.py` (the URI, a client whose store answered, the
experiment a run goes into), `store_probe.py` (what can be known of a store before MLflow is imported),
`point_filter.py` (which points reach the store: repeated values held back, steps kept exact),
`writer.py` (batches, retries, a locked SQLite file waited out, the spool when the store is gone),
`bulk_metrics.py` (the writer's direct path into a SQLite or PostgreSQL store), `sync.py`
(`radt-ext sync`: the spool replayed).

Imports only `radt_ext.errors` and MLflow; knows nothing of listeners, runs or figures.
"""
