"""radt-ext's comparison view in MLflow's UI: a saved view of an experiment's runs table (columns,
order, charts), stored the way MLflow's own "Save view" stores one, and the link that opens it.

`mlflow_format.py` knows MLflow's format and the MLflow versions it was checked against;
`content.py` what radt-ext's view shows; `write.py` writes it into an experiment (cheap, idempotent)
and builds the link; `ui.py` is `radt-ext ui`.

May import `radt_ext.store` (the `ui` command reaches the store through it); the rest is handed an
MLflow client and imports nothing of radt_ext.
"""
from radt_ext.view.content import KEY, ORDER_TAG, order_key
from radt_ext.view.write import link, link_line, refresh, refresh_quietly

__all__ = ["KEY", "ORDER_TAG", "order_key", "link", "link_line", "refresh", "refresh_quietly"]
