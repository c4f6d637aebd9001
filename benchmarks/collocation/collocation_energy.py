"""The energy-share validation, read back from the store that benchmarks/collocation/collocation_energy.sh filled.

    python benchmarks/collocation/collocation_energy.py --store sqlite:///mlflow.db [--samples proc_samples.jsonl] \
        --out collocation_energy          # writes collocation_energy.md and .json
        [--figure page.html]              # plotly page: stacked attributed power, shares vs alone
        [--series inputs.json --note ...] # the split's inputs per group (the tests' H100 fixture)

For every group (parent run) of the experiment: the GPU counter energy, the children's attributed
energy as the group runner logged it, and the same split recomputed here from the store (the
parent's power/energy series, the children's per-process SM %) and, with --samples, from NVML's raw
per-process samples (every sample, matched to runs by the process's RADT_EXT_ACTIVE). Then:
- identical workloads (group names starting `same-`): the gap between the two shares;
- a workload's share beside another (`mixed-*`) against its energy alone (the `alone` exclusive group).
The comparisons use the split as this code computes it from the store; the runs' logged values sit beside.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from mlflow.tracking import MlflowClient

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from radt_ext.collocation.attribution import WorkloadActivity, attribute  # noqa: E402
from radt_ext.figures.summary_names import upgrade  # noqa: E402

EXPERIMENT = "collocation-energy"


def series(client, run_id: str, key: str) -> list[tuple[float, float]]:
    """A run's timeline at its full rate: its timeline artifact (the store holds the timeline's shape)."""
    from radt_ext.store import timelines

    return sorted((m.timestamp / 1000.0, m.value) for m in timelines.history(client, run_id, [key])[key])


def raw_activity(path: str | None) -> dict[str, list[tuple[float, float]]]:
    """{run id: [(t, SM % summed over its processes' samples at t)]} from the raw sample file."""
    if not path or not os.path.exists(path):
        return {}
    owner: dict[int, str] = {}
    by_run: dict[str, dict[float, float]] = {}
    rows = []
    with open(path) as fh:
        for line in fh:
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue
    for row in rows:
        if row.get("kind") == "proc" and row.get("run_id"):
            owner[int(row["pid"])] = row["run_id"]
    for row in rows:
        if row.get("kind") == "util" and int(row["pid"]) in owner:
            points = by_run.setdefault(owner[int(row["pid"])], {})
            points[row["t"]] = points.get(row["t"], 0.0) + float(row["sm"])
    return {run: sorted(points.items()) for run, points in by_run.items()}


def raw_unowned(path: str | None) -> dict[str, int]:
    """Samples of processes that belong to no run (an MPS server, say): {name: count}."""
    if not path or not os.path.exists(path):
        return {}
    names, owned, counts = {}, set(), {}
    with open(path) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for row in rows:
        if row.get("kind") == "proc":
            names[int(row["pid"])] = row.get("name") or str(row["pid"])
            if row.get("run_id"):
                owned.add(int(row["pid"]))
    for row in rows:
        if row.get("kind") == "util" and int(row["pid"]) not in owned and row.get("sm", 0) > 0:
            name = names.get(int(row["pid"]), str(row["pid"]))
            counts[name] = counts.get(name, 0) + 1
    return counts


def group_rows(client, uri_samples: str | None) -> list[dict]:
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], max_results=1000, order_by=["attributes.start_time ASC"])
    raw = raw_activity(uri_samples)
    out = []
    for parent in [r for r in runs if "mlflow.parentRunId" not in r.data.tags]:
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
        kids.sort(key=lambda r: int(r.data.tags.get("collocation.index", 0)))
        m = upgrade(dict(parent.data.metrics))  # runs of any version, by today's names
        power = series(client, parent.info.run_id, "system/gpu0_power_w")
        energy = series(client, parent.info.run_id, "system/gpu0_energy_j")
        work_store, work_raw = [], []
        for k in kids:
            start = float(k.data.tags.get("collocation.started_s", k.info.start_time / 1000.0))
            end = float(k.data.tags.get("collocation.ended_s", 0) or (k.info.end_time or 0) / 1000.0) or None
            name = k.data.tags.get("collocation.workload", k.info.run_name)
            work_store.append(WorkloadActivity(name, start, end, series(client, k.info.run_id, "system/gpu0_proc_sm_pct")))
            work_raw.append(WorkloadActivity(name, start, end, raw.get(k.info.run_id, [])))
        store = attribute(power, work_store, energy, one_per_tick=True) if power else None
        overlap, lo, hi = None, 0.0, 0.0
        if power and len(work_store) > 1 and all(w.end for w in work_store):
            # the split where every workload ran: what it gives apart from how long each one ran
            lo, hi = max(w.start for w in work_store), min(w.end for w in work_store)
            inside = lambda points: [p for p in points if lo <= p[0] <= hi]  # noqa: E731
            if hi > lo:
                overlap = attribute(inside(power), work_store, inside(energy), one_per_tick=True)
        offline = attribute(power, work_raw, energy, one_per_tick=True) if power and raw else None
        row = {"group": parent.info.run_name, "mode": parent.data.tags.get("collocation.mode"),
               "status": parent.info.status, "run_id": parent.info.run_id,
               "makespan_s": m.get("summary/makespan_s"), "gpu_energy_j": m.get("summary/e2e_gpu_total_energy_j"),
               "idle_j": m.get("summary/gpu_energy_idle_j"), "unattributed_j": m.get("summary/gpu_energy_unattributed_j"),
               "idle_power_w": m.get("summary/gpu_idle_power_w"), "even_split_s": m.get("summary/attribution_even_split_s"),
               "attribution_error": parent.data.tags.get("radt_ext.attribution_error"),
               "store_even_split_s": store.even_split_s if store else None,
               "raw_even_split_s": offline.even_split_s if offline else None,
               "overlap_s": hi - lo if overlap else None, "overlap_even_split_s": overlap.even_split_s if overlap else None,
               "children": []}
        for k, ws in zip(kids, work_store):
            km = upgrade(dict(k.data.metrics))
            child = {"name": ws.name, "status": k.info.status, "run_id": k.info.run_id,
                     "duration_s": km.get("summary/e2e_duration_s"), "samples": km.get("summary/e2e_samples"),
                     "attributed_j": km.get("summary/gpu_energy_attributed_j"),
                     "active_j": km.get("summary/gpu_energy_active_attributed_j"),
                     "idle_share_j": km.get("summary/gpu_energy_idle_attributed_j"),
                     "per_sample_j": km.get("summary/energy_per_sample_attributed_j"),
                     "avg_proc_sm_pct": _mean(series(client, k.info.run_id, "system/gpu0_proc_sm_pct")),
                     "store_j": store.shares[ws.name].energy_j if store else None,
                     "store_active_j": store.shares[ws.name].active_j if store else None,
                     "raw_j": offline.shares[ws.name].energy_j if offline else None,
                     "raw_active_j": offline.shares[ws.name].active_j if offline else None,
                     "overlap_j": overlap.shares[ws.name].energy_j if overlap else None,
                     "start_s": ws.start, "end_s": ws.end}
            row["children"].append(child)
        parts = [c["attributed_j"] for c in row["children"]]
        if row["gpu_energy_j"] and all(p is not None for p in parts):
            row["sum_gap_pct"] = 100.0 * abs(sum(parts) + (row["unattributed_j"] or 0.0) - row["gpu_energy_j"]) / row["gpu_energy_j"]
        out.append(row)
    return out


def _mean(points):
    return sum(v for _, v in points) / len(points) if points else None


def _pct(a, b):
    return None if a is None or not b else 100.0 * (a - b) / b


def validation(groups: list[dict]) -> dict:
    by_name = {g["group"]: g for g in groups}
    out = {"identical": [], "versus_alone": []}
    for g in groups:
        if g["group"].startswith("same-") and len(g["children"]) == 2:
            a, b = g["children"]
            for key in ("attributed_j", "store_j", "raw_j", "overlap_j"):
                if a.get(key) and b.get(key):
                    gap = 100.0 * abs(a[key] - b[key]) / ((a[key] + b[key]) / 2)
                    out["identical"].append({"group": g["group"], "mode": g["mode"], "source": key,
                                             "even_split_s": g[{"attributed_j": "even_split_s",
                                                                "store_j": "store_even_split_s",
                                                                "raw_j": "raw_even_split_s",
                                                                "overlap_j": "overlap_even_split_s"}[key]],
                                             "end_gap_s": abs(a["end_s"] - b["end_s"]) if a["end_s"] and b["end_s"] else None,
                                             "a_j": a[key], "b_j": b[key], "gap_pct": gap, "within_10pct": gap <= 10.0})
    alone = {c["name"]: c for c in by_name.get("alone", {}).get("children", [])}
    for g in groups:
        if not g["group"].startswith("mixed-"):
            continue
        for c in g["children"]:
            base = alone.get(c["name"])
            if not base:
                continue
            # the split as this code computes it from the store (the runs' own values may come from an
            # earlier version of it: `logged_j`)
            share, alone_j = c["store_j"], base["store_j"]
            samples, alone_samples = c.get("samples"), base.get("samples")
            out["versus_alone"].append({
                "group": g["group"], "mode": g["mode"], "workload": c["name"],
                "attributed_j": share, "alone_j": alone_j, "error_pct": _pct(share, alone_j),
                "active_j": c["store_active_j"], "alone_active_j": base["store_active_j"],
                "active_error_pct": _pct(c["store_active_j"], base["store_active_j"]),
                "logged_j": c["attributed_j"], "logged_alone_j": base["attributed_j"],
                "raw_j": c["raw_j"], "raw_error_pct": _pct(c["raw_j"], base["raw_j"]),
                "per_sample_j": share / samples if share and samples else None,
                "alone_per_sample_j": alone_j / alone_samples if alone_j and alone_samples else None})
    return out


def _f(v, d=1):
    return "–" if v is None else (f"{v:.{d}f}" if isinstance(v, float) else str(v))


def markdown(groups: list[dict], val: dict, unowned: dict) -> str:
    lines = ["| group | mode | status | makespan s | GPU energy J (counter) | idle W | idle J | group's J | "
             "even-split s | workload | attributed J | active J | recomputed J (store / raw samples) | "
             "J/sample | avg proc SM % | parts vs counter |",
             "|" + "---|" * 16]
    for g in groups:
        for i, c in enumerate(g["children"]):
            head = [g["group"], g["mode"], g["status"], _f(g["makespan_s"]), _f(g["gpu_energy_j"]),
                    _f(g["idle_power_w"]), _f(g["idle_j"]), _f(g["unattributed_j"]), _f(g["even_split_s"])] if i == 0 \
                else [""] * 9
            tail = [_f(g.get("sum_gap_pct"), 3) + " %" if i == 0 and g.get("sum_gap_pct") is not None else ""]
            lines.append("| " + " | ".join(head + [c["name"], _f(c["attributed_j"]), _f(c["active_j"]),
                                                   f"{_f(c['store_j'])} / {_f(c['raw_j'])}", _f(c["per_sample_j"], 4),
                                                   _f(c["avg_proc_sm_pct"])] + tail) + " |")
    lines += ["", "Identical workloads (gap between the two shares, of their mean):", "",
              "| group | mode | source | a J | b J | gap % | within 10 % | ends apart s | even-split s |",
              "|---|---|---|---|---|---|---|---|---|"]
    sources = {"attributed_j": "as logged by the run", "store_j": "recomputed from the store",
               "raw_j": "recomputed from raw NVML samples", "overlap_j": "while both ran (from the store)"}
    for r in val["identical"]:
        lines.append(f"| {r['group']} | {r['mode']} | {sources[r['source']]} | {_f(r['a_j'])} | {_f(r['b_j'])} | "
                     f"{_f(r['gap_pct'], 2)} | {'yes' if r['within_10pct'] else 'no'} | {_f(r['end_gap_s'], 2)} | "
                     f"{_f(r['even_split_s'])} |")
    lines += ["", "Share beside another workload against the energy alone (exclusive), split recomputed from the "
              "store; the runs' own logged values in the last column:", "",
              "| group | mode | workload | attributed J | alone J | error % | active J | alone active J | active error % | "
              "J/sample (shared / alone) | raw samples error % | logged J (alone) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in val["versus_alone"]:
        lines.append(f"| {r['group']} | {r['mode']} | {r['workload']} | {_f(r['attributed_j'])} | {_f(r['alone_j'])} | "
                     f"{_f(r['error_pct'])} | {_f(r['active_j'])} | {_f(r['alone_active_j'])} | "
                     f"{_f(r['active_error_pct'])} | {_f(r['per_sample_j'], 4)} / {_f(r['alone_per_sample_j'], 4)} | "
                     f"{_f(r['raw_error_pct'])} | {_f(r['logged_j'])} ({_f(r['logged_alone_j'])}) |")
    if unowned:
        lines += ["", "Raw per-process samples with SM > 0 from processes of no run: "
                  + ", ".join(f"{k}: {v}" for k, v in sorted(unowned.items()))]
    return "\n".join(lines) + "\n"


def figure(client, groups: list[dict], val: dict, path: str) -> None:
    """One plotly page (plotly.js from its CDN, so the file stays small): each group's attributed
    power stacked under the GPU's power, and the shares against the energy alone."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    shown = [g for g in groups if g["group"] != "alone" and g["children"]]
    rows = len(shown) + 1
    fig = make_subplots(rows=rows, cols=1, vertical_spacing=0.06,
                        subplot_titles=[f"{g['group']} ({g['mode']}): GPU power by workload, stacked (as the run logged it)" for g in shown]
                        + ["Attributed energy beside another workload vs the energy alone"])
    colors = ["#636efa", "#ef553b", "#00cc96", "#ab63fa"]
    for row, g in enumerate(shown, start=1):
        origin = None
        power = series(client, g["run_id"], "system/gpu0_power_w")
        if power:
            origin = power[0][0]
        for ci, c in enumerate(g["children"]):
            pts = series(client, c["run_id"], "system/gpu0_power_attributed_w")
            origin = origin if origin is not None else (pts[0][0] if pts else 0.0)
            fig.add_trace(go.Scatter(x=[t - origin for t, _ in pts], y=[v for _, v in pts], stackgroup=f"g{row}",
                                     name=f"{g['group']}: {c['name']}", line=dict(width=0.5, color=colors[ci % 4])),
                          row=row, col=1)
        if power:
            fig.add_trace(go.Scatter(x=[t - origin for t, _ in power], y=[v for _, v in power], name=f"{g['group']}: GPU",
                                     line=dict(width=1, color="black")), row=row, col=1)
        fig.update_yaxes(title_text="W", row=row, col=1)
    labels = [f"{r['workload']} ({r['group']})" for r in val["versus_alone"]]
    fig.add_trace(go.Bar(x=labels, y=[r["attributed_j"] for r in val["versus_alone"]], name="attributed (shared)"),
                  row=rows, col=1)
    fig.add_trace(go.Bar(x=labels, y=[r["alone_j"] for r in val["versus_alone"]], name="alone (exclusive)"),
                  row=rows, col=1)
    fig.update_yaxes(title_text="J", row=rows, col=1)
    fig.update_layout(height=320 * rows, barmode="group", title="Each collocated workload's GPU energy")
    fig.write_html(path, include_plotlyjs="cdn")


def export_series(client, groups: list[dict], path: str, meta: dict) -> None:
    """The inputs of every group's split (GPU power and counter, each workload's window and SM
    samples) as one JSON file: what the tests replay."""
    out = {"meta": meta, "groups": {}}
    for g in groups:
        out["groups"][g["group"]] = {
            "mode": g["mode"],
            "power_w": series(client, g["run_id"], "system/gpu0_power_w"),
            "energy_j": series(client, g["run_id"], "system/gpu0_energy_j"),
            "workloads": [{"name": c["name"], "start": c["start_s"], "end": c["end_s"],
                           "sm_pct": series(client, c["run_id"], "system/gpu0_proc_sm_pct")} for c in g["children"]]}
    with open(path, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True, help="tracking URI, e.g. sqlite:///mlflow.db")
    ap.add_argument("--samples", default=None, help="raw per-process samples (listeners.record_proc_samples)")
    ap.add_argument("--out", required=True, help="output path without extension")
    ap.add_argument("--figure", default=None, help="also write this plotly HTML page")
    ap.add_argument("--series", default=None, help="also write the split's inputs per group as JSON")
    ap.add_argument("--note", default="", help="provenance for --series (machine, command)")
    args = ap.parse_args(argv)
    client = MlflowClient(args.store)
    groups = group_rows(client, args.samples)
    val = validation(groups)
    unowned = raw_unowned(args.samples)
    with open(args.out + ".json", "w") as fh:
        json.dump({"groups": groups, "validation": val, "unowned_samples": unowned}, fh, indent=1)
    if args.figure:
        figure(client, groups, val, args.figure)
    if args.series:
        export_series(client, groups, args.series, {"note": args.note})
    text = markdown(groups, val, unowned)
    with open(args.out + ".md", "w") as fh:
        fh.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
