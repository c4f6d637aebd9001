"""Gains that last when jobs are long, on the simulator: each proof queue's rates as measured on the GPU
(tests/radt_ext/packing/fixtures/*_rates.json, written by queue_rates.py from a proof's store) with its
jobs' active phases x10 and their start-ups and wind-downs unchanged, planned twice and played through
radt_ext.packing.chains.simulate as the group runner starts a chain's jobs:

- chains: start-ups beside active phases only (no pair measured, no trial);
- first: a first pass, as `radt-ext sweep` plans a queue no pair of which was measured: start-ups beside, and
  trials under the guard where the budgets pay for them;
- packed: the pairs the store measured side by side, those within the bound for as long as both jobs'
  budgets pay (their whole length where the slowdowns are small), and trials under the guard;
- measured_first: a sweep measuring every two jobs (and each alone) in short windows first (a group's
  `measure_s`: its start-up, MEASURE_S side by side, GROUP_S of its own, on the GPU free soonest), then the
  packed plan; both counted. The packed play knows only the fixture's pairs (the others played UNMEASURED
  under the guard), so a pass that knew every pair would do no worse.

Each against the plain makespan: the queue one job per GPU with no radt-ext, the jobs in the queue's order
each to the GPU free soonest, at their wall times alone. The play's truth: the measured pairs as measured,
UNMEASURED for two active phases nothing measured (the guard pausing the later of any two beyond the
bound once it has read their rates), a start-up beside an active phase as measured (the fixture's `boots`;
the packed plan knows them too), else BOOT (model.BOOT_LIGHT where the model keeps a light job apart).

    python -m benchmarks.packing.simulate_long --out docs/validation/pack_plain/simulated_long.json

Writes {"<queue>": {"chains": r1, "first": r2, "packed": r3, ...}, "command": ...}: each makespan over the
plain one, with each plan's worst job (as it lives it: by wall, or by work where it stops on time) and plan
error.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from radt_ext.packing import chains, model
from radt_ext.packing.options import PackOptions
from radt_ext.packing.planner import Job, Planner
from radt_ext.packing.profiles import Knowledge, MeasuredBoot, MeasuredGroup, Profile

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "radt_ext", "packing", "fixtures")
QUEUES = {"unmodified": "unmodified_h200_rates.json", "b": "queue_b_h200_rates.json",
          "b_pairs": "queue_b_pairs_h200_rates.json", "long": "long_h200_rates.json",
          "unmodified_h100": "unmodified_h100_rates.json"}
BOUND = 1.5
GPUS = 2
SCALE = 10.0
UNMEASURED = 2.5  # two active phases nothing measured: harsher than any pair the GPUs showed
BOOT = 1.1  # a start-up beside an active phase: the proofs' worst job lived 1.06 with every start-up beside
MEASURE_S = 10.0  # a measurement group's window side by side (measure_s)
GROUP_S = 2.0  # a group's own start and end around its workloads


def scaled(data: dict, scale: float) -> dict:
    return dict(data, jobs={n: dict(j, active=j["active"] * scale) for n, j in data["jobs"].items()})


def floored(data: dict, floor: float) -> dict:
    """Every measured slowdown at least `floor`: 1.0 plays no job faster beside another than alone."""
    return dict(data, pairs=[dict(p, slowdowns=[max(floor, x) for x in p["slowdowns"]]) for p in data["pairs"]],
                boots=[dict(b, slowdown=max(floor, b["slowdown"])) for b in data.get("boots", [])])


def knowledge(data: dict, with_pairs: bool) -> Knowledge:
    k = Knowledge(gpu_memory_mib=data.get("gpu_memory_mib", 81559.0))
    for name, j in data["jobs"].items():
        wall = j["startup"] + j["active"] + j["tail"]
        k.profiles[name] = Profile(name, name, duration_s=j["active"], startup_s=j["startup"], e2e_duration_s=wall,
                                   phase="active phase", outside_s=wall - j["active"], throughput=j["throughput"],
                                   mem_mib=j["mem_mib"], sm_pct=j["sm_pct"] or 0.0, dram_pct=j["dram_pct"],
                                   busy_pct=j["busy_pct"], cpu_pct=j["cpu_pct"])
    if with_pairs:
        for n, p in enumerate(data["pairs"]):
            k.groups.append(MeasuredGroup(f"pair{n}", p["mode"], {p["a"]: [p["slowdowns"][0]],
                                                                   p["b"]: [p["slowdowns"][1]]}))
        for n, b in enumerate(data.get("boots", [])):  # newest first, as the store reads them
            k.boots.append(MeasuredBoot(f"boot{n}", b["mode"], b["active"], b["starting"], b["slowdown"]))
    return k


def truth(data: dict, mode: str, unmeasured: float = UNMEASURED):
    known = {}
    for p in data["pairs"]:
        if p["mode"] == mode:
            known[(p["a"], p["b"])] = p["slowdowns"][0]
            known[(p["b"], p["a"])] = p["slowdowns"][1]
    return lambda a, b: known.get((a, b), unmeasured)


def measured_boots(data: dict) -> dict[tuple[str, str, str], float]:
    """The newest measured start-up of each (mode, active job, starting job): its slowdown of the active one."""
    out: dict[tuple[str, str, str], float] = {}
    for m in data.get("boots", []):  # newest first
        out.setdefault((m["mode"], m["active"], m["starting"]), m["slowdown"])
    return out


def soonest(durations, gpus: int) -> float:
    """The makespan of the durations laid in their order, each on the GPU free soonest."""
    lanes = [0.0] * gpus
    for d in durations:
        lanes[lanes.index(min(lanes))] += d
    return max(lanes)


def plain_makespan_s(data: dict, gpus: int = GPUS) -> float:
    """The queue one job per GPU, in its order, each job to the GPU free soonest, at its wall time alone."""
    jobs = data["jobs"]
    return soonest((jobs[n]["startup"] + jobs[n]["active"] + jobs[n]["tail"]
                    for n in data.get("order") or sorted(jobs)), gpus)


def replay(data: dict, with_pairs: bool, trials: bool, bound: float = BOUND, gpus: int = GPUS,
           unmeasured: float = UNMEASURED) -> dict:
    """The queue planned from its profiles (and its measured pairs), played as it would run: the plan, each
    job's lived slowdown, the makespan, the planned one, one job per GPU's."""
    k = knowledge(data, with_pairs)
    opts = PackOptions(max_slowdown=bound, modes=("naive", "mps"), trials=trials)
    plan = Planner(k, opts).plan([Job(name, name) for name in data["jobs"]], [str(g) for g in range(gpus)])
    boots = measured_boots(data)
    lived, loads = {}, []
    for ds in plan.gpus.values():
        load = 0.0
        for d in ds:
            names = [j.name for j in d.jobs]
            ph = [chains.phases(j.profile) for j in d.jobs]
            x = truth(data, d.mode, unmeasured)

            def pair(a, b, x=x, names=names):
                return x(names[a], names[b]) if abs(a - b) == 1 else unmeasured

            def boot(a, b, d=d, names=names):
                found = boots.get((d.mode, names[a], names[b]))
                if found is not None:
                    return found
                return model.BOOT_LIGHT if model.boot_slowdown(d.jobs[a].profile, d.mode) > bound else BOOT

            # the guard watches every job of the group: the later of two beyond the bound side by side waits
            splits = {i: i - 1 for i in range(1, len(names))
                      if max(x(names[i - 1], names[i]), x(names[i], names[i - 1])) > bound}
            played = chains.simulate(ph, d.starts or [0.0], pair, splits, boot, chain=True, work_left=d.work_left)
            lived.update(zip(names, chains.lived(played, ph)))
            load += max(played.ends) + plan.overhead_s
        loads.append(load)
    worst = max(lived, key=lived.get)
    return {"plan": plan, "makespan_s": max(loads), "planned_makespan_s": plan.predicted_makespan_s(), "lived": lived,
            "one_per_gpu_s": plan.one_per_gpu_makespan_s(),
            "max_job": worst, "max_job_slowdown": lived[worst],
            "cored": sum(1 for d in plan.decisions for link in d.links if link is not None and link.overlap_s > 0)}


def measuring_s(data: dict, gpus: int = GPUS) -> float:
    """The makespan of a sweep that measures each job alone and every two side by side, each group stopped
    MEASURE_S into its (later) active phase, the groups in order on the GPU free soonest."""
    names = list(data["jobs"])
    groups = [[n] for n in names] + [[a, b] for i, a in enumerate(names) for b in names[i + 1:]]
    return soonest((max(data["jobs"][n]["startup"] for n in g) + MEASURE_S + GROUP_S for g in groups), gpus)


def queue(data: dict, scale: float = SCALE, bound: float = BOUND, gpus: int = GPUS) -> dict:
    long = scaled(data, scale)
    plain = plain_makespan_s(long, gpus)
    out = {"plain_makespan_s": round(plain, 1)}
    for name, with_pairs, trials in (("chains", False, False), ("first", False, True), ("packed", True, True)):
        r = replay(long, with_pairs, trials, bound, gpus)
        out[name] = round(r["makespan_s"] / plain, 3)
        out[f"{name}_makespan_s"] = round(r["makespan_s"], 1)
        out[f"{name}_max_job_slowdown"] = round(r["max_job_slowdown"], 3)
        out[f"{name}_max_job"] = r["max_job"]
        out[f"{name}_plan_error"] = round(abs(r["planned_makespan_s"] - r["makespan_s"]) / r["makespan_s"], 3)
        out[f"{name}_links_side_by_side"] = r["cored"]
    out["measuring_s"] = round(measuring_s(long, gpus), 1)
    out["measured_first"] = round((out["measuring_s"] + out["packed_makespan_s"]) / plain, 3)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="where to write the JSON (else stdout)")
    ap.add_argument("--scale", type=float, default=SCALE, help="each active phase x this (default %(default)s)")
    ap.add_argument("--bound", type=float, default=BOUND)
    ap.add_argument("--gpus", type=int, default=GPUS)
    ap.add_argument("--floor", type=float, help="play every measured slowdown as at least this (1.0: none faster "
                    "beside another than alone)")
    ap.add_argument("fixtures", nargs="*", metavar="NAME=PATH",
                    help="queues to replay (default: " + ", ".join(QUEUES) + " from the test fixtures)")
    args = ap.parse_args(argv)
    paths = dict(f.split("=", 1) for f in args.fixtures) if args.fixtures else \
        {q: os.path.join(FIXTURES, f) for q, f in QUEUES.items()}
    result = {}
    for name, path in paths.items():
        try:
            with open(path) as fh:
                data = json.load(fh)
        except (OSError, ValueError) as exc:
            sys.exit(f"simulate_long: {path}: {exc}; give NAME=PATH of a queue_rates.py output")
        if args.floor is not None:
            data = floored(data, args.floor)
        result[name] = queue(data, args.scale, args.bound, args.gpus)
        r = result[name]
        print(f"{name}: plain {r['plain_makespan_s']:.0f} s; chains {r['chains']:.3f} (worst job "
              f"{r['chains_max_job_slowdown']:.2f}), first {r['first']:.3f} (worst job {r['first_max_job_slowdown']:.2f}), "
              f"packed {r['packed']:.3f} (worst job {r['packed_max_job_slowdown']:.2f},"
              f" {r['packed_links_side_by_side']} links side by side), measured first {r['measured_first']:.3f} "
              f"({r['measuring_s']:.0f} s measuring)", file=sys.stderr)
    result["command"] = "python -m benchmarks.packing.simulate_long " + " ".join(argv if argv is not None else sys.argv[1:])
    text = json.dumps(result, indent=1)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
