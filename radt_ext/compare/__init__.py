"""`radt-ext compare`: runs side by side, each metric as a ratio to a baseline run."""
from radt_ext.compare.table import Comparison, compare_runs  # noqa: F401
from radt_ext.compare.select import select_runs  # noqa: F401
