"""Reports for a run, a collocation group and a sweep, as HTML text."""
from __future__ import annotations

import html as _html

from radt_ext.report import data, figures
from radt_ext.report.html import document, table
from radt_ext.figures.summary_names import HEADLINE

SUMMARY_ROWS = HEADLINE  # the active phase and its share of the run first, then the whole run


def _summary_table(runs: list[data.RunData]) -> str | None:
    keys = [k for k in SUMMARY_ROWS if any(k in r.summary for r in runs)]
    keys += sorted({k for r in runs for k in r.summary} - set(keys))
    if not keys:
        return None
    header = ["summary"] + [f"{r.name} ({r.run_id[:8]})" for r in runs]
    return "<h2>Summaries</h2>" + table(header, [[k] + [r.summary.get(k) for r in runs] for k in keys])


def _info(run: data.RunData) -> str:
    tags = {k: v for k, v in run.tags.items() if k in ("variant", "recipe", "collocation.mode", "sweep.id",
                                                         "baseline_run_id", "radt_ext.command", "radt_ext.listeners")}
    rows = [["run id", run.run_id], ["status", run.status]] + [[k, v] for k, v in sorted(tags.items())]
    return table(["", ""], rows)


def run_html(client, run_id: str, timelines: dict[str, dict] | None = None, children_anywhere: bool = True,
             childless: bool = False) -> str:
    """A collocation parent's report (children stacked) when the run has children, else the
    run's own timelines and summaries (`timelines`: {run id: its timeline file already read}, see
    data.load_run). `children_anywhere`: look for children in every experiment when its own has none;
    `childless`: the caller knows it has none (no query)."""
    timelines = timelines or {}
    run = client.get_run(run_id)
    kids = [] if childless else data.children(client, run_id, [run.info.experiment_id], anywhere=children_anywhere)
    if kids:
        return group_html(client, run, kids, timelines)
    return run_document(data.load_run(client, run_id, run=run, timelines=timelines.get(run_id)))


def warm() -> None:
    """Draw a small report once, storing nothing (its first drawing reads plot.js and compiles the panels'
    patterns); a run does this while its workload runs."""
    series = data.Series([0.0, 1.0], [1.0, 2.0])
    run = data.RunData(run_id="warm", name="warm", start_s=0.0, status="RUNNING", tags={}, params={}, metrics={},
                       system={"gpu0_power_w": series, "gpu0_util_pct": series, "cpu_pct": series})
    run_document(run)


FULL_SERIES = ("<p class=note>Timelines drawn from at most a few thousand points each (every peak kept); "
               "every point is in the run's System metrics tab in the MLflow UI.</p>")


def run_document(rd: data.RunData) -> str:
    fig = figures.run_timelines(rd)
    note = FULL_SERIES if fig else "<p class=note>No system metrics were recorded for this run.</p>"
    return document(f"radt-ext report: {rd.name}", [_info(rd), note, fig, _summary_table([rd])])


def group_html(client, parent, kids, timelines: dict[str, dict]) -> str:
    """`timelines`: {run id: its timeline file already read}; the others are read back from the store."""
    origin = min([parent.info.start_time] + [k.info.start_time for k in kids]) / 1000.0
    runs = [data.load_run(client, k.info.run_id, origin_s=origin, run=k, timelines=timelines.get(k.info.run_id))
            for k in kids]
    name = data.run_name(parent)
    parent_data = data.load_run(client, parent.info.run_id, origin_s=origin, run=parent,
                                timelines=timelines.get(parent.info.run_id))
    mode = parent.data.tags.get("collocation.mode")
    title = f"collocation group {name}" + (f" ({mode})" if mode else "")
    return document(f"radt-ext report: {title}", [
        _info(parent_data),
        figures.group_timelines(runs, f"{len(runs)} workloads, stacked on one time axis"),
        figures.energy_split(parent_data, runs),
        figures.run_timelines(parent_data, title="group-level metrics") if parent_data.system else None,
        figures.slowdown_heatmap(runs),
        _summary_table(runs + ([parent_data] if parent_data.summary else [])),
    ])


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _prediction_table(runs: list[data.RunData]) -> str | None:
    """A packed sweep's jobs: what the planner predicted (tags `pack.*`) against what was measured."""
    jobs = [r for r in runs if "pack.predicted_slowdown" in r.tags and "mlflow.parentRunId" in r.tags]
    if not jobs:
        return None
    rows = []
    for r in sorted(jobs, key=lambda r: r.start_s):
        s = r.summary
        energy = s.get("gpu_energy_attributed_j")
        rows.append([r.name, r.tags.get("collocation.mode"), r.tags.get("collocation.gpu"), r.tags.get("pack.basis"),
                     r.tags.get("pack.cpus"), _float(r.tags.get("pack.predicted_slowdown")), s.get("slowdown_ratio"),
                     s.get("guard_live_slowdown_max"), s.get("guard_paused_s"),
                     _float(r.tags.get("pack.predicted_wall_s")), s.get("e2e_duration_s"),
                     _float(r.tags.get("pack.predicted_energy_j")), energy, r.tags.get("pack.reason"),
                     r.tags.get("collocation.guard")])
    header = ["job", "mode", "gpu", "basis (measured, trial, start-up, alone)", "CPUs",
              "predicted slowdown (wall here / alone)", "measured slowdown (wall here / alone, pauses in)",
              "guard: highest live slowdown", "guard: paused s", "predicted wall s", "measured wall s",
              "predicted energy J (whole run)", "measured energy J (whole run, attributed)", "why", "guard"]
    return "<h2>Packing: predicted against measured</h2>" + table(header, rows)


# a repeated setting's figures in the sweep report: (column, summary key)
REPEATED = (("makespan s", "makespan_s"), ("active s", "active_s"), ("samples/s", "throughput_samples_per_s"),
            ("J/sample", "energy_per_sample_j"), ("epoch s", "epoch_time_s"), ("GPU energy J (run)", "e2e_gpu_total_energy_j"),
            ("avg SM active %", "gpu_mean_avg_sm_active_pct"), ("avg slowdown", "avg_slowdown_ratio"))


def _stat_text(est, noise) -> str | None:
    if est is None:
        return None
    from radt_ext.report.html import fmt
    from radt_ext.report.tables import NOISE_MARK

    text = fmt(est.mean) + (f" ± {fmt(est.half)}" if est.half is not None else "")
    return text + (f" {NOISE_MARK}" if noise else "")


def _repeats_table(runs: list[data.RunData]) -> str | None:
    """The groups' settings that ran more than once: each figure's mean over the FINISHED repeats and its
    95 % interval, ≈ where it lies within the noise of the first setting."""
    from radt_ext.figures import repeats
    from radt_ext.report import settings

    groups: dict[tuple, list[data.RunData]] = {}
    for r in sorted(runs, key=lambda r: r.start_s):
        if r.tags.get("sweep.group") and r.status == "FINISHED":
            groups.setdefault(settings.setting_of("", r.tags, r.params), []).append(r)
    ordered = list(groups.values())
    if not any(len(g) > 1 for g in ordered):
        return None
    cols = [(c, k) for c, k in REPEATED if any(k in r.summary for g in ordered for r in g)]
    first = ordered[0]
    rows, classes = [], []
    for g in ordered:
        tags = g[0].tags
        params = " ".join(f"{k[len('sweep.param.'):]}={v}" for k, v in sorted(tags.items())
                          if k.startswith("sweep.param."))
        row, cls = [tags.get("collocation.mode"), tags.get("sweep.group"), params, len(g)], ["", "", "", ""]
        for _, key in cols:
            est = repeats.estimate(r.summary.get(key) for r in g)
            noise = repeats.noise(repeats.estimate(r.summary.get(key) for r in first), est) if g is not first else None
            row.append(_stat_text(est, noise))
            cls.append("")
        rows.append(row)
        classes.append(cls)
    note = ("<p class=note>Each figure's mean over a setting's FINISHED runs and its 95 % interval (Student t); "
            "≈: the difference from the first setting lies within the noise (the 95 % interval of the difference "
            "holds 0). The means are runs of their own under the report run (tag sweep.role=setting).</p>")
    return "<h2>Repeated settings</h2>" + note + table(["mode", "group", "params", "runs"] + [c for c, _ in cols],
                                                       rows, classes)


def sweep_html(client, runs, title: str) -> str:
    """Time vs energy with the Pareto front, per-variant throughput and J/sample, slowdown."""
    loaded = [data.RunData(run_id=r.info.run_id, name=data.run_name(r), start_s=r.info.start_time / 1000.0,
                           status=r.info.status, tags=dict(r.data.tags), params=dict(r.data.params),
                           metrics=dict(r.data.metrics)) for r in runs]
    # a collocation sweep compares groups (makespan, group energy); the children's device-level energy overlaps
    groups = [r for r in loaded if "makespan_s" in r.summary and figures.energy_of(r) is not None]
    scatter = (figures.time_energy_scatter(groups, "Time vs energy per collocation group (makespan)") if groups
               else figures.time_energy_scatter(loaded))
    parts = [scatter, _repeats_table(loaded), figures.per_variant_bars(loaded), figures.slowdown_heatmap(loaded),
             _prediction_table(loaded), _summary_table(loaded)]
    if all(p is None for p in parts):
        parts = [f"<p class=note>None of the {len(loaded)} runs has summary metrics yet.</p>"]
    return document(title, parts)


def sweep_id_html(client, sweep_id: str, runs=None) -> str:
    """`runs`: the sweep's runs read already (data.sweep_runs)."""
    runs = data.sweep_runs(client, sweep_id) if runs is None else runs
    return sweep_html(client, runs, f"radt-ext sweep {_html.escape(sweep_id)}: {len(runs)} runs")
