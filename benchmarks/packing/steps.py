"""A packing proof's steps read back from its store: each step's makespan (first group start to last group
end), groups, jobs FINISHED, total GPU energy and what the guard did; per job and step its mode and GPU, its
measured active phase, slowdown, wall time and attributed GPU energy beside the planner's predictions (the
`pack.*` tags) and its active phase; the dry run's planned makespans; the seconds active phases ran side
by side on a GPU. pack_bound.py and pack_heldout.py build their tables on these.

    collect(MlflowClient(uri), {"alone": [t0, t1], "packed": [t0, t1]}, experiment)
    planned("plan.txt")   # {"packed_s", "alone_s", "ratio"} from a `radt-ext sweep --dry-run` of a packed step
    cored_s([(gpu, (start, end)), ...])  # seconds two or more jobs' active phases overlapped on a GPU
    analysis_args(parser) # an analysis's --store, --steps, --out, --max-slowdown; read_steps(args) the steps file
"""
from __future__ import annotations

import json
import os
import re

from radt_ext.figures.summary_names import value

# a group's GPU energy over its whole run (today's name; runs of earlier versions read by their old one)
GROUP_ENERGY = "e2e_gpu_total_energy_j"


def _span(runs) -> tuple[float, float] | None:
    ends = [r.info.end_time for r in runs if r.info.end_time]
    return (min(r.info.start_time for r in runs) / 1000.0, max(ends) / 1000.0) if runs and ends else None


def collect(client, steps: dict[str, list[float]], experiment: str) -> dict:
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], "", max_results=10000) if exp else []
    out: dict = {"steps": {}, "jobs": {}}
    for step, (t0, t1) in steps.items():
        inside = [r for r in runs
                  if t0 <= r.info.start_time / 1000.0 <= t1
                  and r.data.tags.get("sweep.role") not in ("report", "setting")]  # not the sweep's own runs
        parents = [r for r in inside if "mlflow.parentRunId" not in r.data.tags]
        kids = [r for r in inside if "mlflow.parentRunId" in r.data.tags]
        span = _span(parents)
        energy = [value(r.data.metrics, GROUP_ENERGY) for r in parents]
        out["steps"][step] = {
            "wall_s": t1 - t0, "makespan_s": span[1] - span[0] if span else None, "groups": len(parents),
            "jobs": len(kids), "finished": sum(r.info.status == "FINISHED" for r in kids),
            "gpu_energy_j": sum(e for e in energy if e is not None), "groups_without_energy": energy.count(None),
            "modes": sorted({r.data.tags.get("collocation.mode", "?") for r in parents}),
            # what the guard did in each shared group (collocation/guard.py)
            "guard": {r.data.tags.get("pack.decision", r.info.run_id): r.data.tags["collocation.guard"]
                      for r in parents if "collocation.guard" in r.data.tags},
        }
        for k in kids:
            m, t = k.data.metrics, k.data.tags
            job = out["jobs"].setdefault(t.get("sweep.workload_hash", k.info.run_id), {"name": t.get("sweep.workload")})
            job[step] = {"run_id": k.info.run_id, "status": k.info.status, "mode": t.get("collocation.mode"),
                         "gpu": t.get("collocation.gpu"), "duration_s": value(m, "e2e_duration_s"),
                         "start_s": k.info.start_time / 1000.0,
                         "end_s": k.info.end_time / 1000.0 if k.info.end_time else None,
                         "samples": value(m, "e2e_samples"), "steps_per_s": m.get("summary/e2e_throughput_steps_per_s"),
                         "active_s": m.get("summary/active_s"), "startup_s": m.get("summary/startup_s"),
                         "slowdown": m.get("summary/slowdown_ratio"),
                         "throughput": m.get("summary/throughput_samples_per_s"),
                         "energy_j": m.get("summary/gpu_energy_attributed_j"),
                         "predicted_slowdown": as_float(t.get("pack.predicted_slowdown")),
                         "predicted_wall_s": as_float(t.get("pack.predicted_wall_s")),
                         "predicted_energy_j": as_float(t.get("pack.predicted_energy_j")), "decision": t.get("pack.decision"),
                         "slowdown_with_pauses": m.get("summary/slowdown_with_pauses_ratio"),
                         "guard_paused_s": m.get("summary/guard_paused_s"),
                         "guard_live_max": m.get("summary/guard_live_slowdown_max"),
                         "launch_bound": t.get("pack.launch_bound") == "true",
                         # its active phase (epoch s), where the run found one
                         "active_window": _window(t)}
    a, p = out["steps"].get("alone", {}), out["steps"].get("packed", {})
    if a.get("makespan_s") and p.get("makespan_s"):
        out["makespan_ratio"] = p["makespan_s"] / a["makespan_s"]
    for j in out["jobs"].values():
        a, p = j.get("alone", {}), j.get("packed", {})
        if p and p.get("slowdown") is None and a.get("active_s") and p.get("active_s"):
            p["slowdown"] = p["active_s"] / a["active_s"]  # alone in both steps: its active phase, packed / alone
            p["slowdown_from"] = "active_s packed / alone"
    slow = [j["packed"]["slowdown"] for j in out["jobs"].values() if j.get("packed", {}).get("slowdown")]
    out["max_slowdown_measured"] = max(slow) if slow else None
    return out


def _window(tags: dict) -> tuple[float, float] | None:
    start, end = as_float(tags.get("radt_ext.active_start")), as_float(tags.get("radt_ext.active_end"))
    return (start, end) if start is not None and end is not None and end > start else None


def cored_s(windows: list[tuple[str, tuple[float, float]]]) -> float:
    """The seconds in which two or more active phases ran at once on one GPU, summed over the GPUs:
    `windows` are (gpu, (start, end)) of each job's active phase."""
    total = 0.0
    for gpu in {g for g, _ in windows}:
        edges = sorted([(a, 1) for g, (a, _) in windows if g == gpu] + [(b, -1) for g, (_, b) in windows if g == gpu])
        running, since = 0, None
        for t, step in edges:
            if running >= 2 and since is not None:
                total += t - since
            running += step
            since = t
    return total


def planned(path: str | None) -> dict:
    """The dry run's predicted makespans (wall time) packed and one job per GPU at a time."""
    if not path or not os.path.exists(path):
        return {}
    with open(path) as fh:
        text = " ".join(fh.read().split())
    m = re.search(r"predicted makespan \(wall\) ([\d.]+) s against ([\d.]+) s", text)
    if not m:
        return {}
    packed, alone = float(m.group(1)), float(m.group(2))
    return {"packed_s": packed, "alone_s": alone, "ratio": packed / alone if alone else None}


def as_float(text):
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def cell(v, fmt="{:.2f}"):
    return "–" if v is None else fmt.format(v)


def analysis_args(parser) -> None:
    """What every packing proof's analysis is given: the store, the steps' time windows, the output folder, the bound."""
    parser.add_argument("--store", required=True, help="the proof's tracking store (URI)")
    parser.add_argument("--steps", required=True, help='steps.json: {"alone": [start_s, end_s], ...} of each step')
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-slowdown", type=float, default=1.5)


def read_steps(args) -> dict[str, list[float]]:
    with open(args.steps) as fh:
        return json.load(fh)
