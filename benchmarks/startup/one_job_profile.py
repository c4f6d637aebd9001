"""Where a sweep of one job spends its own time on a GPU host: `radt-ext sweep` in this interpreter under
cProfile (the main thread from the command to its exit, the group's thread from its start to its end), with
RADT_EXT_TIMINGS, around an unmodified job that stamps its own start and end. Also which of the modules a
sweep imports have no bytecode on this host (each fresh interpreter compiles those again).

    python -m benchmarks.startup.one_job_profile --out DIR --seconds 8 --repeats 3

DIR/<n>.main.prof, <n>.group.prof (pstats; from Python 3.12 the main thread's profile holds every thread), <n>.timings.json, <n>.job.json; DIR/summary.txt: per repeat the
job's start after the command and the exit after the job, the steps, and each profile's top functions.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from benchmarks.startup import bytecode

JOB = textwrap.dedent("""\
    import json, sys, time
    t = time.time()
    import torch
    dev = sys.argv[3]
    x = torch.randn(4096 if dev == "cuda" else 256, 4096 if dev == "cuda" else 256, device=dev)
    s = time.time()
    while time.time() - s < float(sys.argv[2]):
        x = (x @ x).clamp_(-1, 1)
    if dev == "cuda":
        torch.cuda.synchronize()
    print(f"own compute {time.time() - s:.3f} s")
    json.dump({"started": t, "ended": time.time()}, open(sys.argv[1], "w"))
""")


def top(path: Path, n: int = 25) -> str:
    s = io.StringIO()
    pstats.Stats(str(path), stream=s).sort_stats("cumulative").print_stats(n)
    return "\n".join(line[:170] for line in s.getvalue().splitlines()[6:])


def one(out: Path, n: int, seconds: float, spec: Path, device: str) -> str:
    """One sweep in this fresh interpreter, its own imports inside the main thread's profile but the group's."""
    from radt_ext.collocation import group as G

    stamp = out / f"{n}.job.json"
    where = "0" if device == "cuda" else "cpu"
    spec.write_text(f"name: one-{n}\nexperiment: one-job-profile\nmodes: [exclusive]\ndevices: [\"{where}\"]\n"
                    "workloads:\n"
                    f"  job: {{command: \"{sys.executable} {out / 'job.py'} {stamp} {seconds} {device}\"}}\n")
    run = G.GroupRunner._run
    group_prof = cProfile.Profile()

    def profiled(self, *a, **k):
        try:
            group_prof.enable()
        except ValueError:  # Python 3.12+: one profiler sees every thread, the main thread's holds the group's
            return run(self, *a, **k)
        try:
            return run(self, *a, **k)
        finally:
            group_prof.disable()
            group_prof.dump_stats(str(out / f"{n}.group.prof"))

    G.GroupRunner._run = profiled
    os.environ["RADT_EXT_TIMINGS"] = str(out / f"{n}.timings.json")
    main = cProfile.Profile()
    t0 = time.time()
    main.enable()
    try:
        from radt_ext import cli

        cli.main.main(["sweep", str(spec)], standalone_mode=False)
    except SystemExit:
        pass
    finally:
        main.disable()
        G.GroupRunner._run = run
    t1 = time.time()
    main.dump_stats(str(out / f"{n}.main.prof"))
    job = json.loads(stamp.read_text())
    return (f"## repeat {n}: job started {job['started'] - t0:.3f} s after the command, the sweep returned "
            f"{t1 - job['ended']:.3f} s after it ended\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cuda", help="the job's torch device (cpu: a try without a GPU)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a repeat, in a fresh interpreter
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.one is not None:
        (out / f"{args.one}.line").write_text(one(out, args.one, args.seconds, out / f"one-{args.one}.yaml",
                                                          args.device))
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "job.py").write_text(JOB)
    lines = []
    t = time.time()
    import radt_ext.cli  # noqa: F401
    import radt_ext.sweep.cli  # noqa: F401
    from radt_ext.collocation import group  # noqa: F401
    import mlflow  # noqa: F401
    lines.append(f"imports {time.time() - t:.3f} s; packages with modules lacking bytecode: {bytecode.lacking()}\n")
    for n in range(args.repeats):
        subprocess.run([sys.executable, "-m", "benchmarks.startup.one_job_profile", "--out", str(out), "--one", str(n),
                        "--seconds", str(args.seconds), "--device", args.device], check=False)
        line = out / f"{n}.line"
        lines.append(line.read_text() if line.exists() else f"## repeat {n}: no result\n")
    for n in range(args.repeats):
        for part in ("main", "group"):
            if (out / f"{n}.{part}.prof").exists():
                lines.append(f"### {n} {part}\n{top(out / f'{n}.{part}.prof')}\n")
    (out / "summary.txt").write_text("\n".join(lines))
    print("\n".join(lines[:args.repeats + 1]))


if __name__ == "__main__":
    main()
