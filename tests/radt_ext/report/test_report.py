"""Reports built from real runs in a real SQLite store (see store.py)."""
from __future__ import annotations

import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from mlflow.tracking import MlflowClient

from radt_ext.report import ARTIFACT, figures, log_report
from radt_ext.report.build import run_document, run_html, sweep_id_html
from radt_ext.report.data import RunData, Series, load_run
from radt_ext.report.pareto import pareto_front
from radt_ext.store import timelines
from tests.radt_ext.report import page as shown
from tests.radt_ext.report.store import WORKLOAD, _radt, store  # noqa: F401

PANEL_TITLES = ["Power (W)", "Cumulative energy (J)", "Temperature (°C)", "SM and tensor activity (%)",
                "Clocks (MHz)", "GPU memory (MiB)", "CPU (%)", "Work (samples/s)"]


def _artifact_text(client, run_id, path=ARTIFACT) -> str:
    local = client.download_artifacts(run_id, path)
    with open(local, encoding="utf-8") as fh:
        return fh.read()


def test_every_run_logs_its_report_with_all_panels_and_epoch_markers(store):
    client = MlflowClient(store.uri)
    page = _artifact_text(client, store.baseline)
    (fig,) = shown.figures(page)
    assert set(PANEL_TITLES) <= set(shown.titles(fig)), shown.titles(fig)
    assert {"epoch 0", "epoch 2"} <= set(shown.trace_texts(fig))  # the workload's own epoch bounds
    assert "active phase starts (progress)" in shown.trace_texts(fig)  # the span the summaries cover
    assert shown.plotlyjs_copies(page) == 0  # drawn by the report's own renderer: small, opens offline
    assert len(page.encode()) < 300_000
    assert "radt_ext.report_error" not in client.get_run(store.baseline).data.tags


def test_run_timelines_come_from_the_full_rate_timeline_artifact(store):
    client = MlflowClient(store.uri)
    run = load_run(client, store.baseline)
    full = timelines.read(client, store.baseline)["system/gpu0_power_w"]  # every point; the store holds its shape
    stored = client.get_metric_history(store.baseline, "system/gpu0_power_w")
    assert len(run.system["gpu0_power_w"].v) == len(full) > len(stored) > 3
    assert run.system["gpu0_power_w"].v == [v for _, _, v in sorted(full)]
    assert [label for _, _, label in run.epochs] == ["epoch 0", "epoch 1", "epoch 2"]
    start, end, _ = run.epochs[0]
    assert 0 <= start < end
    # the active phase (from the workload's progress) begins after the first step of the first epoch
    assert start - 0.001 <= run.active[0] < run.active[1] <= run.epochs[-1][1] + 0.001  # tags hold ms
    energy = figures.cumulative_energy(run.system)["gpu0_energy_j"]
    assert energy.v[0] == 0 and energy.v[-1] > 0


def test_the_runs_end_draws_its_report_from_its_own_timeline_file_not_fetched_back(store):
    client = MlflowClient(store.uri)
    (fig,) = shown.figures(_artifact_text(client, store.baseline))
    assert "Power (W)" in shown.titles(fig)
    assert "Downloading artifacts" not in store.baseline_stderr  # MLflow's progress bars of a read-back
    assert not list(store.root.rglob("radt-parquet-*"))  # the kept file is gone once the report is drawn


def test_collocation_parent_report_stacks_the_children(store):
    client = MlflowClient(store.uri)
    page = run_html(client, store.parent)
    figs = shown.figures(page)
    assert "collocation group" in shown.text(page)
    assert "2 workloads, stacked on one time axis" in shown.titles(figs[0])
    kids = {r.info.run_name for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        f"tags.`mlflow.parentRunId` = '{store.parent}'")}
    assert kids == {"small", "large"}
    legend = " ".join(shown.trace_names(figs[0]))
    for name in kids:
        assert f"{name} (" in legend
    # a caller that knows the run has no children (a group's workload that opened no run) asks for none
    alone = run_html(client, store.parent, childless=True)
    assert "collocation group" not in shown.text(alone) and "radt-ext report" in alone


def test_sweep_report_has_pareto_front_and_per_variant_bars(store):
    page = sweep_id_html(MlflowClient(store.uri), "s1")
    assert "2 runs" in shown.text(page)
    scatter, bars = shown.figures(page)[:2]
    assert "Pareto front" in shown.trace_names(scatter)
    assert "Throughput and energy per sample over the active phase, per variant and mode" in shown.titles(bars)
    assert "J per sample" in shown.titles(bars)


def test_a_failing_report_never_fails_the_run(store, tmp_path):
    """An experiment whose artifact location cannot be written: the run still finishes with
    the workload's exit code and the reason is a run tag."""
    client = MlflowClient(store.uri)
    exp = client.create_experiment(f"unwritable-{os.getpid()}", artifact_location="file:///proc/radt-ext-no")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RADT_EXT_"))}
    proc = _radt(clean, {"MLFLOW_TRACKING_URI": store.uri, "MLFLOW_EXPERIMENT_ID": exp,
                         "RADT_EXT_SPOOL_DIR": str(tmp_path / "spool")}, tmp_path,
                 "run", "--listeners", "top", "--", sys.executable, WORKLOAD, "--epochs", "1", "--seconds", "0.1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = client.search_runs([exp])[0]
    assert run.info.status == "FINISHED"
    assert run.data.tags["radt_ext.report_error"]
    assert "summary/e2e_duration_s" in run.data.metrics
    # its timeline file, which that location would not take either, waits in the spool it was given
    assert [p.parent.name for p in (tmp_path / "spool" / "timelines").glob("*/system.parquet")] == [run.info.run_id]


def test_report_can_be_turned_off(store, monkeypatch):
    monkeypatch.setenv("RADT_EXT_REPORT", "0")
    assert log_report(MlflowClient(store.uri), store.amp, "off.html") is None
    assert "off.html" not in [a.path for a in MlflowClient(store.uri).list_artifacts(store.amp)]


def test_slowdown_heatmap_means_per_variant_and_mode():
    runs = [RunData(run_id=f"r{i}", name=f"r{i}", start_s=0, status="FINISHED",
                    tags={"variant": v, "collocation.mode": m}, params={},
                    metrics={"summary/slowdown_ratio": s})
            for i, (v, m, s) in enumerate([("a", "mps", 1.2), ("a", "mps", 1.4), ("b", "naive", 2.0)])]
    fig = figures.slowdown_heatmap(runs)
    heat = fig.to_dict()["data"][0]
    assert heat["x"] == ["mps", "naive"] and heat["y"] == ["a", "b"]
    assert abs(heat["z"][0][0] - 1.3) < 1e-9 and heat["z"][0][1] is None and heat["z"][1][1] == 2.0
    assert figures.slowdown_heatmap(runs[:0]) is None


def test_downsample_keeps_peaks():
    t = [i * 0.01 for i in range(20000)]
    v = [1.0] * 20000
    v[12345] = 99.0
    v[777] = -5.0
    s = figures.downsample(Series(t, v))
    assert len(s.t) <= figures.MAX_POINTS + 2
    assert max(s.v) == 99.0 and min(s.v) == -5.0
    assert s.t == sorted(s.t)


coords = st.floats(min_value=0, max_value=1e6, allow_nan=False)


@given(st.lists(st.tuples(coords, coords), max_size=40))
def test_pareto_front_is_exactly_the_non_dominated_points(points):
    front = set(pareto_front(points))

    def dominated(p):
        return any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in points)

    for i, p in enumerate(points):
        assert (i in front) == (not dominated(p)), (p, points)


def _ten_minute_run() -> RunData:
    """The series the default listeners give on a GPU host over 10 minutes: every value different."""
    import random

    rng = random.Random(0)
    names = ["gpu0_power_w", "gpu0_power_avg_w", "smi_gpu0_power_w", "smi_gpu0_power_instant_w", "cpu0_package_power_w",
             "cpu0_dram_power_w", "gpu0_energy_j", "cpu0_package_energy_j", "gpu0_temp_c", "gpu0_mem_temp_c",
             "smi_gpu0_temp_c", "smi_gpu0_mem_temp_c", "gpu0_sm_active_pct", "gpu0_tensor_active_pct",
             "gpu0_sm_occupancy_pct", "gpu0_util_pct", "gpu0_dram_active_pct", "gpu0_sm_clock_mhz",
             "gpu0_mem_clock_mhz", "smi_gpu0_sm_clock_mhz", "smi_gpu0_mem_clock_mhz", "gpu0_mem_used_mib",
             "host_cpu_pct", "proc_cpu_pct"]
    system = {}
    for name in names:
        rate = 50 if name == "gpu0_power_w" else 10
        t = [i / rate for i in range(600 * rate)]
        v = [rng.uniform(100, 700) + (i / 10 if name.endswith("_energy_j") else 0) for i in range(len(t))]
        system[name] = Series(t, v)
    return RunData(run_id="0" * 32, name="ten-minutes", start_s=0.0, status="FINISHED", tags={}, params={},
                   metrics={"summary/duration_s": 600.0}, system=system,
                   epochs=[(i * 60.0, i * 60.0 + 59.0, f"epoch {i}") for i in range(10)])


def test_a_ten_minute_run_with_every_default_listener_gets_a_small_report():
    page = run_document(_ten_minute_run())
    assert len(page.encode()) <= 300_000, len(page.encode())
    (fig,) = shown.figures(page)
    assert set(PANEL_TITLES) - {"Work (samples/s)"} <= set(shown.titles(fig))  # a synthetic run counts no work
    power = next(t for t in fig["data"] if t.get("name") == "gpu0_power_w")
    assert max(power["y"]) > 699 and min(power["y"]) < 101  # the peaks are drawn


def test_cumulative_energy_of_a_counter_stored_only_at_its_reads_follows_the_power_between_them():
    power_t = [0.02 * k for k in range(1, 501)]  # 10 s of 20 ms samples: 100 W, then 300 W from 5 s
    power = Series(power_t, [100.0 if t <= 5.0 else 300.0 for t in power_t])
    counter = Series([0.0, 10.0], [1000.0, 3000.0])  # read at open and close only, J since the driver loaded
    energy = figures.cumulative_energy({"gpu0_energy_j": counter, "gpu0_power_w": power})["gpu0_energy_j"]
    assert energy.t[0] == 0.0 and energy.t[-1] == 10.0 and energy.v[0] == 0.0 and energy.v[-1] == 2000.0
    assert max(b - a for a, b in zip(energy.t, energy.t[1:])) <= 0.5 and energy.v == sorted(energy.v)
    at5 = next(v for t, v in zip(energy.t, energy.v) if abs(t - 5.0) < 1e-9)
    assert at5 == pytest.approx(2000.0 * 500 / 2000, rel=0.01)  # a quarter of the energy in the first half
    dense = Series(energy.t, [1000.0 + v for v in energy.v])  # already dense: kept as stored
    assert figures.with_course(dense, power) is dense


def test_epoch_bands_and_lines_are_one_shape_each_through_every_panel():
    """A long run's 200 epochs: one band and one line per epoch spanning the stacked panels (drawing them
    panel by panel made plotly scan every shape per call: minutes at a run's end)."""
    run = _ten_minute_run()
    run.epochs = [(i * 3.0, i * 3.0 + 2.9, f"epoch {i}") for i in range(200)]
    run.active = (1.0, 599.0)
    fig = figures.run_timelines(run)
    shapes = fig.to_dict()["layout"]["shapes"]
    assert len(shapes) == 1 + 2 * 200  # the active phase, then a band and a line per epoch
    assert all(s["yref"] == "paper" and (s["y0"], s["y1"]) == (0, 1) for s in shapes)
    assert sorted(s["x0"] for s in shapes if s["type"] == "line") == [i * 3.0 for i in range(200)]


def _rounded(value):
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_rounded(v) for v in value]
    return value


def test_stacked_panels_are_the_layout_plotly_makes_for_them():
    """The run's timelines are built as plain dicts (no plotly objects at a run's end): the axes, domains and
    panel titles are those of plotly's make_subplots, so plotly.js draws the page as plot.js does."""
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go

    from radt_ext.report.stacked import Stacked

    titles = ["Power (W)", "Temperature (°C)", "CPU (%)"]
    ours = Stacked(titles)
    ref = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.03, subplot_titles=titles)
    ours.add_trace(dict(x=[0.0, 1.0], y=[1.0, 2.0], mode="lines", name="gpu0_temp_c"), 2)
    ref.add_trace(go.Scatter(x=[0.0, 1.0], y=[1.0, 2.0], mode="lines", name="gpu0_temp_c"), row=2, col=1)
    ours.axis_title("y", 2, "°C")
    ref.update_yaxes(title_text="°C", row=2, col=1)
    ours.axis_title("x", 3, "seconds since start")
    ref.update_xaxes(title_text="seconds since start", row=3, col=1)
    ours.update_layout(title="run", height=780)
    ref.update_layout(title="run", height=780)
    want = ref.to_dict()
    want["layout"].pop("template")
    got = ours.to_dict()
    as_plotly = ours.figure().to_dict()  # what a notebook's fig.show() draws
    as_plotly["layout"].pop("template")
    assert _rounded(as_plotly) == _rounded(want)
    assert got["data"] == [{**t, "x": list(t["x"]), "y": list(t["y"])} for t in want["data"]]
    assert got["layout"].keys() == want["layout"].keys()
    for key, value in want["layout"].items():
        if key == "annotations":
            assert [a["text"] for a in got["layout"][key]] == [a["text"] for a in value]
            assert [a["y"] for a in got["layout"][key]] == pytest.approx([a["y"] for a in value])
            assert [{k: v for k, v in a.items() if k != "y"} for a in got["layout"][key]] == \
                [{k: v for k, v in a.items() if k != "y"} for a in value]
        elif isinstance(value, dict) and "domain" in value:
            assert {k: v for k, v in got["layout"][key].items() if k != "domain"} == \
                {k: v for k, v in value.items() if k != "domain"}
            assert got["layout"][key]["domain"] == pytest.approx(value["domain"])
        else:
            assert got["layout"][key] == value


def _plotly_energy_split(parent: RunData, kids: list[RunData]):
    """The energy split as plotly's figure objects draw it: make_subplots and a trace object each."""
    import re

    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.12, row_heights=[0.65, 0.35],
                        subplot_titles=["GPU power by workload (stacked)", "GPU energy by workload"])
    for ci, child in enumerate(kids):
        s = child.system["gpu0_power_attributed_w"]
        fig.add_trace(go.Scatter(x=s.t, y=s.v, mode="lines", stackgroup="power", name=child.name,
                                 legendgroup=child.run_id, line=dict(color=["#636efa", "#ef553b"][ci], width=0.5),
                                 hovertemplate=f"{child.name}: %{{y:.4g}} W<extra></extra>"), row=1, col=1)
    for name, s in parent.system.items():
        if re.fullmatch(r"gpu\d+_power_w", name):
            fig.add_trace(go.Scatter(x=s.t, y=s.v, mode="lines", name=f"GPU {name}", line=dict(color="black", width=1),
                                     hovertemplate=f"{name}: %{{y:.4g}} W<extra></extra>"), row=1, col=1)
    names = [c.name for c in kids] + ["group (no workload running)"]
    active = [c.summary["gpu_energy_active_attributed_j"] for c in kids] + [parent.summary["gpu_energy_unattributed_j"]]
    idle = [c.summary["gpu_energy_idle_attributed_j"] for c in kids] + [0.0]
    fig.add_trace(go.Bar(y=names, x=active, orientation="h", name="active", marker_color="#636efa",
                         hovertemplate="%{y}: %{x:.4g} J active<extra></extra>"), row=2, col=1)
    fig.add_trace(go.Bar(y=names, x=idle, orientation="h", name="idle share", marker_color="#b6b6b6",
                         hovertemplate="%{y}: %{x:.4g} J of idle power<extra></extra>"), row=2, col=1)
    energy = [c.summary["gpu_energy_attributed_j"] for c in kids]
    fig.add_trace(go.Scatter(
        y=[c.name for c in kids], x=energy, mode="markers", name="interval the samples allow",
        marker=dict(color="black", size=6, symbol="line-ns-open"),
        error_x=dict(type="data", symmetric=False, color="black",
                     array=[c.summary["gpu_energy_attributed_high_j"] - e for c, e in zip(kids, energy)],
                     arrayminus=[e - c.summary["gpu_energy_attributed_low_j"] for c, e in zip(kids, energy)]),
        hovertemplate="%{y}: %{x:.4g} J, interval from the low to the high end<extra></extra>"), row=2, col=1)
    fig.update_yaxes(title_text="W", row=1, col=1)
    fig.update_xaxes(title_text="seconds since the group started", row=1, col=1)
    fig.update_xaxes(title_text="J", row=2, col=1)
    fig.update_layout(title=f"Each workload's share of the GPU energy (counter: {parent.summary['e2e_gpu_total_energy_j']:.4g} J)",
                      barmode="stack", height=700, margin=dict(l=60, r=20, t=80, b=40))
    return fig


def test_the_energy_split_is_the_figure_plotly_makes_without_its_objects():
    """A group's energy split is built as plain dicts (no plotly import at a group's end): the same data and
    layout as plotly's make_subplots and trace objects give, so plot.js and plotly.js draw it alike."""
    t = [0.0, 1.0, 2.0, 3.0]
    def summaries(**values):
        return {f"summary/{k}": v for k, v in values.items()}

    kids = [RunData(run_id=f"r{i}", name=name, start_s=0.0, status="FINISHED", tags={}, params={},
                    metrics=summaries(gpu_energy_attributed_j=300.0 * (i + 1), gpu_energy_active_attributed_j=250.0 * (i + 1),
                                      gpu_energy_idle_attributed_j=50.0 * (i + 1), gpu_energy_attributed_low_j=290.0 * (i + 1),
                                      gpu_energy_attributed_high_j=310.0 * (i + 1)),
                    system={"gpu0_power_attributed_w": Series(t, [100.0 * (i + 1)] * 4)})
            for i, name in enumerate(["small", "large"])]
    parent = RunData(run_id="p", name="group", start_s=0.0, status="FINISHED", tags={}, params={},
                     metrics=summaries(gpu_energy_unattributed_j=12.0, e2e_gpu_total_energy_j=912.0),
                     system={"gpu0_power_w": Series(t, [320.0] * 4), "gpu0_util_pct": Series(t, [90.0] * 4)})
    want = _plotly_energy_split(parent, kids).to_dict()
    want["layout"].pop("template")
    got = figures.energy_split(parent, kids)
    as_plotly = got.figure().to_dict()
    as_plotly["layout"].pop("template")
    assert _rounded(as_plotly) == _rounded(want)
    assert "plotly" not in type(got).__module__
    got = got.to_dict()
    assert [(d["type"], d["name"], d["xaxis"], d["yaxis"]) for d in got["data"]] == \
        [(d["type"], d["name"], d["xaxis"], d["yaxis"]) for d in want["data"]]
    for key in ("xaxis", "yaxis", "xaxis2", "yaxis2"):
        assert got["layout"][key]["domain"] == pytest.approx(want["layout"][key]["domain"])


def test_a_group_report_imports_no_plotly():
    """A group's report at its end (timelines, energy split, slowdowns) draws without plotly's figure objects:
    importing them took a tenth of a second and more after the job had ended."""
    import subprocess

    code = ("import sys\nfrom radt_ext.report import figures\nfrom radt_ext.report.data import RunData, Series\n"
            "t = [0.0, 1.0]\n"
            "kid = RunData(run_id='r', name='job', start_s=0.0, status='FINISHED', tags={'collocation.mode': 'exclusive'},"
            " params={}, metrics={'summary/gpu_energy_attributed_j': 3.0},"
            " system={'gpu0_power_attributed_w': Series(t, [1.0, 2.0]), 'gpu0_power_w': Series(t, [1.0, 2.0])})\n"
            "parent = RunData(run_id='p', name='g', start_s=0.0, status='FINISHED', tags={}, params={}, metrics={},"
            " system={'gpu0_power_w': Series(t, [1.0, 2.0])})\n"
            "assert figures.energy_split(parent, [kid]) is not None\n"
            "assert figures.slowdown_heatmap([kid]) is None\n"
            "kid.metrics['summary/slowdown_ratio'] = 1.2\n"
            "assert figures.slowdown_heatmap([kid]) is not None\n"
            "assert figures.group_timelines([kid], 'x') is not None\n"
            "print(sorted(m for m in sys.modules if m.startswith('plotly')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_sweep_figures_are_the_figures_plotly_makes_without_its_objects():
    """The sweep report's figures (time against energy with the Pareto front, bars per variant and mode, the
    slowdown heatmap) are plain dicts: the same figures plotly's objects give, none imported at a sweep's end."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    runs = [RunData(run_id=f"r{i}", name=f"r{i}", start_s=0, status="FINISHED",
                    tags={"variant": v, "collocation.mode": m}, params={},
                    metrics={"summary/slowdown_ratio": sd, "summary/e2e_duration_s": t, "summary/e2e_gpu_total_energy_j": e,
                             "summary/throughput_samples_per_s": thr, "summary/energy_per_sample_j": e / 1000})
            for i, (v, m, sd, t, e, thr) in enumerate([("a", "mps", 1.2, 10.0, 900.0, 50.0), ("a", "mps", 1.4, 12.0, 800.0, 40.0),
                                                       ("b", "naive", 2.0, 8.0, 1200.0, 70.0)])]

    def same(ours, theirs):
        want = theirs.to_dict()
        want["layout"].pop("template")
        got = ours.figure().to_dict()
        got["layout"].pop("template")
        assert _rounded(got) == _rounded(want)

    scatter = figures.time_energy_scatter(runs)
    pts = [(figures.time_of(r), figures.energy_of(r), r) for r in runs]
    front = pareto_front([(t, e) for t, e, _ in pts])
    ref = go.Figure()
    ref.add_trace(go.Scatter(x=[t for t, _, _ in pts], y=[e for _, e, _ in pts], mode="markers+text",
                             text=[figures._label(r) for _, _, r in pts], textposition="top center",
                             customdata=[r.run_id for _, _, r in pts], name="runs",
                             hovertemplate="%{text}<br>%{x:.2f} s, %{y:.4g} J<br>%{customdata}<extra></extra>"))
    ref.add_trace(go.Scatter(x=[pts[i][0] for i in front], y=[pts[i][1] for i in front], mode="lines+markers",
                             name="Pareto front", line=dict(dash="dash", color="#ef553b"),
                             marker=dict(size=12, symbol="circle-open")))
    ref.update_layout(title="Time vs energy", xaxis_title="duration (s)", yaxis_title="energy (J)", height=500)
    same(scatter, ref)

    bars = figures.per_variant_bars(runs)
    ref = make_subplots(rows=1, cols=2, subplot_titles=["throughput (samples/s)", "J per sample"])
    for mode, ys in (("mps", ([45.0, None], [0.85, None])), ("naive", ([None, 70.0], [None, 1.2]))):
        for col in (1, 2):
            ref.add_trace(go.Bar(x=["a", "b"], y=ys[col - 1], name=f"mode {mode}", legendgroup=mode,
                                 showlegend=col == 1), row=1, col=col)
    ref.update_layout(title="Throughput and energy per sample over the active phase, per variant and mode",
                      barmode="group", height=450)
    same(bars, ref)

    heat = figures.slowdown_heatmap(runs)
    z = [[1.3, None], [None, 2.0]]
    ref = go.Figure(go.Heatmap(z=z, x=["mps", "naive"], y=["a", "b"], colorscale="RdYlGn_r", zmin=1.0,
                               text=[[f"{c:.2f}×" if c is not None else "" for c in row] for row in z],
                               texttemplate="%{text}", colorbar=dict(title="slowdown")))
    ref.update_layout(title="Collocation slowdown (time collocated / time alone)", height=230,
                      xaxis_title="collocation mode", yaxis_title="variant")
    same(heat, ref)
