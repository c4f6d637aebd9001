"""MLflow's own format for a saved view of an experiment's runs page, as its UI writes and reads it.

Taken from MLflow 3.17's UI (the "Save view" / share button of the experiment page, and the hook that
opens `?viewStateShareKey=KEY`), checked against the built bundle that the mlflow 3.17.2 wheel ships:

- the view is the experiment tag `mlflow.sharedViewState.<KEY>`; `KEY` is any tag-safe text (the UI
  makes one from the time and random letters) and the link names it: `#/experiments/<ID>/runs?
  viewStateShareKey=<KEY>`, with `workflowType=machine_learning` to open the training view;
- the tag's value is an envelope `{"name", "createdAt", "updatedAt", "state"}` (times in ms; the name
  shows in the page's Views list), at most 20 000 characters (the UI's limit, and MLflow's for an
  experiment tag's value);
- `state` is the JSON of the page's search facets (filter, sort) and UI state (columns, grouping,
  charts), without the fields the UI never shares (runsExpanded, runsPinned, runsHidden,
  runsVisibilityMap, autoRefreshEnabled); 3.17 writes it compressed: `deflate;` + base64 of the
  zlib stream (pako's `deflate`), and reads it compressed or plain;
- an older value that is the bare state (no envelope) is still read by 3.17.

The field names, defaults and chart shapes below are the UI's (its `ExperimentPageUIState`,
`ExperimentPageSearchFacetsState` and `runs-charts.types`). Pure: no MLflow import.
"""
from __future__ import annotations

import base64
import json
import zlib

# MLflow versions whose UI this format was checked against (the bundle read and a browser test run)
TESTED_MLFLOW_VERSIONS = ("3.17",)

TAG_PREFIX = "mlflow.sharedViewState."
URL_PARAM = "viewStateShareKey"
WORKFLOW_PARAM = "workflowType"
TRAINING_WORKFLOW = "machine_learning"  # the "Model training" side of the sidebar's switch
MAX_VALUE_CHARS = 20_000
COMPRESSED_PREFIX = "deflate;"

# what the UI's share leaves out of a view, and drops from one it opens
NOT_SHARED = ("runsExpanded", "runsPinned", "runsHidden", "runsVisibilityMap", "autoRefreshEnabled")

# column types of the runs table and its attribute columns (ATTRIBUTE_COLUMN_LABELS)
ATTRIBUTES, PARAMS, METRICS, TAGS = "attributes", "params", "metrics", "tags"
START_TIME_ORDER = "attributes.start_time"  # the UI's default sort (its only one that keeps runs nested)

MODEL_METRICS_SECTION = "Model metrics"
SYSTEM_METRICS_SECTION = "System metrics"

# RunsChartsLineChartXAxisType
X_STEP, X_TIME, X_TIME_RELATIVE = "step", "time", "time-relative"


def tested(version: str) -> bool:
    """Whether this MLflow version's UI is one the format was checked against (by major.minor)."""
    return ".".join(version.split(".")[:2]) in TESTED_MLFLOW_VERSIONS


def column(kind: str, key: str) -> str:
    """The UI's canonical key of a runs-table column (makeCanonicalSortKey): metrics.`summary/x`."""
    return f"{kind}.`{key}`"


def facets(order_by: str = START_TIME_ORDER, ascending: bool = False, search_filter: str = "") -> dict:
    """ExperimentPageSearchFacetsState: the UI's defaults but for the sort and filter given."""
    return {"searchFilter": search_filter, "orderByKey": order_by, "orderByAsc": ascending, "startTime": "ALL",
            "lifecycleFilter": "Active", "datasetsFilter": [], "modelVersionFilter": "All Runs"}


def ui_state(selected_columns: list[str], charts: list[dict], sections: list[dict], *,
             column_order: list[str] | None = None, column_widths: dict[str, int] | None = None,
             group_by: dict | None = None, runs_hidden_mode: str = "SHOW_ALL") -> dict:
    """ExperimentPageUIState (the shared fields): the UI's defaults but for what is given. The sections
    are kept in the order given (isAccordionReordered), so a view's own section stays first when the UI
    adds a section for each metric prefix it finds."""
    return {
        "selectedColumns": list(selected_columns),
        "columnOrder": list(column_order or []),
        "columnWidths": dict(column_widths or {}),
        "runsHiddenMode": runs_hidden_mode,
        "compareRunCharts": charts,
        "compareRunSections": sections,
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": True,
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
        "groupBy": group_by,
        "groupsExpanded": {},
        "globalLineChartConfig": {"xAxisKey": X_STEP, "lineSmoothness": 0, "selectedXAxisMetricKey": ""},
    }


def section(uuid: str, name: str, display: bool = True) -> dict:
    """A ChartSectionConfig (an accordion of charts on the Chart view); display: open."""
    return {"uuid": uuid, "name": name, "display": display, "isReordered": False, "deleted": False,
            "isGenerated": False}


def _card(kind: str, uuid: str, section_id: str, runs: int) -> dict:
    """RunsChartsCardConfig's own fields (its title is the metric's name: 3.17 shows a card's
    displayName only behind a feature flag, so none is set)."""
    return {"uuid": uuid, "type": kind, "runsCountToCompare": runs, "metricSectionId": section_id,
            "deleted": False, "isGenerated": False}


def bar_chart(uuid: str, section_id: str, metric: str, runs: int = 100) -> dict:
    """RunsChartsBarCardConfig: one bar per run of `metric`'s latest value."""
    return {**_card("BAR", uuid, section_id, runs), "metricKey": metric}


def scatter_chart(uuid: str, section_id: str, x_metric: str, y_metric: str, runs: int = 100) -> dict:
    """RunsChartsScatterCardConfig: a point per run, metric against metric."""
    return {**_card("SCATTER", uuid, section_id, runs), "xaxis": {"key": x_metric, "type": "METRIC"},
            "yaxis": {"key": y_metric, "type": "METRIC"}}


def line_chart(uuid: str, section_id: str, metrics: list[str], x_axis: str = X_TIME_RELATIVE,
               runs: int = 10) -> dict:
    """RunsChartsLineCardConfig: each run's history of the metrics against time (own x axis, not the
    page's global one)."""
    return {**_card("LINE", uuid, section_id, runs), "metricKey": metrics[0],
            "selectedMetricKeys": list(metrics), "lineSmoothness": 0, "xAxisScaleType": "linear",
            "scaleType": "linear", "range": {}, "xAxisKey": x_axis, "selectedXAxisMetricKey": "",
            "yAxisKey": "metric", "yAxisExpressions": [], "ignoreOutliers": False,
            "useGlobalXaxisKey": False, "useGlobalLineSmoothing": True}


def compress(text: str) -> str:
    """The UI's textCompressDeflate: `deflate;` + base64 of a zlib stream."""
    return COMPRESSED_PREFIX + base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def decompress(text: str) -> str:
    if not text.startswith(COMPRESSED_PREFIX):
        return text
    return zlib.decompress(base64.b64decode(text[len(COMPRESSED_PREFIX):])).decode("utf-8")


def encode(name: str, state: dict, created_ms: int, updated_ms: int) -> str:
    """The tag's value: the envelope around the compressed state, as the UI's Save view writes it."""
    shared = {k: v for k, v in state.items() if k not in NOT_SHARED}
    value = json.dumps({"name": name, "createdAt": created_ms, "updatedAt": updated_ms,
                        "state": compress(json.dumps(shared, separators=(",", ":")))}, separators=(",", ":"))
    if len(value) > MAX_VALUE_CHARS:
        raise ValueError(f"the view is {len(value)} characters; MLflow keeps at most {MAX_VALUE_CHARS}")
    return value


def decode(value: str) -> tuple[str | None, int | None, dict]:
    """(name, createdAt, state) of a tag's value, envelope or bare state (compressed or not) as 3.17
    reads them; ValueError when it is neither."""
    try:
        envelope = json.loads(value)
    except (TypeError, ValueError):
        envelope = None
    if (isinstance(envelope, dict) and isinstance(envelope.get("name"), str)
            and isinstance(envelope.get("createdAt"), (int, float)) and isinstance(envelope.get("state"), str)):
        return envelope["name"], int(envelope["createdAt"]), json.loads(decompress(envelope["state"]))
    try:
        state = json.loads(decompress(value))
    except (TypeError, ValueError, zlib.error) as exc:
        raise ValueError(f"not a saved view: {exc}") from None
    if not isinstance(state, dict):
        raise ValueError("not a saved view: its state is not an object")
    return None, None, state


def link(base_url: str, experiment_id: str, key: str) -> str:
    """The page that opens the view: the experiment's runs tab in the training view."""
    return (f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{WORKFLOW_PARAM}={TRAINING_WORKFLOW}"
            f"&{URL_PARAM}={key}")
