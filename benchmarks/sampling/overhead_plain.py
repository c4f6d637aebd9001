"""radt-ext's cost against the plain run: unmodified scripts of four kinds of job (a launch-bound decoder, a
host-bound RNN trainer, a DataLoader-fed trainer, a GPU-bound GEMM chain), each run plain (`python script`),
under `radt-ext run` at its defaults, as the one job of a sweep at the sweep's defaults, and under each
listener alone at the rates asked for, interleaved in shuffled rounds in one call. Every job runs through
`stamp.py` (the same wrapper in every configuration), which records the job's start, end and last line: the
script's own compute time (the seconds it prints), its wall time and what radt-ext adds around it.

    python -m benchmarks.sampling.overhead_plain jobs --out DIR --repeats 3 --seconds 2
    python -m benchmarks.sampling.overhead_plain alone --out DIR --seconds 8 --repeats 1
    python -m benchmarks.sampling.overhead_plain analyse --out DIR [--summary docs/validation/overhead_plain/summary.json]

`jobs` first runs each kind once plain with a small amount of work (its warm-up) and sizes it to about
`--seconds` of its own compute time. `alone` runs the same four jobs as a queue: plain, one job per GPU at a
time in a lane per GPU, then through `radt-ext sweep` (exclusive, one job per GPU), `--repeats` times in
turn. `--dry` runs the CPU versions of the scripts (`--device cpu --tiny`): plumbing only.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import environment, fmt, gpu_name, in_lanes, table
from listeners.devices import gpu_indices
from radt_ext.figures.repeats import t_quantile
from radt_ext.workload_api.progress_sources import OFF_ENV

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "examples" / "unmodified"
STAMP = Path(__file__).resolve().parent / "stamp.py"
EXPERIMENT = "overhead-plain"
OWN_S = re.compile(r"([0-9]+\.[0-9]+) s$")


@dataclass(frozen=True)
class Kind:
    bound: str  # launch | host | loader | gpu
    script: str
    args: tuple[str, ...]
    work: str  # the argument that sets the amount of work
    first: int  # the warm-up's amount, from which the job is sized
    cpu_args: tuple[str, ...] = ()


KINDS = {
    "decoder": Kind("launch", "layer_decode.py", ("--batch", "4", "--tokens", "128"), "--sequences", 3,
                    ("--batch", "2", "--tokens", "16")),
    "gru": Kind("host", "gru_train.py", ("--batch", "32"), "--steps", 100, ("--batch", "8")),
    "loader": Kind("loader", "loader_train.py", ("--workers", "2"), "--batches", 40, ("--workers", "1", "--batch", "16")),
    "gemm": Kind("gpu", "gemm_chain.py", ("--size", "4096"), "--steps", 300, ("--size", "64")),
    # a second launch-bound decoder: one outermost model with a key/value cache (not in the default kinds)
    "kv": Kind("launch", "kv_decode.py", ("--batch", "4", "--tokens", "256"), "--prompts", 2,
               ("--batch", "2", "--tokens", "16")),
}
DEFAULT_KINDS = ("decoder", "gru", "loader", "gemm")
# the listeners' defaults, and the rates the docs' sweep examples use
LISTENER_CONFIGS = ("nvml:0.1", "nvml:0.2", "gpm:0.5", "gpm:0.2", "smi:0.5", "top:1", "top:0.5",
                    "gpu_procs:0.2", "gpu_procs:0.5")
CONFIGS = ("plain", "run", "sweep", *LISTENER_CONFIGS)
# more, to find a cause: run-np (run without progress counting), sweep-pack (a sweep's alone pass as the pack
# proofs run it: schedule pack, one job per GPU, parent nvml:0.1,gpm:0.2, child top:0.5,gpu_procs:0.2), and
# any configuration + "+np": with RADT_EXT_NO_PROGRESS=1 (progress counting off, sweeps too)
PACK_LINES = ["schedule: pack", "max_slowdown: 1.5", "modes: [naive, mps]", "listeners: nvml:0.1,gpm:0.2",
              "child_listeners: top:0.5,gpu_procs:0.2", "pack: {max_jobs_per_gpu: 1, guard: true, trials: false}"]
NP = "+np"


def known_config(config: str) -> bool:
    base = config.removesuffix(NP)
    return base in CONFIGS or base in ("run-np", "sweep-pack") or ":" in base


def config_env(config: str, gpu: str | None = None) -> dict[str, str]:
    """The launcher's environment in one configuration (progress counting off for `+np`); `gpu`: the jobs'
    GPU (a sweep is given it as its devices instead)."""
    env = dict(os.environ)
    if config.endswith(NP):
        env[OFF_ENV] = "1"
    if gpu is not None and not config.startswith("sweep"):
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env


def radt_ext() -> list[str]:
    exe = shutil.which("radt-ext")
    return [exe] if exe else [sys.executable, "-m", "radt_ext.cli"]


PIN: list[str] = []  # `jobs --pin CPUS`: every job on those CPUs, plain too (taskset), radt-ext's own threads free


def script_cmd(kind: str, amount: int, dry: bool) -> list[str]:
    k = KINDS[kind]
    args = [*k.cpu_args, "--device", "cpu", "--tiny"] if dry else list(k.args)
    return [*PIN, sys.executable, str(SCRIPTS / k.script), *args, k.work, str(amount)]


def stamped(path: Path, cmd: list[str]) -> list[str]:
    return [sys.executable, str(STAMP), str(path), "--", *cmd]


def command(config: str, job: list[str], stamp: Path, name: str, work: Path, gpu: str | None = None) -> list[str]:
    """The command line of one job in one configuration."""
    inner = stamped(stamp, job)
    config = config.removesuffix(NP)
    if config == "plain":
        return inner
    if config in ("sweep", "sweep-pack"):
        spec = work / "specs" / f"{name}.yaml"
        spec.parent.mkdir(parents=True, exist_ok=True)
        spec.write_text(sweep_spec(name, {"job": inner}, devices=[gpu] if gpu else None, pack=config == "sweep-pack"))
        return [*radt_ext(), "sweep", str(spec)]
    base = [*radt_ext(), "run", "--experiment-name", EXPERIMENT, "--run-name", name, "--tag", f"overhead.config={config}"]
    if config == "run":
        return [*base, "--", *inner]
    if config == "run-np":
        return [*base, "--no-progress", "--", *inner]
    # a listener alone (or several, LISTENER:RATE/LISTENER:RATE...): its cost without counting's
    return [*base, "-l", config.replace("/", ","), "--no-progress", "--", *inner]


def sweep_spec(name: str, commands: dict[str, list[str]], devices: list[str] | None, pack: bool = False) -> str:
    """A sweep at its defaults: each job exclusive, on its own (a list of arguments, quoted for the shell);
    `pack`: as the pack proofs' alone pass runs it (PACK_LINES)."""
    lines = [f"name: {name}", f"experiment: {EXPERIMENT}-{'pack' if pack else 'sweep'}",
             *(PACK_LINES if pack else ["modes: [exclusive]"])]
    if devices:
        lines.append(f"devices: {json.dumps(devices)}")
    lines.append("workloads:")
    for job, cmd in commands.items():
        lines.append(f"  {job}: {{command: {json.dumps(shlex.join(cmd))}}}")
    return "\n".join(lines) + "\n"


def read_stamp(stamp: Path) -> dict:
    """What the stamp saw of one job: its start, end, wall, exit code and own compute time (None: not printed);
    OSError/ValueError where it wrote nothing."""
    s = json.loads(stamp.read_text())
    m = OWN_S.search(s["last"])
    rec = {"job_started": s["started"], "job_ended": s["ended"], "job_rc": s["rc"],
           "job_wall_s": s["ended"] - s["started"], "own_s": float(m.group(1)) if m else None}
    if m is None:
        rec["error"] = f"no own time in {s['last']!r}"
    return rec


def run_one(cmd: list[str], stamp: Path, log: Path, env: dict | None = None) -> dict:
    """One job: the launcher's wall, and what the stamp saw."""
    launched = time.time()
    with open(log, "w") as fh:
        rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    exited = time.time()
    rec = {"launched": launched, "exited": exited, "rc": rc, "wall_s": exited - launched}
    try:
        job = read_stamp(stamp)
    except (OSError, ValueError):
        return {**rec, "error": f"no stamp ({log.name})"}
    return {**rec, **job, "before_s": job["job_started"] - launched, "after_s": exited - job["job_ended"]}


def sized(out: Path, kinds: list[str], seconds: float, dry: bool, env: dict | None = None) -> dict[str, int]:
    """Each kind's amount of work for about `seconds` of its own time, from a warm-up run plain."""
    amounts = {}
    for kind in kinds:
        k = KINDS[kind]
        stamp = out / "logs" / f"warmup-{kind}.json"
        rec = run_one(stamped(stamp, script_cmd(kind, k.first, dry)), stamp, stamp.with_suffix(".log"), env)
        own = rec.get("own_s") or 0.0
        amounts[kind] = k.first if dry or own <= 0 else max(1, round(k.first * seconds / own))
        print(f"warm-up {kind}: {k.work} {k.first} took {own:.3f} s -> {amounts[kind]}", flush=True)
    return amounts


def shuffled_rounds(kinds: list[str], configs: list[str], repeats: int, deadline: float, seed: int):
    """Each round's number and its (kind, configuration) pairs, shuffled; no round begun that would end past
    `deadline` if it took as long as the one before."""
    rng = random.Random(seed)
    round_s = 0.0
    for r in range(repeats):
        if r and time.time() + round_s > deadline:
            print(f"round {r}: skipped, {deadline - time.time():.0f} s left of the budget", flush=True)
            return
        t0 = time.time()
        order = [(k, c) for k in kinds for c in configs]
        rng.shuffle(order)
        yield r, order
        round_s = time.time() - t0


def jobs(args) -> None:
    if args.pin:  # where a job's own compute falls in bands, its CPU may be what moves: the same CPUs every run
        PIN[:] = ["taskset", "-c", args.pin]
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    kinds, configs = args.kinds.split(","), args.configs.split(",")
    if "plain" not in configs:
        raise SystemExit("--configs must hold plain: every cost is taken against it")
    for c in configs:
        if not known_config(c):
            raise SystemExit(f"unknown configuration {c!r}; use plain, run, run-np, sweep, sweep-pack, "
                             f"LISTENER:RATE or several joined by / (LISTENER:RATE/LISTENER:RATE), each "
                             f"optionally with {NP}")
    deadline = time.time() + args.budget_s
    amounts = sized(out, kinds, args.seconds, args.dry, config_env("plain", args.gpu))
    (out / "amounts.json").write_text(json.dumps({"seconds": args.seconds, "amounts": amounts}))
    records = out / "jobs.jsonl"
    for r, order in shuffled_rounds(kinds, configs, args.repeats, deadline, args.seed):
        for kind, config in order:
            name = f"{kind}-{config.replace(':', '_').replace('+', '_').replace('/', '-')}-{r}"
            stamp = out / "logs" / f"{name}.json"
            env = {**config_env(config, args.gpu), "RADT_EXT_TIMINGS": str(out / "logs" / f"{name}.timings.json")}
            rec = run_one(command(config, script_cmd(kind, amounts[kind], args.dry), stamp, name, out, args.gpu),
                          stamp, stamp.with_suffix(".log"), env)
            rec.update(kind=kind, config=config, round=r, amount=amounts[kind], **({"pin": args.pin} if args.pin else {}))
            with open(records, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(f"round {r} {kind:8s} {config:14s} own {fmt(rec.get('own_s'), 3)} s, wall {rec['wall_s']:.2f} s, "
                  f"rc {rec['rc']}{' ' + rec['error'] if 'error' in rec else ''}", flush=True)


def lanes(cmds: list[tuple[str, list[str], Path]], devices: list[str]) -> dict:
    """The queue plain: one lane per GPU, each taking the next job when its last one ended."""
    recs = {}

    def run(item: tuple[str, list[str], Path], device: str) -> None:
        name, cmd, stamp = item
        env = {**os.environ}
        if device != "cpu":
            env["CUDA_VISIBLE_DEVICES"] = device
        recs[name] = {**run_one(cmd, stamp, stamp.with_suffix(".log"), env), "device": device}

    started, ended = in_lanes(cmds, devices, run)
    return {"makespan_s": ended - started, "jobs": recs}


def alone(args) -> None:
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    kinds = args.kinds.split(",")
    try:  # sized by `jobs` already: scaled from there, no second warm-up
        known = json.loads((out / "amounts.json").read_text())
        amounts = {k: max(1, round(known["amounts"][k] * args.seconds / known["seconds"])) for k in kinds}
    except (OSError, ValueError, KeyError):
        amounts = sized(out, kinds, args.seconds, args.dry)
    devices = ["cpu"] if args.dry else gpu_indices()  # the sweep's own default devices
    passes = []
    for r in range(args.repeats):
        for how in ("plain", "sweep"):
            stamps = {k: out / "logs" / f"alone-{how}-{k}-{r}.json" for k in kinds}
            if how == "plain":
                res = lanes([(k, stamped(stamps[k], script_cmd(k, amounts[k], args.dry)), stamps[k]) for k in kinds],
                            devices)
            else:
                spec = out / "specs" / f"alone-{r}.yaml"
                spec.parent.mkdir(parents=True, exist_ok=True)
                spec.write_text(sweep_spec(f"alone-{r}", {k: stamped(stamps[k], script_cmd(k, amounts[k], args.dry))
                                                          for k in kinds}, None if not args.dry else ["cpu"]))
                t0 = time.time()
                env = {**os.environ, "RADT_EXT_TIMINGS": str(out / "logs" / f"alone-sweep-{r}.timings.json")}
                with open(out / "logs" / f"alone-sweep-{r}.log", "w") as fh:
                    rc = subprocess.call([*radt_ext(), "sweep", str(spec)], stdout=fh, stderr=subprocess.STDOUT,
                                         env=env)
                res = {"makespan_s": time.time() - t0, "rc": rc, "jobs": {}}
                for k in kinds:
                    try:
                        res["jobs"][k] = read_stamp(stamps[k])
                    except (OSError, ValueError):
                        res["jobs"][k] = {"error": "no stamp"}
            res.update(how=how, round=r)
            passes.append(res)
            print(f"alone pass {r} {how}: makespan {res['makespan_s']:.1f} s; " + ", ".join(
                f"{k} {fmt(j.get('job_wall_s'), 2)} s" for k, j in res["jobs"].items()), flush=True)
    (out / "alone.json").write_text(json.dumps({"devices": devices, "amounts": amounts, "passes": passes}, indent=1))


def interval(mine: list[float], plain: list[float]) -> tuple[float, float, float]:
    """The cost of `mine` against `plain` in % of plain's mean, with a Welch 95 % interval (nan with one run)."""
    m1, m0 = statistics.fmean(mine), statistics.fmean(plain)
    if m0 <= 0:
        return float("nan"), float("nan"), float("nan")
    cost = (m1 / m0 - 1) * 100
    if len(mine) < 2 or len(plain) < 2:
        return cost, float("nan"), float("nan")
    a, b = statistics.variance(mine) / len(mine), statistics.variance(plain) / len(plain)
    se = math.sqrt(a + b)
    df = (a + b) ** 2 / ((a * a / (len(mine) - 1) + b * b / (len(plain) - 1)) or 1e-300)
    t = t_quantile(max(df, 1.0))  # Welch's degrees of freedom as they are, not floored to a table's
    return cost, cost - t * se / m0 * 100, cost + t * se / m0 * 100


def _call(round_id) -> str:
    """The call a round belongs to: analyse's first folder, or the i of `i:round` for the others."""
    return str(round_id).split(":")[0] if ":" in str(round_id) else "0"


def _folder(arg: str) -> tuple[Path, set[str] | None]:
    """FOLDER[:KIND,KIND...]: a call's results folder and the kinds taken from it (default all)."""
    path, _, kinds = arg.partition(":")
    return Path(path), set(kinds.split(",")) if kinds else None


def _rel(folder: Path, out: Path) -> str:
    """A results folder as the summary names it: its path under --out ("." for --out itself)."""
    try:
        return str(folder.resolve().relative_to(out.resolve())) or "."
    except ValueError:
        return folder.name


def analyse(args) -> None:
    out = Path(args.out)
    recs = []
    also = [_folder(a) for a in args.also or []]
    folders = [(out, None), *also]
    listener_folders = [_folder(a) for a in args.listeners_from or []]
    for i, (d, only) in enumerate(folders + listener_folders):  # each call's rounds apart: plain pairs within it
        if (d / "jobs.jsonl").exists():
            for line in open(d / "jobs.jsonl"):
                r = json.loads(line)
                if only is not None and r["kind"] not in only:
                    continue
                if i >= len(folders) and r["config"] != "plain" and ":" not in r["config"]:
                    continue  # --listeners-from: its listeners alone and the plain runs they pair with
                recs.append({**r, "round": f"{i}:{r['round']}" if i else r["round"], "listeners_only": i >= len(folders)})
    good = [r for r in recs if r.get("own_s") is not None and r["rc"] == 0]
    by = {}
    for r in good:
        by.setdefault((r["kind"], r["config"]), {})[r["round"]] = r
    kinds = [k for k in KINDS if (k, "plain") in by]
    configs = sorted({c for _, c in by}, key=lambda c: (CONFIGS.index(c) if c in CONFIGS else 3, c))
    rows, summary_kinds, listeners = [], {}, {}
    for kind in kinds:
        plain = by[(kind, "plain")]
        mine_plain = {r: p for r, p in plain.items() if not p["listeners_only"]}  # the kinds' lists: these calls
        extra_plain = statistics.median(p["before_s"] + p["after_s"] for p in (mine_plain or plain).values())
        entry = {"bound": KINDS[kind].bound, "plain_s": [mine_plain[r]["own_s"] for r in sorted(mine_plain, key=str)]}
        for config in configs:
            mine = mine_plain if config == "plain" else by.get((kind, config), {})
            rounds = sorted(set(mine) & set(plain), key=str)
            if not rounds:
                continue
            # against the plain runs of the same call(s): the rounds' pairing keeps it to one host
            base = [plain[r] for r in sorted(plain, key=str) if _call(r) in {_call(x) for x in rounds}]
            own = interval([mine[r]["own_s"] for r in rounds], [p["own_s"] for p in base])
            wall = interval([mine[r]["job_wall_s"] for r in rounds], [p["job_wall_s"] for p in base])
            extra = statistics.median(mine[r]["before_s"] + mine[r]["after_s"] for r in rounds) - extra_plain
            before = statistics.median(mine[r]["before_s"] for r in rounds)
            after = statistics.median(mine[r]["after_s"] for r in rounds)
            # each round against the plain run of the same round: drift between rounds cancels
            paired = sorted((mine[r]["own_s"] / plain[r]["own_s"] - 1) * 100 if plain[r]["own_s"] > 0 else float("nan")
                            for r in rounds)
            # the fastest round against the fastest plain one of its call (the host's noise only ever slows a run
            # down; calls may give a job different amounts of work): the median over the calls
            best = statistics.median(
                (min(mine[r]["own_s"] for r in rounds if _call(r) == c)
                 / min(plain[r]["own_s"] for r in plain if _call(r) == c) - 1) * 100
                for c in sorted({_call(r) for r in rounds}))
            # radt-ext's own time around the job, each round against the plain run of its round
            own_time = sorted(mine[r]["before_s"] + mine[r]["after_s"] - plain[r]["before_s"] - plain[r]["after_s"]
                              for r in rounds)
            rows.append([kind, config, len(rounds), fmt(statistics.median(mine[r]["own_s"] for r in rounds), 3),
                         f"{own[0]:+.2f} ({own[1]:+.2f} .. {own[2]:+.2f})" if config != "plain" else "",
                         f"{statistics.median(paired):+.1f} ({paired[0]:+.1f} .. {paired[-1]:+.1f})"
                         if config != "plain" else "",
                         f"{best:+.1f}" if config != "plain" else "",
                         f"{wall[0]:+.2f} ({wall[1]:+.2f} .. {wall[2]:+.2f})" if config != "plain" else "",
                         fmt(before, 2), fmt(after, 2), fmt(extra, 2) if config != "plain" else "",
                         f"{own_time[0]:.2f} .. {own_time[-1]:.2f} ({sum(x <= 0.5 for x in own_time)})"
                         if config != "plain" else ""])
            if config in ("run", "sweep"):
                entry[f"{config}_s"] = [mine[r]["own_s"] for r in rounds]
                entry[f"{config}_cost_pct"] = [round(x, 3) for x in own]
                entry[f"{config}_best_cost_pct"] = round(best, 3)
                entry[f"{config}_wall_cost_pct"] = [round(x, 3) for x in wall]
            if config == "run":
                entry["wall_extra_s"] = round(extra, 3)
            if config == "sweep":
                entry["sweep_wall_extra_s"] = round(extra, 3)
            if ":" in config and not config.endswith(NP):
                listeners.setdefault(config, {})[kind] = round(own[0], 3)
        summary_kinds[kind] = entry
    md = ["### radt-ext's cost against the plain run, each kind of job", "",
          "Own compute time (the script's), its wall time, and radt-ext's own time around it (its start before the "
          "job's, its end after; beyond plain's). Cost: the mean against the mean of the plain runs of the same "
          "call, in %, with a Welch 95 % interval; paired: each round's run against the plain run of its round; "
          "best: the fastest round against the fastest plain run of its call (the median over the calls).", "",
          table(["kind", "config", "rounds", "own s (median)", "own cost %", "own cost % paired (median, range)",
                 "own cost % best", "wall cost %", "before s", "after s",
                 "extra s", "extra s paired (range; rounds ≤ 0.5 s)"], rows)]
    alone_summary = None
    folders = [Path(a) for a in args.alone] if args.alone else [out]
    passes = []  # (folder, its alone.json, a pass)
    for folder in folders:
        if (folder / "alone.json").exists():
            a = json.loads((folder / "alone.json").read_text())
            passes += [(folder, a, p) for p in a["passes"]]
    if passes:
        arows, worst, pairs = [], [], []
        kinds = list(dict.fromkeys(k for _, a, _ in passes for k in a["amounts"]))
        for folder, a, p in passes:
            walls = [j.get("job_wall_s") for j in p["jobs"].values()]
            # one lane: the makespan less its jobs' walls; several: not known which job ran where in the sweep
            own = p["makespan_s"] - sum(w for w in walls if w) if all(walls) and len(a["devices"]) == 1 else None
            where = "" if folder == out else f"{_rel(folder, out)} "
            arows.append([f"{where}{p['round']}", p["how"], fmt(p["makespan_s"], 1), fmt(own, 2),
                          *[fmt(p["jobs"].get(k, {}).get("job_wall_s"), 2) for k in kinds]])
            if p["how"] != "sweep":
                continue
            base = next((q for f, _, q in passes if f == folder and q["how"] == "plain" and q["round"] == p["round"]),
                        None)
            if base is None:
                continue
            base_walls = [j.get("job_wall_s") for j in base["jobs"].values()]
            pairs.append({"folder": _rel(folder, out), "round": p["round"], "devices": a["devices"],
                          "plain_makespan_s": round(base["makespan_s"], 3), "radt_makespan_s": round(p["makespan_s"], 3),
                          "ratio": round(p["makespan_s"] / base["makespan_s"], 4),
                          # the launcher's own time: the makespan less the jobs' own walls
                          "plain_own_s": round(base["makespan_s"] - sum(base_walls), 3)
                          if all(base_walls) and len(a["devices"]) == 1 else None,
                          "radt_own_s": round(own, 3) if own is not None else None})
            for k, j in p["jobs"].items():
                pw = base["jobs"].get(k, {}).get("job_wall_s")
                if pw and j.get("job_wall_s"):
                    worst.append({"job": k, "round": p["round"], "plain_wall_s": round(pw, 3),
                                  "radt_wall_s": round(j["job_wall_s"], 3),
                                  "within": j["job_wall_s"] <= 1.05 * pw + 0.5,
                                  **({"folder": _rel(folder, out)} if folder != out else {})})
        # several passes: their sums (every queue run each way); one pass: its own figures
        alone_summary = {"devices": list(dict.fromkeys(d for _, a, _ in passes for d in a["devices"])),
                         "plain_makespan_s": round(sum(x["plain_makespan_s"] for x in pairs), 3) if pairs else None,
                         "radt_makespan_s": round(sum(x["radt_makespan_s"] for x in pairs), 3) if pairs else None,
                         "passes": pairs, "jobs": worst}
        counts = sorted({len(a["devices"]) for _, a, _ in passes})
        md += ["", f"### The queue plain (one job per GPU at a time, {' or '.join(map(str, counts))} lane(s)) and as a "
               "sweep's alone pass", "", "own s: the makespan less the jobs' own walls (the launcher's own time; one lane only).", "",
               table(["round", "how", "makespan s", "own s", *[f"{k} wall s" for k in kinds]], arows)]
    result = {"card": args.card or gpu_name() or "cpu", "repeats": max((len(e["plain_s"]) for e in summary_kinds.values()), default=0),
              "kinds": summary_kinds, "listeners": listeners, "alone_pass": alone_summary,
              "amounts": json.loads((out / "amounts.json").read_text())["amounts"] if (out / "amounts.json").exists() else {},
              "failed": [{k: r.get(k) for k in ("kind", "config", "round", "rc", "error")}
                         for r in recs if r not in good]}
    text = "\n".join(md) + "\n"
    (out / "overhead_plain.md").write_text(text)
    here = environment()
    try:  # analysed again elsewhere: the host that measured stays the folder's environment
        measured = json.loads((out / "overhead_plain.json").read_text()).get("environment")
    except (OSError, ValueError):
        measured = None
    where = {"environment": here} if not measured or measured == here else {"environment": measured, "analysed_on": here}
    command = [os.path.relpath(a, REPO) if a.startswith(str(REPO)) else a for a in sys.argv]
    (out / "overhead_plain.json").write_text(json.dumps({**result, **where, "command": command}, indent=1))
    if args.summary:
        Path(args.summary).parent.mkdir(parents=True, exist_ok=True)
        Path(args.summary).write_text(json.dumps(result, indent=1) + "\n")
    print(text)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    for name in ("jobs", "alone", "analyse"):
        p = sub.add_parser(name)
        p.add_argument("--out", required=True)
        if name != "analyse":
            p.add_argument("--kinds", default=",".join(DEFAULT_KINDS), help=f"of {', '.join(KINDS)}")
            p.add_argument("--seconds", type=float, default=2.0, help="each job's own compute time, about")
            p.add_argument("--repeats", type=int, default=3)
            p.add_argument("--dry", action="store_true", help="the scripts' CPU versions: plumbing only")
    sub.choices["jobs"].add_argument("--configs", default=",".join(CONFIGS))
    sub.choices["jobs"].add_argument("--budget-s", type=float, default=3600.0,
                                     help="no round started that would end past it (as long as the last one)")
    sub.choices["jobs"].add_argument("--seed", type=int, default=0)
    sub.choices["jobs"].add_argument("--pin", help="CPUS for taskset -c: every job runs on them in every "
                                                   "configuration, plain too (radt-ext's own threads do not)")
    sub.choices["jobs"].add_argument("--gpu", help="the GPU the jobs run on (default: the sweep's own choice; "
                                     "CUDA's default for the rest)")
    sub.choices["analyse"].add_argument("--summary", help="also write the summary JSON here")
    sub.choices["analyse"].add_argument("--also", action="append", help="another call's results folder (its jobs "
                                        "paired with its own plain runs); FOLDER:KIND,KIND takes those kinds only")
    sub.choices["analyse"].add_argument("--card", help="the GPU's name (default: NVML's)")
    sub.choices["analyse"].add_argument("--listeners-from", action="append",
                                        help="another call's results folder whose listeners alone count (each "
                                        "against its own plain runs), nothing else of it; FOLDER:KIND,KIND as --also")
    sub.choices["analyse"].add_argument("--alone", action="append",
                                        help="a results folder of alone passes (default: --out); repeatable: "
                                             "the summary sums every pass's makespans")
    args = ap.parse_args(argv)
    {"jobs": jobs, "alone": alone, "analyse": analyse}[args.what](args)


if __name__ == "__main__":
    main()
