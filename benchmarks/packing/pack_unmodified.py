"""The unmodified queue's proof (benchmarks/packing/pack_unmodified.sh): the sweep spec of each step, and the
figures of the three steps from the store.

    python -m benchmarks.packing.pack_unmodified spec --step alone|packed|second --out FILE [--dry] [--modes naive,mps]
    python -m benchmarks.packing.pack_unmodified analyse --store URI --steps steps.json --out DIR \
        --plan-packed plan_packed.txt --plan-second plan_second.txt
(either with --queue FILE for another queue: its scripts' paths are taken from the queue file's folder)

The queue (examples/unmodified/queue.yaml): users' scripts that import nothing of radt-ext and log
nothing, each a fixed amount of work. Steps: `alone` one job per GPU at a time (the profiles);
`packed` the same jobs packed, trials allowed (pairs nothing measured are tried under the guard);
`second` the same jobs again, planned from what the packed step measured (no new trials). Each step's
jobs are the queue's next repeat, so the sweep's resume skips the ones run before.

summary.json: makespan_ratio (packed / alone), max_slowdown (the largest measured active-phase slowdown
of a shared job, pauses left out, either packed step), bound, jobs, kinds, instrumented_jobs (jobs whose
script imports radt-ext), energy_ratio (the packed step's GPU energy over the alone step's),
second_pass_plan_error (|planned - measured| / measured makespan of the second step), and beside them
what each goal needs and whether it was met, the jobs whose exclusive runs had progress (the guard can
watch only those), the trials, splits and seconds the splits lost.
"""
from __future__ import annotations

import argparse
import ast
import json
import os

import yaml

from benchmarks.common import write_tables
from benchmarks.packing.steps import analysis_args, as_float, cell, collect, planned, read_steps

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QUEUE = os.path.join(REPO, "examples", "unmodified", "queue.yaml")
EXPERIMENT = "pack-unmodified"
TOLERANCE = 1.1  # no job's measured slowdown above 1.1 x the bound
GOALS = {"makespan_ratio": 0.7, "energy_ratio": 1.0, "second_pass_plan_error": 0.05}
STEPS = {  # step: (max jobs per GPU, repeats, trials): the second step plans from what the first measured
    "alone": (1, 1, False), "packed": (4, 2, True), "second": (4, 3, True),
}


def queue(path: str = QUEUE) -> dict[str, dict]:
    with open(path) as fh:
        return yaml.safe_load(fh)


def instrumented(jobs: dict[str, dict], folder: str | None = None) -> list[str]:
    """The jobs whose script imports radt-ext (radt_ext or radt); scripts in `folder` (the queue's)."""
    folder = folder or os.path.dirname(QUEUE)
    out = []
    for name, job in jobs.items():
        with open(os.path.join(folder, job["script"])) as fh:
            tree = ast.parse(fh.read())
        modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        modules += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        if any(m.split(".")[0] in ("radt_ext", "radt") for m in modules):
            out.append(name)
    return out


def spec(step: str, dry: bool, modes: str = "naive,mps", bound: float = 1.5, python: str = "python3",
         path: str = QUEUE, experiment: str = EXPERIMENT, steps: dict = STEPS,
         measured_only: tuple = ()) -> str:
    """The sweep spec of `step` (of `steps`: max jobs per GPU, repeats, trials); the steps in `measured_only`
    are planned from measurements alone (`model: false`)."""
    per_gpu, repeats, trials = steps[step]
    jobs = queue(path)
    folder = os.path.dirname(os.path.abspath(path))
    lines = [f"name: {experiment}", 'devices: ["0", "1"]',
             "listeners: " + ("nvml:0.2,gpm:0.5" if dry else "nvml:0.1,gpm:0.2"),
             "child_listeners: " + ("top:0.5" if dry else "top:0.5,gpu_procs:0.2"),
             "schedule: pack", f"max_slowdown: {bound:g}", f"modes: [{modes}]",
             f"pack: {{max_jobs_per_gpu: {per_gpu}, guard: true, trials: {str(trials).lower()}"
             + (", model: false}" if step in measured_only else "}"),
             f"repeats: {repeats}", "workloads:"]
    for name, job in jobs.items():
        args = f"{job['cpu']} --device cpu --tiny" if dry else job["gpu"]
        lines.append(f'  {name}: {{command: "{python} {os.path.join(folder, job["script"])} {args}"}}')
    lines.append("groups: [" + ", ".join(f"[{n}]" for n in jobs) + "]")
    return "\n".join(lines) + "\n"


def _groups(client, t0: float, t1: float, experiment: str = EXPERIMENT) -> list:
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], "", max_results=10000) if exp else []
    return [r for r in runs if t0 <= r.info.start_time / 1000.0 <= t1 and "mlflow.parentRunId" not in r.data.tags
            and "pack.decision" in r.data.tags]


def decisions(client, steps: dict, names=("packed", "second"), experiment: str = EXPERIMENT) -> dict[str, list]:
    """Each step's groups in the order they started: the decision, what it rests on, the guard's outcome."""
    groups = {step: _groups(client, *steps[step], experiment) for step in names if step in steps}
    return {step: [{"decision": g.data.tags.get("pack.decision"), "basis": g.data.tags.get("pack.basis"),
                    "outcome": g.data.tags.get("pack.outcome"), "lost_s": as_float(g.data.tags.get("pack.lost_s")),
                    "predicted_makespan_s": as_float(g.data.tags.get("pack.predicted_makespan_s")),
                    "status": g.info.status}
                   for g in sorted(gs, key=lambda g: g.info.start_time)] for step, gs in groups.items()}


def sharing_groups(ds: list[dict]) -> list[dict]:
    """The groups of several jobs that rest on something (measured, model, trial)."""
    return [d for d in ds if d["basis"] and d["basis"] != "alone" and " jobs:" in (d["decision"] or "")]


def summarise(client, steps: dict, plan_packed: str | None, plan_second: str | None, bound: float,
              path: str = QUEUE) -> dict:
    fig = collect(client, steps, EXPERIMENT)
    jobs = queue(path)
    s = fig["steps"]
    alone, packed, second = (s.get(k, {}) for k in ("alone", "packed", "second"))

    def ratio(a, b):
        return a / b if a is not None and b else None

    shared = [p for j in fig["jobs"].values() for step in ("packed", "second")
              for p in [j.get(step, {})] if p.get("mode") in ("naive", "mps") and p.get("slowdown") is not None]
    plan2 = planned(plan_second)
    groups = decisions(client, steps)
    shared_groups = [d for ds in groups.values() for d in sharing_groups(ds)]
    alone_kids = [j["alone"] for j in fig["jobs"].values() if "alone" in j]
    summary = {
        "makespan_ratio": ratio(packed.get("makespan_s"), alone.get("makespan_s")),
        "max_slowdown": max((p["slowdown"] for p in shared), default=None),
        "bound": bound,
        "jobs": len(jobs),
        "kinds": len({j["kind"] for j in jobs.values()}),
        "instrumented_jobs": len(instrumented(jobs, os.path.dirname(os.path.abspath(path)))),
        "energy_ratio": ratio(packed.get("gpu_energy_j"), alone.get("gpu_energy_j")),
        "second_pass_plan_error": (abs(plan2["packed_s"] - second["makespan_s"]) / second["makespan_s"]
                                   if plan2.get("packed_s") and second.get("makespan_s") else None),
        "second_pass_makespan_ratio": ratio(second.get("makespan_s"), alone.get("makespan_s")),
        "second_pass_planned_s": plan2.get("packed_s"),
        "makespans_s": {k: v.get("makespan_s") for k, v in s.items()},
        "gpu_energy_j": {k: v.get("gpu_energy_j") for k, v in s.items()},
        "finished": {k: f"{v.get('finished')}/{v.get('jobs')}" for k, v in s.items()},
        "jobs_with_progress": sum(1 for a in alone_kids if a.get("throughput")),
        "shared_groups": len(shared_groups),
        "trials": sum(1 for d in shared_groups if (d["basis"] or "").startswith("trial")),
        "splits": sum(1 for d in shared_groups if (d["outcome"] or "").startswith("split")),
        "lost_s": sum(d["lost_s"] or 0.0 for d in shared_groups),
        "planned_packed": planned(plan_packed),
    }
    summary["goals"] = {
        "makespan_ratio <= 0.7": _met(summary["makespan_ratio"], GOALS["makespan_ratio"]),
        f"max_slowdown <= {TOLERANCE * bound:.2f}": _met(summary["max_slowdown"], TOLERANCE * bound),
        "energy_ratio <= 1": _met(summary["energy_ratio"], GOALS["energy_ratio"]),
        "second_pass_plan_error <= 0.05": _met(summary["second_pass_plan_error"], GOALS["second_pass_plan_error"]),
        "instrumented_jobs == 0": summary["instrumented_jobs"] == 0,
    }
    return {"summary": summary, "figures": fig, "decisions": groups}


def _met(value, limit) -> bool | None:
    return None if value is None else value <= limit


def markdown(out: dict) -> str:
    s, fig = out["summary"], out["figures"]
    lines = ["| figure | value | goal met |", "|---|---|---|"]
    goal_of = {"makespan_ratio": "makespan_ratio <= 0.7", "energy_ratio": "energy_ratio <= 1",
               "second_pass_plan_error": "second_pass_plan_error <= 0.05", "instrumented_jobs": "instrumented_jobs == 0"}
    for key in ("makespan_ratio", "max_slowdown", "bound", "jobs", "kinds", "instrumented_jobs", "energy_ratio",
                "second_pass_plan_error", "second_pass_makespan_ratio", "jobs_with_progress", "shared_groups",
                "trials", "splits", "lost_s"):
        goal = goal_of.get(key) or (next((g for g in s["goals"] if g.startswith("max_slowdown")), None)
                                    if key == "max_slowdown" else None)
        met = s["goals"].get(goal) if goal else None
        value = s[key]
        lines.append(f"| {key} | {cell(value, '{:.3f}') if isinstance(value, float) else value} | "
                     f"{'' if goal is None else {True: 'yes', False: 'NO', None: '–'}[met]} |")
    lines += ["", "| step | groups | jobs FINISHED | makespan s | GPU energy J | modes |", "|---|---|---|---|---|---|"]
    for step, st in fig["steps"].items():
        lines.append(f"| {step} | {st['groups']} | {st['finished']}/{st['jobs']} | {cell(st['makespan_s'], '{:.1f}')} | "
                     f"{st['gpu_energy_j']:.0f} | {', '.join(st['modes'])} |")
    for step, ds in out["decisions"].items():
        lines += ["", f"Groups of the {step} step (what each rests on, and what the guard made of it):", ""]
        lines += [f"- {d['decision']}: {d['basis']}; {d['outcome'] or 'not guarded'}" for d in ds]
    lines += ["", "| job | slowdown packed | slowdown second | active s alone | wall s alone | wall s packed | "
                  "wall s second |", "|---|---|---|---|---|---|---|"]
    for job in sorted(fig["jobs"].values(), key=lambda j: j["name"] or ""):
        a, p, q = job.get("alone", {}), job.get("packed", {}), job.get("second", {})
        lines.append(f"| {job['name']} | {cell(p.get('slowdown'))} | {cell(q.get('slowdown'))} | "
                     f"{cell(a.get('active_s'), '{:.1f}')} | {cell(a.get('duration_s'), '{:.1f}')} | "
                     f"{cell(p.get('duration_s'), '{:.1f}')} | {cell(q.get('duration_s'), '{:.1f}')} |")
    return "\n".join(lines) + "\n"


def spec_parser(sub, steps: dict):
    """The `spec` subcommand and the options every proof's spec has (its steps, the file, --dry, the modes
    and the bound)."""
    sp = sub.add_parser("spec")
    sp.add_argument("--step", choices=list(steps), required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--dry", action="store_true")
    sp.add_argument("--modes", default="naive,mps")
    sp.add_argument("--max-slowdown", type=float, default=1.5)
    return sp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sp = spec_parser(sub, STEPS)
    sp.add_argument("--queue", default=QUEUE)
    an = sub.add_parser("analyse")
    an.add_argument("--queue", default=QUEUE)
    analysis_args(an)
    an.add_argument("--plan-packed")
    an.add_argument("--plan-second")
    args = ap.parse_args()
    if args.what == "spec":
        with open(args.out, "w") as fh:
            fh.write(spec(args.step, args.dry, args.modes, args.max_slowdown, path=args.queue))
        return
    from mlflow.tracking import MlflowClient

    out = summarise(MlflowClient(args.store), read_steps(args), args.plan_packed, args.plan_second, args.max_slowdown, args.queue)
    write_tables(args.out, "pack_unmodified", out, markdown(out))
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump(out["summary"], fh, indent=1)


if __name__ == "__main__":
    main()
