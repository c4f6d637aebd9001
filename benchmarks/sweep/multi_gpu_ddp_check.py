"""Checks a multi-GPU job's run summaries against its stored power points, from the store alone:

    python3 benchmarks/sweep/multi_gpu_ddp_check.py docs/validation/multi_gpu/ddp_mlflow.db --out ddp_check.json

For every run in the store (the `radt-ext run` wrapper and any run the job opened) and for each of its two
windows, the whole span (`summary/e2e_*`) and the active phase (`summary/*`, between the run's
`radt_ext.active_start`/`_end` tags): each GPU's `system/gpu<i>_power_w` points integrated (trapezoid) over
the window against `gpu<i>_energy_j`; their sum against `gpu_total_energy_j`; the sum of the per-GPU
averages against `gpu_total_avg_power_w`; the highest GPU's peak (summary and stored points) against
`gpu_max_peak_power_w`. Energy within 1 % for windows of 5 s or more, never 0; the rest to 1e-6.
Prints a table and writes the figures as JSON. The store is opened read-only (an MLflow client would
upgrade an older schema in place).
"""
from __future__ import annotations

import argparse
import json
import re
import sqlite3
from collections import defaultdict

ENERGY_REL = 0.01
MIN_SPAN_S = 5.0


def integrate(points: list[tuple[float, float]], t0: float, t1: float) -> float:
    pts = sorted(p for p in points if t0 <= p[0] <= t1)
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(pts, pts[1:]))


def read(db: str):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    runs = {r[0]: {"name": r[1], "status": r[2], "start": r[3] / 1000, "end": (r[4] or r[3]) / 1000}
            for r in con.execute("select run_uuid, name, status, start_time, end_time from runs")}
    for run_id, key, value in con.execute("select run_uuid, key, value from tags"):
        runs[run_id].setdefault("tags", {})[key] = value
    for run_id, key, value in con.execute("select run_uuid, key, value from latest_metrics"):
        runs[run_id].setdefault("latest", {})[key] = value
    power = defaultdict(lambda: defaultdict(list))
    for run_id, key, ts, value in con.execute(
            "select run_uuid, key, timestamp, value from metrics where key like 'system/gpu%_power_w'"):
        if m := re.match(r"system/gpu(\d+)_power_w$", key):
            power[run_id][int(m.group(1))].append((ts / 1000, value))
    return runs, power


def check(name: str, got, want, rel: float, span_s: float | None = None) -> dict:
    row = {"figure": name, "summary": got, "from_points": want}
    if got is None:
        row.update(ok=False, why="missing")
    elif want is None:
        row.update(ok=False, why="no points to check against")
    else:
        row["rel_diff"] = abs(got - want) / abs(want) if want else None
        row["ok"] = got != 0 and abs(got - want) <= rel * abs(want) if rel else abs(got - want) <= 1e-6 * max(1, abs(want))
        if span_s is not None and span_s < MIN_SPAN_S:
            row["note"] = f"window {span_s:.2f} s < {MIN_SPAN_S:.0f} s: the 1 % bound does not apply"
    return row


def window_checks(summary: dict, power: dict, prefix: str, t0: float, t1: float) -> list[dict]:
    rows, span = [], t1 - t0
    gpus = sorted(power)
    integrated = {i: integrate(power[i], t0, t1) for i in gpus}
    for i in gpus:
        rows.append(check(f"{prefix}gpu{i}_energy_j", summary.get(f"{prefix}gpu{i}_energy_j"), integrated[i], ENERGY_REL, span))
    rows.append(check(f"{prefix}gpu_total_energy_j", summary.get(f"{prefix}gpu_total_energy_j"),
                      sum(integrated.values()) if gpus else None, ENERGY_REL, span))
    avgs = [summary.get(f"{prefix}gpu{i}_avg_power_w") for i in gpus]
    rows.append(check(f"{prefix}gpu_total_avg_power_w (= sum of gpu<i>_avg_power_w)",
                      summary.get(f"{prefix}gpu_total_avg_power_w"), sum(avgs) if gpus and None not in avgs else None, 0))
    peaks = [summary.get(f"{prefix}gpu{i}_peak_power_w") for i in gpus]
    rows.append(check(f"{prefix}gpu_max_peak_power_w (= max of gpu<i>_peak_power_w)",
                      summary.get(f"{prefix}gpu_max_peak_power_w"), max(peaks) if gpus and None not in peaks else None, 0))
    in_window = [v for i in gpus for t, v in power[i] if t0 <= t <= t1]
    rows.append(check(f"{prefix}gpu_max_peak_power_w (= highest stored power point)",
                      summary.get(f"{prefix}gpu_max_peak_power_w"), max(in_window) if in_window else None, 0))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--out")
    args = ap.parse_args()
    runs, power = read(args.db)
    out = {}
    for run_id, run in sorted(runs.items(), key=lambda kv: kv[1]["start"]):
        tags, latest = run.get("tags", {}), run.get("latest", {})
        summary = {k[len("summary/"):]: v for k, v in latest.items() if k.startswith("summary/")}
        windows = {"e2e_": (run["start"], run["end"])}
        if "radt_ext.active_start" in tags:
            windows[""] = (float(tags["radt_ext.active_start"]), float(tags["radt_ext.active_end"]))
        entry = {"name": run["name"], "kind": "wrapper" if "radt_ext.command" in tags else "opened by the job",
                 "status": run["status"], "gpus_with_power_points": sorted(power.get(run_id, {})),
                 "summaries": len(summary), "windows": {}}
        for prefix, (t0, t1) in windows.items():
            entry["windows"][prefix or "active"] = {"span_s": t1 - t0,
                                                    "checks": window_checks(summary, power.get(run_id, {}), prefix, t0, t1)}
        wrapper = next((r for r, v in runs.items() if "radt_ext.command" in v.get("tags", {}) and r != run_id), None)
        if not power.get(run_id) and wrapper in power:  # what its own span holds of the job's timeline
            entry["wrapper_points_over_its_span_j"] = {
                f"gpu{i}": integrate(pts, run["start"], run["end"]) for i, pts in sorted(power[wrapper].items())}
        out[run_id] = entry
        print(f"run {run_id} {run['name']} ({entry['kind']}, {run['status']}): power points of GPUs "
              f"{entry['gpus_with_power_points']}, {len(summary)} summaries")
        for label, w in entry["windows"].items():
            print(f"  window {label}: {w['span_s']:.2f} s")
            for c in w["checks"]:
                rel = f"{100 * c['rel_diff']:.3f} %" if c.get("rel_diff") is not None else "-"
                fmt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
                print(f"    {'OK ' if c['ok'] else 'BAD'} {c['figure']}: summary {fmt(c['summary'])} vs "
                      f"{fmt(c['from_points'])} ({rel}){' ' + c['why'] if c.get('why') else ''}"
                      f"{'; ' + c['note'] if c.get('note') else ''}")
        if "wrapper_points_over_its_span_j" in entry:
            print(f"  the job's power points over its span ({run['end'] - run['start']:.2f} s): " + ", ".join(
                f"{g} {j:.1f} J" for g, j in entry["wrapper_points_over_its_span_j"].items()))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
