"""Figures of a packed queue against the same queue one job per GPU at a time, from the store that
scripts/gpu/pack_queue.sh filled: the makespan of each step (first group start to last group end),
their ratio against the plan's, and each job's prediction beside what was measured, like with like:
the active phase's slowdown (what the bound holds), the wall time (start-up and wind-down + active
phase) and the GPU energy over the whole run (the job's attributed share), and the total GPU energy.

    python -m benchmarks.pack_queue --store sqlite:///mlflow.db --steps steps.json --out DIR [--plan plan.txt]
steps.json: {"alone": [start_s, end_s], "packed": [start_s, end_s]} (epoch seconds of each step's call);
plan.txt: the packed step's dry run (its predicted makespans).
"""
from __future__ import annotations

import argparse
import json
import os
import re

from mlflow.tracking import MlflowClient

from radt_ext.figures.summary_names import value

EXPERIMENT = "pack-queue"


# a group's GPU energy over its whole run (today's name; runs of earlier versions read by their old one)
GROUP_ENERGY = "e2e_gpu_total_energy_j"


def _span(runs) -> tuple[float, float] | None:
    ends = [r.info.end_time for r in runs if r.info.end_time]
    return (min(r.info.start_time for r in runs) / 1000.0, max(ends) / 1000.0) if runs and ends else None


def collect(client, steps: dict[str, list[float]], experiment: str = EXPERIMENT) -> dict:
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
                         "active_s": m.get("summary/active_s"), "startup_s": m.get("summary/startup_s"),
                         "slowdown": m.get("summary/slowdown_ratio"),
                         "throughput": m.get("summary/throughput_samples_per_s"),
                         "energy_j": m.get("summary/gpu_energy_attributed_j"),
                         "predicted_slowdown": _f(t.get("pack.predicted_slowdown")),
                         "predicted_wall_s": _f(t.get("pack.predicted_wall_s")),
                         "predicted_energy_j": _f(t.get("pack.predicted_energy_j")), "decision": t.get("pack.decision"),
                         "slowdown_with_pauses": m.get("summary/slowdown_with_pauses_ratio"),
                         "guard_paused_s": m.get("summary/guard_paused_s"),
                         "guard_live_max": m.get("summary/guard_live_slowdown_max"),
                         "launch_bound": t.get("pack.launch_bound") == "true"}
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


def _f(text):
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _minus(a, b):
    return a - b if a is not None and b is not None else None


def _n(v, fmt="{:.2f}"):
    return "–" if v is None else fmt.format(v)


def markdown(fig: dict, bound: float) -> str:
    lines = ["| step | groups | jobs FINISHED | makespan s | wall s | GPU energy J | energy / job J | modes |",
             "|---|---|---|---|---|---|---|---|"]
    for step, s in fig["steps"].items():
        per_job = s["gpu_energy_j"] / s["jobs"] if s["jobs"] else None
        lines.append(f"| {step} | {s['groups']} | {s['finished']}/{s['jobs']} | {_n(s['makespan_s'], '{:.1f}')} | "
                     f"{s['wall_s']:.1f} | {s['gpu_energy_j']:.0f} | {_n(per_job, '{:.0f}')} | "
                     f"{', '.join(s['modes'])} |")
    plan = fig.get("plan", {})
    lines += ["", f"makespan ratio packed / one job per GPU at a time: {_n(fig.get('makespan_ratio'))} measured, "
                  f"{_n(plan.get('ratio'))} planned ({_n(plan.get('packed_s'), '{:.1f}')} s / "
                  f"{_n(plan.get('alone_s'), '{:.1f}')} s of job wall time, without the runs' own overhead) "
                  f"(goal <= 0.7); largest measured active-phase slowdown {_n(fig.get('max_slowdown_measured'))} "
                  f"(bound {bound:g})", "",
              "Per job, predicted (pred.) against measured: the active phase's slowdown; the wall time "
              "(outside the active phase: start-up, wind-down + active phase x slowdown); the GPU energy over "
              "the whole run (attributed share).", "",
              "| job | mode (gpu) | outside active s alone | active s alone | active s packed | slowdown pred. | "
              "slowdown meas. | wall s alone | wall s pred. | wall s packed | energy J alone | energy J pred. | "
              "energy J packed |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for job in fig["jobs"].values():
        a, p = job.get("alone", {}), job.get("packed", {})
        lines.append(f"| {job['name']} | {p.get('mode', '–')} ({p.get('gpu', '–')}) | "
                     f"{_n(_minus(a.get('duration_s'), a.get('active_s')), '{:.1f}')} | "
                     f"{_n(a.get('active_s'), '{:.1f}')} | "
                     f"{_n(p.get('active_s'), '{:.1f}')} | {_n(p.get('predicted_slowdown'))} | "
                     f"{_n(p.get('slowdown'))} | {_n(a.get('duration_s'), '{:.1f}')} | "
                     f"{_n(p.get('predicted_wall_s'), '{:.1f}')} | {_n(p.get('duration_s'), '{:.1f}')} | "
                     f"{_n(a.get('energy_j'), '{:.0f}')} | {_n(p.get('predicted_energy_j'), '{:.0f}')} | "
                     f"{_n(p.get('energy_j'), '{:.0f}')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--steps", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-slowdown", type=float, default=1.5)
    ap.add_argument("--plan", help="the packed step's dry run output (plan.txt)")
    args = ap.parse_args()
    with open(args.steps) as fh:
        steps = json.load(fh)
    fig = collect(MlflowClient(args.store), steps)
    fig["plan"] = planned(args.plan)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "pack_queue.json"), "w") as fh:
        json.dump(fig, fh, indent=1)
    text = markdown(fig, args.max_slowdown)
    with open(os.path.join(args.out, "pack_queue.md"), "w") as fh:
        fh.write(text)
    print(text)


if __name__ == "__main__":
    main()
