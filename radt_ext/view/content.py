"""What radt-ext's comparison view shows: its columns, its order and its charts (pure; no MLflow).

- Columns, the work figures first, where a user looks: the active phase's throughput and J/sample (and
  a collocated workload's attributed J/sample), the mean epoch's time and GPU energy from the 2nd
  epoch, the slowdown; then the collocation mode, workload, variant and recipe, the sweep's parameters
  (each once: the `sweep.param.<name>` tag that every run of a sweep carries, its group runs and their
  workloads' runs alike) and its host settings (`system.<key>`: what was asked and what the host
  reported back, `system.<key>.host`); then GPU energy, average power, SM and tensor activity, start-up,
  active and end-to-end time, the device, the GPU model and where the workload's progress came from.
- Order: by the tag `radt_ext.view_order` that radt-ext gives every run it makes (`order_key`): mode,
  then variant or group, then each collocation parent directly followed by its children. (MLflow's
  grouping would average a parent with its children, and a shared view cannot expand a parent: the
  UI drops `runsExpanded` from it; any sort but start time lists children as rows of their own.)
- Charts, in a section of their own above the ones MLflow adds: J/sample and throughput per run
  (bars), time against energy (scatter), GPU power over time (lines).
"""
from __future__ import annotations

from radt_ext.view import mlflow_format as fmt

KEY = "radt-ext"  # the view's share key: the tag mlflow.sharedViewState.radt-ext
NAME = "radt-ext comparison"  # its name in the page's Views list
ORDER_TAG = "radt_ext.view_order"
SECTION = "radt-ext comparison"

WORK = (  # before the tag and parameter columns
    "summary/throughput_samples_per_s",
    "summary/energy_per_sample_j",
    "summary/energy_per_sample_attributed_j",
    "summary/epoch_time_s",
    "summary/epoch_energy_j",
    "summary/slowdown_ratio",
)
METRICS = WORK + (
    "summary/gpu_total_energy_j",
    "summary/gpu_total_avg_power_w",
    "summary/gpu_mean_avg_sm_active_pct",
    "summary/gpu_mean_avg_tensor_active_pct",
    "summary/startup_s",
    "summary/active_s",
    "summary/e2e_duration_s",
)
TAGS = (
    "collocation.mode",
    "collocation.workload",
    "variant",
    "recipe",
    "collocation.gpu",
    "machine.gpu.0.nvml_index",
    "machine.gpu.0.name",
    "radt_ext.progress_source",
)
SWEEP_PARAM_TAG = "sweep.param."
SYSTEM_TAG = "system."  # a sweep's host settings: given here as "system.<key>", shown as two tag columns
POWER = "system/gpu0_power_w"
METRIC_WIDTH, TEXT_WIDTH = 250, 140  # px: a summary's full name shows in its column's header


def order_key(mode: str | None, label: str | None, group: str, index: int | None = None) -> str:
    """The `radt_ext.view_order` tag's value: runs sort by mode, then label (variant, group name), then
    group (a collocation parent's run id, or a plain run's start); a child adds its index, so it sorts
    right after its parent."""
    parts = [mode or "run", label or "-", group]
    if index is not None:
        parts.append(f"{index:03d}")
    return " / ".join(parts)


def columns(params: list[str]) -> list[str]:
    out = [fmt.column(fmt.METRICS, m) for m in WORK]
    out += [fmt.column(fmt.TAGS, t) for t in TAGS[:4]]
    for p in params:
        if p.startswith(SYSTEM_TAG):
            out.append(fmt.column(fmt.TAGS, p))
            if not p.startswith(SYSTEM_TAG + "env."):  # a variable is what was asked; the rest the host reports
                out.append(fmt.column(fmt.TAGS, p + ".host"))
        else:
            out.append(fmt.column(fmt.TAGS, SWEEP_PARAM_TAG + p))
    out += [fmt.column(fmt.METRICS, m) for m in METRICS[len(WORK):]]
    out += [fmt.column(fmt.TAGS, t) for t in TAGS[4:]]
    out.append(fmt.column(fmt.ATTRIBUTES, "Duration"))
    return out


def charts() -> tuple[list[dict], list[dict]]:
    """(charts, sections): ours first and open; MLflow's own two sections follow, closed."""
    sid = "radt-ext-section"
    cards = [
        fmt.bar_chart("radt-ext-j-per-sample", sid, "summary/energy_per_sample_j"),
        fmt.bar_chart("radt-ext-throughput", sid, "summary/throughput_samples_per_s"),
        fmt.scatter_chart("radt-ext-time-energy", sid, "summary/active_s", "summary/gpu_total_energy_j"),
        fmt.line_chart("radt-ext-power", sid, [POWER]),
    ]
    sections = [fmt.section(sid, SECTION), fmt.section("radt-ext-model-metrics", fmt.MODEL_METRICS_SECTION, False),
                fmt.section("radt-ext-system-metrics", fmt.SYSTEM_METRICS_SECTION, False)]
    return cards, sections


def state(params: list[str] | tuple[str, ...] = ()) -> dict:
    """The whole shared state of radt-ext's view for an experiment whose sweeps vary `params`."""
    params = sorted(set(params))
    cards, sections = charts()
    cols = columns(params)
    widths = {c: METRIC_WIDTH if c.startswith(fmt.METRICS) else TEXT_WIDTH for c in cols}
    return {**fmt.facets(order_by=fmt.column(fmt.TAGS, ORDER_TAG), ascending=True),
            **fmt.ui_state(cols, cards, sections, column_order=cols, column_widths=widths)}


def params_of(state_: dict) -> list[str]:
    """The sweep parameters a view (ours, as stored: today's, or an older one that showed them as params
    too) shows."""
    swept = fmt.column(fmt.TAGS, SWEEP_PARAM_TAG)[:-1]  # tags.`sweep.param.
    older = fmt.column(fmt.PARAMS, "")[:-1]  # params.`
    system = fmt.column(fmt.TAGS, SYSTEM_TAG)[:-1]  # tags.`system.
    columns = state_.get("selectedColumns", [])
    return sorted({c[len(prefix):-1] for prefix in (swept, older) for c in columns if c.startswith(prefix)}
                  | {c[len(system) - len(SYSTEM_TAG):-1] for c in columns
                     if c.startswith(system) and not c.endswith(".host`")})
