"""`radt-ext compare`: runs side by side, each metric as a ratio to a baseline run.

May import `radt_ext.report`, `radt_ext.store`, `radt_ext.figures` and `radt_ext.errors`.
"""
from radt_ext.compare.table import Comparison, compare_runs  # noqa: F401
from radt_ext.compare.select import select_runs  # noqa: F401
