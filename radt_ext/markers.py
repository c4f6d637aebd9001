"""`radt_ext.markers.monitor_run_id()`, the documented path a workload calls: the names live in
radt_ext.workload_api.markers."""
from radt_ext.workload_api.markers import monitor_run_id  # noqa: F401
