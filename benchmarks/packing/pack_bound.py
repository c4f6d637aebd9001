"""The per-job bound when packing, lived (benchmarks/packing/pack_bound.sh): the sweep spec of each step,
each packed job's lived slowdown computed from the store, against the alone pass and against the queue
run plain, and the summary of the queues.

    python -m benchmarks.packing.pack_bound spec --step alone|first|second --queue FILE --out FILE \
        [--name NAME] [--dry] [--modes naive,mps] [--max-slowdown 1.5]
    python -m benchmarks.packing.pack_bound analyse --store URI --steps steps.json --queue FILE --name NAME \
        --out DIR --plan-first plan_first.txt --plan-second plan_second.txt [--plain plain.json] [--max-slowdown 1.5]
    python -m benchmarks.packing.pack_bound summarise --out DIR --card "NAME" [--simulated simulated_long.json] \
        DIR/<queue>.json...

Steps: `plain`, the queue's scripts as plain python without radt-ext, one lane per GPU
(benchmarks/packing/plain.py: the baseline a user compares with); then each through `radt-ext sweep` with
`schedule: pack` in the experiment `pack-bound-<NAME>`: `alone` one job per GPU at a time (the profiles
and the baseline of each job's lived slowdown); `first` and `second` the same packed spec (up to 4 jobs
per GPU, guard and trials on), the second run after the first, so it plans from what the first measured.
Each sweep step runs the queue's next repeat (the sweep's resume skips the earlier ones).

A job's lived slowdown (computed here, not read from radt-ext's figures): its wall time packed (the
child run's process start to end: summary/e2e_duration_s, else the run's start and end) over its wall
time in the alone step; where both runs counted its work (summary/e2e_samples, else its steps), its
work rate alone over its work rate packed, which is what a job that stops on time loses; the larger.

Against plain: the pass's makespan over the plain lanes' (`makespan_plain_ratio`), and each job's wall time
packed over its plain wall time, or where both counted samples (the plain job's last line, `N samples`)
its rate plain over its rate packed, the larger (`lived_plain`).

<NAME>.json / <NAME>.md: plain_makespan_s, min_alone_job_s, long (every job at least LONG_S alone) and per
packed pass: jobs, kinds, instrumented_jobs, makespan_s, makespan_ratio (over the alone pass's),
makespan_plain_ratio, max_job_slowdown and max_job, max_job_slowdown_plain and max_job_plain,
max_reported_gap (|reported - lived| / lived, reported = the child's summary/slowdown_ratio), energy_ratio,
plan_error (|planned - measured| / measured makespan, planned from the pass's dry run), cored_s (seconds in
which two jobs' active phases ran at once on a GPU, from their runs' active windows), and a row per job.
summary.json: {"bound", "card", "queues": {NAME: {"long", "min_alone_job_s", "plain_makespan_s", "first":
..., "second": ...}}, "simulated_long": {NAME: {"chains", "packed"}}, "goals"}.
"""
from __future__ import annotations

import argparse
import ast
import json
import os

import yaml

from benchmarks.common import write_tables
from benchmarks.packing.steps import analysis_args, as_float, cell, collect, cored_s, planned, read_steps

PASSES = ("first", "second")
STEPS = {"alone": (1, 1, False), "first": (4, 2, True), "second": (4, 3, True)}  # max jobs per GPU, repeats, trials
BOUND = 1.5
TOLERANCE = 1.1  # no job's lived slowdown above 1.1 x the bound
NAMES = {"pack_bound": "b", "pack_plain": "long"}  # a queue's default name, from its folder
LONG_S = 90.0  # a long queue: every job at least this long alone
PLAIN_GOAL, LONG_PLAIN_GOAL = 0.8, 0.85  # makespan packed over plain, in every pass (a long queue's)


def queue(path: str) -> dict[str, dict]:
    """A queue file: {job: {script, kind, gpu: its arguments, cpu: a tiny CPU version's}}, scripts beside it."""
    with open(path) as fh:
        return yaml.safe_load(fh)


def instrumented(jobs: dict[str, dict], folder: str) -> list[str]:
    """The jobs whose script imports radt-ext (radt_ext or radt); scripts in `folder` (the queue's)."""
    out = []
    for name, job in jobs.items():
        with open(os.path.join(folder, job["script"])) as fh:
            tree = ast.parse(fh.read())
        modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        modules += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        if any(m.split(".")[0] in ("radt_ext", "radt") for m in modules):
            out.append(name)
    return out


def spec(step: str, dry: bool, modes: str, bound: float, path: str, experiment_name: str,
         python: str = "python3", pairs_from: tuple[str, ...] = ()) -> str:
    """The sweep spec of `step` (STEPS: max jobs per GPU, repeats, trials) over the queue in `path`; its packed
    steps also know the pairs measured in the experiments `pairs_from` (pack.pairs_from: pair_rates.sh's)."""
    per_gpu, repeats, trials = STEPS[step]
    known = f", pairs_from: [{', '.join(pairs_from)}]" if pairs_from and per_gpu > 1 else ""
    jobs = queue(path)
    folder = os.path.dirname(os.path.abspath(path))
    lines = [f"name: {experiment_name}", 'devices: ["0", "1"]', *listener_lines(dry),
             "schedule: pack", f"max_slowdown: {bound:g}", f"modes: [{modes}]",
             f"pack: {{max_jobs_per_gpu: {per_gpu}, guard: true, trials: {str(trials).lower()}{known}}}",
             f"repeats: {repeats}", "workloads:"]
    lines += [workload_line(name, job, folder, dry, python) for name, job in jobs.items()]
    lines.append("groups: [" + ", ".join(f"[{n}]" for n in jobs) + "]")
    return "\n".join(lines) + "\n"


def listener_lines(dry: bool) -> list[str]:
    """The proofs' listeners: the parent's device listeners, each child's own (slower on a dry run's CPU)."""
    return ["listeners: " + ("nvml:0.2,gpm:0.5" if dry else "nvml:0.1,gpm:0.2"),
            "child_listeners: " + ("top:0.5" if dry else "top:0.5,gpu_procs:0.2")]


def workload_line(name: str, job: dict, folder: str, dry: bool, python: str = "python3") -> str:
    """A queue job as a spec's workload: its script in `folder` with its GPU arguments, or its tiny CPU ones.
    Every sweep of a queue writes it here, so its jobs keep one workload hash across sweeps (pair_rates.py's
    measured pairs found by a packed sweep's pack.pairs_from)."""
    args = f"{job['cpu']} --device cpu --tiny" if dry else job["gpu"]
    return f'  {name}: {{command: "{python} {os.path.join(folder, job["script"])} {args}"}}'


def decisions(client, steps: dict, names, experiment_name: str) -> dict[str, list]:
    """Each step's groups in the order they started: the decision, what it rests on, the guard's outcome."""
    exp = client.get_experiment_by_name(experiment_name)
    runs = client.search_runs([exp.experiment_id], "", max_results=10000) if exp else []
    out = {}
    for step in (n for n in names if n in steps):
        t0, t1 = steps[step]
        groups = [r for r in runs if t0 <= r.info.start_time / 1000.0 <= t1 and "mlflow.parentRunId" not in r.data.tags
                  and "pack.decision" in r.data.tags]
        out[step] = [{"decision": g.data.tags.get("pack.decision"), "basis": g.data.tags.get("pack.basis"),
                      "outcome": g.data.tags.get("pack.outcome"), "lost_s": as_float(g.data.tags.get("pack.lost_s")),
                      "predicted_makespan_s": as_float(g.data.tags.get("pack.predicted_makespan_s")),
                      "status": g.info.status}
                     for g in sorted(groups, key=lambda g: g.info.start_time)]
    return out


def sharing_groups(ds: list[dict]) -> list[dict]:
    """The groups of several jobs (chains or shared groups)."""
    return [d for d in ds if d["basis"] and d["basis"] != "alone" and (d["decision"] or "").split(":")[0] != "alone"]


def experiment(name: str) -> str:
    return f"pack-bound-{name}"


def default_name(path: str) -> str:
    folder = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return NAMES.get(folder, folder)


def wall_s(run: dict) -> float | None:
    """The job's process start to end: its e2e duration, else its run's span."""
    if run.get("duration_s"):
        return run["duration_s"]
    if run.get("start_s") and run.get("end_s"):
        return run["end_s"] - run["start_s"]
    return None


def work_rates(run: dict) -> dict[str, float]:
    """The job's work per second of its whole run, in the units it was counted in."""
    wall, rates = wall_s(run), {}
    if run.get("samples") and wall:
        rates["samples"] = run["samples"] / wall
    if run.get("steps_per_s"):
        rates["steps"] = run["steps_per_s"]  # e2e steps over the e2e wall time
    return rates


def lived(alone: dict, packed: dict) -> dict:
    """The lived slowdown of a job run `packed` against its run `alone`: the larger of the wall-time ratio and
    the work-rate ratio (where both runs have a rate in the same unit)."""
    a, p = wall_s(alone), wall_s(packed)
    by_wall = p / a if a and p else None
    ra, rp = work_rates(alone), work_rates(packed)
    unit = next((u for u in ("samples", "steps") if ra.get(u) and rp.get(u)), None)
    by_rate = ra[unit] / rp[unit] if unit else None
    known = [r for r in (by_wall, by_rate) if r is not None]
    return {"wall_ratio": by_wall, "rate_ratio": by_rate, "rate_unit": unit, "lived": max(known) if known else None}


def _ratio(a, b):
    return a / b if a is not None and b else None


def _makespan(step: dict) -> float | None:
    return step.get("makespan_s") or step.get("wall_s")


def against_plain(plain: dict | None, packed: dict) -> dict:
    """A packed job against its plain run (plain.json's record): its wall time over its plain wall time,
    or where both counted samples its rate plain over its rate packed, the larger."""
    if not plain or plain.get("rc") != 0:
        return {"plain_wall_s": None, "lived_plain": None}
    pw, wall = plain.get("wall_s"), wall_s(packed)
    ratios = [wall / pw] if wall and pw else []
    if plain.get("samples") and packed.get("samples") and wall and pw:
        ratios.append((plain["samples"] / pw) / (packed["samples"] / wall))
    return {"plain_wall_s": pw, "lived_plain": max(ratios) if ratios else None}


def job_rows(fig: dict, step: str, kinds: dict[str, str], plain: dict | None = None) -> list[dict]:
    rows = []
    for job in sorted(fig["jobs"].values(), key=lambda j: j["name"] or ""):
        a, p = job.get("alone", {}), job.get(step)
        if not p:
            continue
        mine = {**lived(a, p), **against_plain((plain or {}).get("jobs", {}).get(job["name"]), p)}
        reported = p.get("slowdown") if "slowdown_from" not in p else None  # the child's summary/slowdown_ratio
        rows.append({"name": job["name"], "kind": kinds.get(job["name"]), "mode": p.get("mode"), "gpu": p.get("gpu"),
                     "status": p.get("status"), "alone_wall_s": wall_s(a), "packed_wall_s": wall_s(p),
                     **mine, "reported": reported,
                     "gap": abs(reported - mine["lived"]) / mine["lived"] if reported and mine["lived"] else None,
                     "paused_s": p.get("guard_paused_s")})
    return rows


def _top(rows: list[dict], key: str) -> dict | None:
    return max((r for r in rows if r[key] is not None), key=lambda r: r[key], default=None)


def analyse(client, steps: dict, path: str, name: str, plans: dict[str, str | None], bound: float = BOUND,
            plain: dict | None = None) -> dict:
    """The figures of each packed pass of the queue `name` (experiment pack-bound-<name>) from the store,
    against the alone pass and against `plain` (plain.json of benchmarks/packing/plain.py; None: not run)."""
    fig = collect(client, {k: v for k, v in steps.items() if k != "plain"}, experiment(name))
    jobs = queue(path)
    kinds = {n: j["kind"] for n, j in jobs.items()}
    alone = fig["steps"].get("alone", {})
    groups = decisions(client, steps, PASSES, experiment(name))
    scanned = len(instrumented(jobs, os.path.dirname(os.path.abspath(path))))
    passes = {}
    for step in (s for s in PASSES if s in steps):  # a pass not run (or left out) has no figures
        st = fig["steps"].get(step, {})
        rows = job_rows(fig, step, kinds, plain)
        top, top_plain = _top(rows, "lived"), _top(rows, "lived_plain")
        gaps = [r["gap"] for r in rows if r["gap"] is not None]
        plan = planned(plans.get(step)).get("packed_s")
        makespan = _makespan(st)
        ds = groups.get(step, [])
        passes[step] = {
            "jobs": len(jobs), "kinds": len(set(kinds.values())), "instrumented_jobs": scanned,
            "makespan_ratio": _ratio(makespan, _makespan(alone)),
            "makespan_plain_ratio": _ratio(makespan, (plain or {}).get("makespan_s")),
            "max_job_slowdown": top["lived"] if top else None, "max_job": top["name"] if top else None,
            "max_job_slowdown_plain": top_plain["lived_plain"] if top_plain else None,
            "max_job_plain": top_plain["name"] if top_plain else None,
            "cored_s": cored_s([(j[step].get("gpu"), j[step]["active_window"]) for j in fig["jobs"].values()
                                if j.get(step) and j[step].get("active_window")]),
            "max_reported_gap": max(gaps) if gaps else None, "reported_jobs": len(gaps),
            "energy_ratio": _ratio(st.get("gpu_energy_j"), alone.get("gpu_energy_j")),
            "plan_error": abs(plan - makespan) / makespan if plan and makespan else None,
            "makespan_s": makespan, "alone_makespan_s": _makespan(alone), "planned_makespan_s": plan,
            "gpu_energy_j": st.get("gpu_energy_j"),
            "finished": f"{st.get('finished')}/{st.get('jobs')}", "shared_jobs": sum(
                r["mode"] in ("naive", "mps") for r in rows),
            "trials": sum((d["basis"] or "").startswith("trial") for d in sharing_groups(ds)),
            "splits": sum((d["outcome"] or "").startswith("split") for d in sharing_groups(ds)),
            "rows": rows, "groups": ds}
    walls = [wall_s(j["alone"]) for j in fig["jobs"].values() if j.get("alone")]
    shortest = min((w for w in walls if w is not None), default=None)
    return {"queue": name, "experiment": experiment(name), "bound": bound, "queue_file": os.path.abspath(path),
            "alone": {k: alone.get(k) for k in ("makespan_s", "wall_s", "gpu_energy_j", "finished", "jobs")},
            "plain_makespan_s": (plain or {}).get("makespan_s"), "min_alone_job_s": shortest,
            "long": shortest is not None and len(walls) == len(jobs) and shortest >= LONG_S,
            "plain": {n: j.get("wall_s") for n, j in (plain or {}).get("jobs", {}).items()},
            "passes": passes}


FIGURES = ("jobs", "kinds", "instrumented_jobs", "makespan_ratio", "makespan_plain_ratio", "max_job_slowdown",
           "max_job", "max_job_slowdown_plain", "max_job_plain", "max_reported_gap", "plan_error", "cored_s",
           "reported_jobs", "energy_ratio", "makespan_s", "alone_makespan_s", "planned_makespan_s", "gpu_energy_j",
           "finished", "shared_jobs", "trials", "splits")
SHOWN = FIGURES[3:12]  # the summary table's columns
QUEUE_FIGURES = ("long", "min_alone_job_s", "plain_makespan_s")


def _cell(v) -> str:
    return cell(v, "{:.3f}") if isinstance(v, float) or v is None else str(v)


def markdown(out: dict) -> str:
    lines = [f"# Queue {out['queue']} (experiment {out['experiment']}, bound {out['bound']:g})", "",
             f"Alone: makespan {cell(out['alone']['makespan_s'], '{:.1f}')} s, GPU energy "
             f"{cell(out['alone']['gpu_energy_j'], '{:.0f}')} J, {out['alone']['finished']}/{out['alone']['jobs']} "
             f"FINISHED. Plain (no radt-ext, one job per GPU): makespan {cell(out.get('plain_makespan_s'), '{:.1f}')} s. "
             f"Shortest job alone {cell(out.get('min_alone_job_s'), '{:.1f}')} s"
             + (" (a long queue)." if out.get("long") else ".")]
    for step, p in out["passes"].items():
        lines += ["", f"## Pass {step}", "", "| figure | value |", "|---|---|"]
        lines += [f"| {k} | {_cell(p[k])} |" for k in FIGURES]
        lines += ["", "| job | kind | mode (gpu) | wall s plain | wall s alone | wall s packed | wall ratio | rate ratio | "
                      "lived slowdown | against plain | reported | gap | paused s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in p["rows"]:
            lines.append(f"| {r['name']} | {r['kind']} | {r['mode']} ({r['gpu']}) | {cell(r.get('plain_wall_s'), '{:.1f}')} | "
                         f"{cell(r['alone_wall_s'], '{:.1f}')} | {cell(r['packed_wall_s'], '{:.1f}')} | {cell(r['wall_ratio'])} | {cell(r['rate_ratio'])} | "
                         f"**{cell(r['lived'])}** | {cell(r.get('lived_plain'))} | {cell(r['reported'])} | "
                         f"{cell(r['gap'], '{:.3f}')} | {cell(r['paused_s'], '{:.1f}')} |")
        lines += ["", "Groups (what each rests on, and what the guard made of it):", ""]
        lines += [f"- {d['decision']}: {d['basis']}; {d['outcome'] or 'not guarded'}" for d in p["groups"]]
    return "\n".join(lines) + "\n"


def _every(values, ok) -> bool | None:
    """False where any value misses, None where none misses but one is unknown, else True."""
    values = list(values)
    if any(v is not None and not ok(v) for v in values):
        return False
    return None if not values or None in values else True


def simulated(data: dict | None) -> dict[str, dict]:
    """The simulated long queues ({queue: {"chains", "packed"}}) of a simulator's output; other keys left out."""
    return {q: {"chains": v["chains"], "packed": v["packed"]} for q, v in (data or {}).items()
            if isinstance(v, dict) and "chains" in v and "packed" in v}


def summarise(outs: list[dict], card: str, simulated_long: dict | None = None) -> dict:
    bound = outs[0]["bound"] if outs else BOUND
    queues = {o["queue"]: {**{k: o.get(k) for k in QUEUE_FIGURES},
                           **{step: {k: p.get(k) for k in FIGURES} for step, p in o["passes"].items()}} for o in outs}
    passes = [(q, q[step]) for q in queues.values() for step in PASSES if step in q]
    sims = simulated(simulated_long)

    def each(key):
        return [p[key] for _, p in passes]

    def plain_ok(q, p):
        return p["makespan_plain_ratio"] <= (LONG_PLAIN_GOAL if q["long"] else PLAIN_GOAL)

    longs = [q for q in queues.values() if q["long"]]
    second_vs_first = [None if q.get("first", {}).get("makespan_ratio") is None
                       or q.get("second", {}).get("makespan_ratio") is None
                       else q["second"]["makespan_ratio"] - q["first"]["makespan_ratio"] for q in queues.values()]
    goals = {
        f"max_job_slowdown <= {TOLERANCE * bound:.2f} in every pass":
            _every(each("max_job_slowdown"), lambda v: v <= TOLERANCE * bound),
        f"max_job_slowdown_plain <= {TOLERANCE * bound:.2f} in every pass":
            _every(each("max_job_slowdown_plain"), lambda v: v <= TOLERANCE * bound),
        f"makespan <= {PLAIN_GOAL:g} of plain in every pass ({LONG_PLAIN_GOAL:g} on a long queue)":
            _every([None if p["makespan_plain_ratio"] is None else (q, p) for q, p in passes],
                   lambda qp: plain_ok(*qp)),
        "a long queue co-runs (cored_s > 0) in every pass":
            _every([q[step]["cored_s"] for q in longs for step in PASSES if step in q], lambda v: v > 0)
            if longs else False,
        "second makespan_ratio <= first + 0.05": _every(second_vs_first, lambda v: v <= 0.05),
        "max_reported_gap <= 0.05 in every pass": _every(each("max_reported_gap"), lambda v: v <= 0.05),
        "instrumented_jobs == 0": _every(each("instrumented_jobs"), lambda v: v == 0),
        "plan_error <= 0.10 in every pass": _every(each("plan_error"), lambda v: v <= 0.10),
        "two simulated long queues: packed <= 0.8 of plain where chains >= 0.9":
            sum(v["packed"] <= 0.8 and v["chains"] >= 0.9 for v in sims.values()) >= 2 if sims else None,
    }
    return {"bound": bound, "card": card, "queues": queues, "simulated_long": sims, "goals": goals}


def summary_markdown(s: dict) -> str:
    lines = [f"Card: {s['card']}; bound {s['bound']:g}", "",
             "| queue | long | shortest job alone s | plain makespan s |", "|---|---|---|---|"]
    lines += [f"| {name} | {'yes' if q['long'] else 'no'} | {cell(q['min_alone_job_s'], '{:.1f}')} | "
              f"{cell(q['plain_makespan_s'], '{:.1f}')} |" for name, q in s["queues"].items()]
    lines += ["", "| queue | pass | " + " | ".join(SHOWN) + " |", "|---|---|" + "---|" * len(SHOWN)]
    for name, q in s["queues"].items():
        for step in (x for x in PASSES if x in q):
            lines.append(f"| {name} | {step} | " + " | ".join(_cell(q[step][k]) for k in SHOWN) + " |")
    if s["simulated_long"]:
        lines += ["", "Simulated with active phases x10 (makespan over plain): "
                  + "; ".join(f"{q} chains {v['chains']:.3f}, packed {v['packed']:.3f}"
                              for q, v in s["simulated_long"].items())]
    lines += ["", "| goal | met |", "|---|---|"]
    said = {True: "yes", False: "NO", None: "–"}
    lines += [f"| {g} | {said[met]} |" for g, met in s["goals"].items()]
    return "\n".join(lines) + "\n"


def read_json(path: str | None):
    """A JSON file's content (None: no path, or a file that is not there)."""
    if not path or not os.path.exists(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sp = sub.add_parser("spec")
    sp.add_argument("--step", choices=list(STEPS), required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--dry", action="store_true")
    sp.add_argument("--modes", default="naive,mps")
    sp.add_argument("--max-slowdown", type=float, default=BOUND)
    sp.add_argument("--queue", required=True)
    sp.add_argument("--name", help="the queue's name (default: from its folder)")
    sp.add_argument("--pairs-from", default="", help="experiments whose pairs the packed steps know, comma-separated "
                    "(pair_rates.sh's pack-pairs-<name>)")
    an = sub.add_parser("analyse")
    analysis_args(an)
    for flag in ("--queue", "--name"):
        an.add_argument(flag, required=True)
    an.add_argument("--plan-first")
    an.add_argument("--plan-second")
    an.add_argument("--plain", help="plain.json of the queue run plain (benchmarks/packing/plain.py)")
    su = sub.add_parser("summarise")
    su.add_argument("--out", required=True)
    su.add_argument("--card", required=True)
    su.add_argument("--simulated", help="the simulator's long queues, {queue: {chains, packed}}")
    su.add_argument("queues", nargs="+", help="each queue's <NAME>.json from analyse")
    args = ap.parse_args()
    if args.what == "spec":
        with open(args.out, "w") as fh:
            fh.write(spec(args.step, args.dry, args.modes, args.max_slowdown, args.queue,
                          experiment(args.name or default_name(args.queue)),
                          pairs_from=tuple(n for n in args.pairs_from.split(",") if n)))
    elif args.what == "analyse":
        from mlflow.tracking import MlflowClient

        out = analyse(MlflowClient(args.store), read_steps(args), args.queue, args.name,
                      {"first": args.plan_first, "second": args.plan_second}, args.max_slowdown,
                      read_json(args.plain))
        write_tables(args.out, args.name, out, markdown(out))
    else:
        out = summarise([read_json(path) for path in args.queues], args.card, read_json(args.simulated))
        write_tables(args.out, "summary", out, summary_markdown(out))


if __name__ == "__main__":
    main()
