"""Figures of the held-out packing queue: jobs the packing model was never fitted or tuned on, packed with
the guard on, against the same queue one job per GPU at a time. Its GPU driver (formerly
`scripts/gpu/pack_heldout.sh`) was removed when pack_unmodified.py's proof superseded it; this reads the
store it returned (docs/validation/pack_heldout/: mlflow.db.xz, steps.json, plan.txt) again.

Per job: the predicted against the measured active-phase slowdown (the bound's figure: the seconds the
guard paused it left out, as for a job waiting in a queue) and the same with those seconds counted, the
highest slowdown the guard read live and the seconds it paused the job, wall times, and the GPU energy
over the whole run alone and packed (the job's attributed share). Per step: the makespan, the total GPU
energy. Goals: no measured slowdown above 1.1 x the bound; makespan packed / one job per GPU <= 0.7.

    xz -dc docs/validation/pack_heldout/mlflow.db.xz > /tmp/ph.db
    python -m benchmarks.packing.pack_heldout --store sqlite:////tmp/ph.db --steps docs/validation/pack_heldout/steps.json \
        --plan docs/validation/pack_heldout/plan.txt --out DIR
"""
from __future__ import annotations

import argparse

from mlflow.tracking import MlflowClient

from benchmarks.common import write_tables
from benchmarks.packing.steps import analysis_args, cell, collect, planned, read_steps

EXPERIMENT = "pack-heldout"
TOLERANCE = 1.1  # the design goal: no job's measured slowdown above 1.1 x the bound


def verdict(fig: dict, bound: float) -> dict:
    """The goals, checked: every measured slowdown within TOLERANCE x bound; the makespan ratio <= 0.7."""
    packed = [(j["name"], j["packed"]) for j in fig["jobs"].values() if j.get("packed", {}).get("slowdown")]
    over = [(name, p["slowdown"]) for name, p in packed if p["slowdown"] > TOLERANCE * bound]
    ratio = fig.get("makespan_ratio")
    return {"jobs_measured": len(packed), "over_tolerance": over, "bound_kept": not over and bool(packed),
            "makespan_ratio": ratio, "makespan_goal_met": ratio is not None and ratio <= 0.7,
            "paused_jobs": sum(1 for _, p in packed if (p.get("guard_paused_s") or 0) > 0)}


def markdown(fig: dict, bound: float) -> str:
    v = fig["verdict"]
    lines = ["| step | groups | jobs FINISHED | makespan s | GPU energy J | energy / job J | modes |",
             "|---|---|---|---|---|---|---|"]
    for step, s in fig["steps"].items():
        per_job = s["gpu_energy_j"] / s["jobs"] if s["jobs"] else None
        lines.append(f"| {step} | {s['groups']} | {s['finished']}/{s['jobs']} | {cell(s['makespan_s'], '{:.1f}')} | "
                     f"{s['gpu_energy_j']:.0f} | {cell(per_job, '{:.0f}')} | {', '.join(s['modes'])} |")
    plan = fig.get("plan", {})
    lines += ["", f"makespan ratio packed / one job per GPU at a time: {cell(v['makespan_ratio'])} measured "
                  f"(goal <= 0.7: {'met' if v['makespan_goal_met'] else 'not met'}), {cell(plan.get('ratio'))} planned; "
                  f"largest measured active-phase slowdown {cell(fig.get('max_slowdown_measured'))} against the bound "
                  f"{bound:g} (goal: none above {TOLERANCE * bound:.2f}: "
                  f"{'kept' if v['bound_kept'] else 'NOT kept: ' + ', '.join(f'{n} {s:.2f}' for n, s in v['over_tolerance'])}); "
                  f"{v['paused_jobs']} job(s) paused by the guard", "",
              "Per job: slowdown of the active phase predicted, measured (paused seconds left out) and with the "
              "pauses counted; the guard's highest live reading and its pauses; wall time (start-up + active); "
              "GPU energy over the whole run (attributed share). LB: launch-bound in its profile.", "",
              "| job | mode (gpu) | LB | active s alone | slowdown pred. | slowdown meas. | with pauses | guard live max | "
              "paused s | wall s alone | wall s pred. | wall s packed | energy J alone | energy J pred. | energy J packed |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for job in sorted(fig["jobs"].values(), key=lambda j: j["name"] or ""):
        a, p = job.get("alone", {}), job.get("packed", {})
        lines.append(f"| {job['name']} | {p.get('mode', '–')} ({p.get('gpu', '–')}) | "
                     f"{'yes' if p.get('launch_bound') else ''} | {cell(a.get('active_s'), '{:.1f}')} | "
                     f"{cell(p.get('predicted_slowdown'))} | {cell(p.get('slowdown'))} | "
                     f"{cell(p.get('slowdown_with_pauses'))} | {cell(p.get('guard_live_max'))} | "
                     f"{cell(p.get('guard_paused_s'), '{:.1f}')} | {cell(a.get('duration_s'), '{:.1f}')} | "
                     f"{cell(p.get('predicted_wall_s'), '{:.1f}')} | {cell(p.get('duration_s'), '{:.1f}')} | "
                     f"{cell(a.get('energy_j'), '{:.0f}')} | {cell(p.get('predicted_energy_j'), '{:.0f}')} | "
                     f"{cell(p.get('energy_j'), '{:.0f}')} |")
    guard = fig["steps"].get("packed", {}).get("guard", {})
    if guard:
        lines += ["", "What the guard did, per shared group:", ""]
        lines += [f"- {decision}: {text}" for decision, text in guard.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    analysis_args(ap)
    ap.add_argument("--plan", help="the packed step's dry run output (plan.txt)")
    args = ap.parse_args()
    fig = collect(MlflowClient(args.store), read_steps(args), EXPERIMENT)
    fig["plan"] = planned(args.plan)
    fig["verdict"] = verdict(fig, args.max_slowdown)
    write_tables(args.out, "pack_heldout", fig, markdown(fig, args.max_slowdown))


if __name__ == "__main__":
    main()
