"""Figures: one run's timelines, a collocation group's and its energy split, a sweep's trade-offs, as plain
figure dicts (stacked.py: no plotly import at a run's, a group's or a sweep's end)."""
from __future__ import annotations

import math
import re

from listeners.energy_timeline import EnergyTimeline
from radt_ext.report.data import RunData, Series
from radt_ext.report.pareto import pareto_front
from radt_ext.report.stacked import Columns, Figure, Stacked

PALETTE = ["#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880"]  # one per workload
MAX_POINTS = 1500  # per trace; longer series keep each bucket's min and max
# points a figure draws in all: its series share them (a report stays a few hundred KB however long the
# run; the full series are in the run's System metrics tab)
FIGURE_POINTS = 12_000
MIN_POINTS = 200


def point_limit(series: int) -> int:
    """Points each of `series` traces of one figure keeps."""
    return max(MIN_POINTS, min(MAX_POINTS, FIGURE_POINTS // max(1, series)))


def _panel_matchers():
    gpu = r"gpu\d+_"
    return [
        ("Power", "W", re.compile(r".*_power_w$")),
        ("Cumulative energy", "J", None),  # built from *_energy_j counters, else from power
        ("Temperature", "°C", re.compile(r".*_temp_c$")),
        ("SM and tensor activity", "%", re.compile(gpu + r"(sm_active|tensor_active|sm_occupancy|util|dram_active)_pct$")),
        ("Clocks", "MHz", re.compile(r".*_clock_mhz$")),
        ("GPU memory", "MiB", re.compile(gpu + r"mem_used_mib$")),
        ("CPU", "%", re.compile(r"^(host_cpu|proc_cpu|cpu\d+_util)_pct$")),
        ("Work", "samples/s", re.compile(r"^throughput_samples_per_s$")),
    ]


PANELS = [p[0] for p in _panel_matchers()]


def downsample(s: Series, limit: int = MAX_POINTS) -> Series:
    """At most ~limit points, keeping each bucket's extremes so peaks stay visible."""
    n = len(s.t)
    if n <= limit:
        return s
    bucket = math.ceil(n / (limit / 2))
    t, v = [], []
    for i in range(0, n, bucket):
        idx = range(i, min(i + bucket, n))
        lo = min(idx, key=lambda j: s.v[j])
        hi = max(idx, key=lambda j: s.v[j])
        for j in sorted({lo, hi}):
            t.append(s.t[j])
            v.append(s.v[j])
    return Series(t, v)


def cumulative_energy(system: dict[str, Series]) -> dict[str, Series]:
    """Energy since the first sample: counters (`*_energy_j`) rebased to 0 — where a counter was
    stored only at its reads (a run recorded before its course was logged between reads), the course
    between reads rebuilt from the power samples as the listener builds it; where a device has power
    but no counter, the trapezoid integral of its power."""
    out = {}
    for name, s in system.items():
        if name.endswith("_energy_j") and s.v:
            s = with_course(s, system.get(name[: -len("_energy_j")] + "_power_w"))
            out[name] = Series(list(s.t), [v - s.v[0] for v in s.v])
    for name, s in system.items():
        if name.endswith("_power_w"):
            energy = name[: -len("_power_w")] + "_energy_j"
            if energy in out or not s.t:
                continue
            acc, vals = 0.0, [0.0]
            for i in range(1, len(s.t)):
                acc += (s.t[i] - s.t[i - 1]) * (s.v[i] + s.v[i - 1]) / 2.0
                vals.append(acc)
            out[energy + " (integrated)"] = Series(list(s.t), vals)
    return out


def with_course(counter: Series, power: Series | None, sparse_s: float = 1.0) -> Series:
    """A counter stored less than once a second, with its course between reads from the power samples
    (listeners/energy_timeline.py: their integral rescaled to meet the counter at each read)."""
    t = counter.t
    if power is None or len(power.t) < 2 or len(t) < 2 or max(b - a for a, b in zip(t, t[1:])) <= sparse_s:
        return counter
    timeline = EnergyTimeline(t[0], counter.v[0])
    points, k = [(t[0], counter.v[0])], 0
    samples = list(zip(power.t, power.v))
    for read_t, read_v in zip(t[1:], counter.v[1:]):
        j = k
        while j < len(samples) and samples[j][0] <= read_t:
            j += 1
        timeline.power(samples[k:j])
        k = j
        points += timeline.counter(read_t, read_v)
    return Series([p[0] for p in points], [p[1] for p in points])


def panels(system: dict[str, Series]) -> list[tuple[str, str, dict[str, Series]]]:
    """(title, unit, {name: series}) for each panel the data can fill, in a fixed order."""
    out = []
    for title, unit, pattern in _panel_matchers():
        if pattern is None:
            chosen = cumulative_energy(system)
        else:
            chosen = {k: s for k, s in sorted(system.items()) if pattern.match(k) and s.t}
        if chosen:
            out.append((title, unit, chosen))
    return out


def _line(x: float, color: str) -> dict:
    """A dotted vertical line through every panel (the panels share one time axis)."""
    return dict(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1,
                line=dict(width=1, dash="dot", color=color))


def _band(x0: float, x1: float, color: str, opacity: float, line: dict) -> dict:
    """A shaded span through every panel, below the lines."""
    return dict(type="rect", xref="x", yref="paper", x0=x0, x1=x1, y0=0, y1=1, fillcolor=color, opacity=opacity,
                line=line, layer="below")


def _add_markers(fig: Stacked, run: RunData) -> None:
    shapes = []
    if run.active is not None:  # the span the unprefixed summaries cover; before it, start-up
        source = run.tags.get("radt_ext.active_source", "")
        shapes.append(_band(run.active[0], run.active[1], "#ffa15a", 0.06, dict(width=1, color="#ffa15a")))
        fig.add_trace(dict(x=[run.active[0], run.active[1]], y=[0, 0], mode="markers",
                           marker=dict(symbol="line-ns-open", size=12, color="#ffa15a"),
                           text=[f"active phase starts ({source})", "active phase ends"],
                           hoverinfo="text+x", name="active phase", showlegend=True))
    for i, (start, end, label) in enumerate(run.epochs):
        shapes.append(_band(start, end, "#636efa" if i % 2 else "#00cc96", 0.08, dict(width=0)))
        shapes.append(_line(start, "#888"))
    shapes += [_line(t, "#888") for t, label in run.markers]
    fig.add_shapes(shapes)
    # hoverable labels: invisible points on the first panel
    labelled = [(s, lab) for s, _, lab in run.epochs] + list(run.markers)
    if labelled:
        fig.add_trace(dict(x=[t for t, _ in labelled], y=[0] * len(labelled), mode="markers",
                           marker=dict(symbol="triangle-up", size=8, color="#888"),
                           text=[lab for _, lab in labelled], hoverinfo="text+x", name="epochs/phases",
                           showlegend=True))


def run_timelines(run: RunData, title: str | None = None) -> Stacked | None:
    """Every panel the run's data can fill, stacked on one shared time axis."""
    found = panels(run.system)
    if not found:
        return None
    fig = Stacked([f"{t} ({u})" for t, u, _ in found])
    limit = point_limit(sum(len(series) for _, _, series in found))
    for row, (panel, unit, series) in enumerate(found, start=1):
        for name, s in series.items():
            s = downsample(s, limit)
            fig.add_trace(dict(x=s.t, y=s.v, mode="lines", name=name, legendgroup=panel,
                               hovertemplate=f"{name}: %{{y:.4g}} {unit}<br>t=%{{x:.2f}} s<extra></extra>"), row)
        fig.axis_title("y", row, unit)
    _add_markers(fig, run)
    fig.axis_title("x", len(found), "seconds since start")
    fig.update_layout(title=title or f"{run.name} ({run.run_id[:8]}) · {run.status}", height=220 * len(found) + 120,
                      legend=dict(groupclick="toggleitem"), margin=dict(l=60, r=20, t=80, b=40))
    return fig


def group_timelines(children: list[RunData], title: str) -> Stacked | None:
    """A collocation group: for each panel, every child's lines on one shared time axis,
    children told apart by colour (one per child) — the panels stacked."""
    names = [t for t in PANELS if any(t == p for c in children for p, _, _ in panels(c.system))]
    if not names:
        return None
    fig = Stacked(names)
    limit = point_limit(sum(len(series) for c in children for _, _, series in panels(c.system)))
    shapes = []
    for ci, child in enumerate(children):
        color = PALETTE[ci % len(PALETTE)]
        label = f"{child.name} ({child.tags.get('variant', child.run_id[:8])})"
        first = True
        for panel, unit, series in panels(child.system):
            row = names.index(panel) + 1
            for name, s in series.items():
                s = downsample(s, limit)
                fig.add_trace(dict(x=s.t, y=s.v, mode="lines", name=label, legendgroup=child.run_id,
                                   showlegend=first, line=dict(color=color, width=1.5),
                                   hovertemplate=f"{label} {name}: %{{y:.4g}} {unit}<extra></extra>"), row)
                first = False
            fig.axis_title("y", row, unit)
        shapes += [_line(start, color) for start, _, _ in child.epochs] + [_line(t, color) for t, _ in child.markers]
    fig.add_shapes(shapes)
    fig.axis_title("x", len(names), "seconds since the group started")
    fig.update_layout(title=title, height=220 * len(names) + 120, margin=dict(l=60, r=20, t=80, b=40))
    return fig


ATTRIBUTED = re.compile(r"^gpu\d+_power_attributed_w$")


def energy_split(parent: RunData, children: list[RunData]) -> Stacked | None:
    """Each workload's share of the group's GPU energy: the attributed power stacked over time
    (with the GPU's own power as a line) and the energy by workload, active and idle parts."""
    kids = [c for c in children if "gpu_energy_attributed_j" in c.summary]
    if not kids:
        return None
    fig = Stacked(["GPU power by workload (stacked)", "GPU energy by workload"], spacing=0.12,
                  heights=[0.65, 0.35], shared=False)
    for ci, child in enumerate(kids):
        color = PALETTE[ci % len(PALETTE)]
        for name, s in child.system.items():
            if ATTRIBUTED.match(name):
                s = downsample(s)
                fig.add_trace(dict(x=s.t, y=s.v, mode="lines", stackgroup="power", name=child.name,
                                   legendgroup=child.run_id, line=dict(color=color, width=0.5),
                                   hovertemplate=f"{child.name}: %{{y:.4g}} W<extra></extra>"), 1)
    for name, s in parent.system.items():
        if re.fullmatch(r"gpu\d+_power_w", name):
            s = downsample(s)
            fig.add_trace(dict(x=s.t, y=s.v, mode="lines", name=f"GPU {name}", line=dict(color="black", width=1),
                               hovertemplate=f"{name}: %{{y:.4g}} W<extra></extra>"), 1)
    names = [c.name for c in kids]
    active = [c.summary.get("gpu_energy_active_attributed_j", c.summary["gpu_energy_attributed_j"]) for c in kids]
    idle = [c.summary.get("gpu_energy_idle_attributed_j", 0.0) for c in kids]
    rest = parent.summary.get("gpu_energy_unattributed_j")
    if rest is not None:
        names, active, idle = names + ["group (no workload running)"], active + [rest], idle + [0.0]
    fig.add_trace(dict(type="bar", y=names, x=active, orientation="h", name="active", marker=dict(color="#636efa"),
                       hovertemplate="%{y}: %{x:.4g} J active<extra></extra>"), 2)
    fig.add_trace(dict(type="bar", y=names, x=idle, orientation="h", name="idle share", marker=dict(color="#b6b6b6"),
                       hovertemplate="%{y}: %{x:.4g} J of idle power<extra></extra>"), 2)
    bounded = [c for c in kids if "gpu_energy_attributed_low_j" in c.summary and "gpu_energy_attributed_high_j" in c.summary]
    if bounded:  # the interval the samples allow around each share (active + idle)
        energy = [c.summary["gpu_energy_attributed_j"] for c in bounded]
        fig.add_trace(dict(
            y=[c.name for c in bounded], x=energy, mode="markers", name="interval the samples allow",
            marker=dict(color="black", size=6, symbol="line-ns-open"),
            error_x=dict(type="data", symmetric=False, color="black",
                         array=[c.summary["gpu_energy_attributed_high_j"] - e for c, e in zip(bounded, energy)],
                         arrayminus=[e - c.summary["gpu_energy_attributed_low_j"] for c, e in zip(bounded, energy)]),
            hovertemplate="%{y}: %{x:.4g} J, interval from the low to the high end<extra></extra>"), 2)
    fig.axis_title("y", 1, "W")
    fig.axis_title("x", 1, "seconds since the group started")
    fig.axis_title("x", 2, "J")
    total = parent.summary.get("e2e_gpu_total_energy_j")
    title = "Each workload's share of the GPU energy" + (f" (counter: {total:.4g} J)" if total else "")
    fig.update_layout(title=title, barmode="stack", height=700, margin=dict(l=60, r=20, t=80, b=40))
    return fig


# ---- sweeps ---------------------------------------------------------------------------------

def _label(run: RunData) -> str:
    mode = run.tags.get("collocation.mode")
    variant = run.tags.get("variant") or run.tags.get("recipe") or run.name
    return f"{variant} [{mode}]" if mode else variant


def energy_of(run: RunData) -> float | None:
    s = run.summary
    for key in ("e2e_gpu_total_energy_j", "e2e_gpu_total_energy_integrated_j", "e2e_cpu_energy_j"):
        if key in s:
            return s[key]
    return None


def time_of(run: RunData) -> float | None:
    """A run's duration; a collocation group's makespan."""
    s = run.summary
    return s.get("makespan_s", s.get("e2e_duration_s"))


def time_energy_scatter(runs: list[RunData], title: str = "Time vs energy") -> Figure | None:
    pts = [(time_of(r), energy_of(r), r) for r in runs if time_of(r) is not None and energy_of(r) is not None]
    if not pts:
        return None
    front = pareto_front([(t, e) for t, e, _ in pts])
    fig = Figure()
    fig.add_trace(dict(x=[t for t, _, _ in pts], y=[e for _, e, _ in pts], mode="markers+text",
                       text=[_label(r) for _, _, r in pts], textposition="top center",
                       customdata=[r.run_id for _, _, r in pts], name="runs",
                       hovertemplate="%{text}<br>%{x:.2f} s, %{y:.4g} J<br>%{customdata}<extra></extra>"))
    fx = [pts[i][0] for i in front]
    fy = [pts[i][1] for i in front]
    fig.add_trace(dict(x=fx, y=fy, mode="lines+markers", name="Pareto front",
                       line=dict(dash="dash", color="#ef553b"), marker=dict(size=12, symbol="circle-open")))
    fig.update_layout(title=title, height=500)
    fig.axis_titles("duration (s)", "energy (J)")
    return fig


def per_variant_bars(runs: list[RunData]) -> Columns | None:
    """Throughput and J/sample over the active phase by variant, one bar group per collocation mode (mean
    over repeats)."""
    metrics = [("throughput_samples_per_s", "throughput (samples/s)"), ("energy_per_sample_j", "J per sample")]
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in runs:
        key = (r.tags.get("variant") or r.tags.get("recipe") or r.name, r.tags.get("collocation.mode", "-"))
        for m, _ in metrics:
            if m in r.summary:
                groups.setdefault(key, {}).setdefault(m, []).append(r.summary[m])
    if not groups:
        return None
    fig = Columns([t for _, t in metrics])
    modes = sorted({mode for _, mode in groups})
    variants = sorted({v for v, _ in groups})
    for mode in modes:
        for col, (m, _) in enumerate(metrics, start=1):
            ys = [sum(groups.get((v, mode), {}).get(m, [])) / len(groups[(v, mode)][m])
                  if groups.get((v, mode), {}).get(m) else None for v in variants]
            fig.add_trace(dict(type="bar", x=variants, y=ys, name=f"mode {mode}", legendgroup=mode,
                               showlegend=col == 1), col)
    fig.update_layout(title="Throughput and energy per sample over the active phase, per variant and mode", barmode="group", height=450)
    return fig


SLOWDOWN_KEYS = ("collocation/slowdown", "collocation/slowdown_ratio", "summary/slowdown_ratio", "slowdown")


def slowdown_of(run: RunData) -> float | None:
    for key in SLOWDOWN_KEYS:
        if key in run.metrics:
            return run.metrics[key]
    return None


# plotly's "RdYlGn_r": green for no slowdown, red for the most
RDYLGN_R = [[0.0, "rgb(0,104,55)"], [0.1, "rgb(26,152,80)"], [0.2, "rgb(102,189,99)"], [0.3, "rgb(166,217,106)"],
            [0.4, "rgb(217,239,139)"], [0.5, "rgb(255,255,191)"], [0.6, "rgb(254,224,139)"], [0.7, "rgb(253,174,97)"],
            [0.8, "rgb(244,109,67)"], [0.9, "rgb(215,48,39)"], [1.0, "rgb(165,0,38)"]]


def slowdown_heatmap(runs: list[RunData]) -> Figure | None:
    """Mean slowdown of each variant (rows) under each collocation mode (columns)."""
    cells: dict[tuple[str, str], list[float]] = {}
    for r in runs:
        value = slowdown_of(r)
        mode = r.tags.get("collocation.mode")
        if value is None or not mode:
            continue
        cells.setdefault((r.tags.get("variant") or r.name, mode), []).append(value)
    if not cells:
        return None
    variants = sorted({v for v, _ in cells})
    modes = sorted({m for _, m in cells})
    z = [[(sum(cells[(v, m)]) / len(cells[(v, m)])) if (v, m) in cells else None for m in modes] for v in variants]
    fig = Figure()
    fig.add_trace(dict(type="heatmap", z=z, x=modes, y=variants, colorscale=RDYLGN_R, zmin=1.0,
                       text=[[f"{c:.2f}×" if c is not None else "" for c in row] for row in z],
                       texttemplate="%{text}", colorbar=dict(title=dict(text="slowdown"))))
    fig.update_layout(title="Collocation slowdown (time collocated / time alone)", height=150 + 40 * len(variants))
    fig.axis_titles("collocation mode", "variant")
    return fig
