"""Where the monitor process's CPU goes, thread by thread, next to what a bare Python costs.

    python -m benchmarks.sampling.monitor_threads --seconds 20 --sets nvml,top,gpu_procs --out DIR

For each configuration one process runs for `--seconds` after `--settle`, and the CPU of each of its
threads (psutil's per-thread user + system time) is read before and after: a Python that only sleeps,
a Python that has initialised NVML and opened GPU 0 and then sleeps, and the monitor process behind
`track()` (`python -m radt_ext.run.monitor_process`, into SQLite) with each listener set at `--rate`.
Threads are named by `py-spy dump` where py-spy is installed (Python threads by their names; a thread
py-spy does not list is native, e.g. a library's own); otherwise by their native id only.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

from benchmarks.common import table, write_results

SLEEPER = "import time; time.sleep(3600)"
NVML_SLEEPER = ("import time, pynvml; pynvml.nvmlInit(); pynvml.nvmlDeviceGetHandleByIndex(0); "
                "print('ready', flush=True); time.sleep(3600)")


def thread_names(pid: int) -> dict[int, str]:
    """Native thread id → Python thread name, from `py-spy dump` (empty without py-spy)."""
    spy = shutil.which("py-spy")
    if not spy:
        return {}
    out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30).stdout
    return {int(tid, 16 if tid.startswith("0x") else 10): name
            for tid, name in re.findall(r"Thread (0x[0-9A-Fa-f]+|\d+) \([^)]*\): \"([^\"]*)\"", out)}


def per_thread(proc: psutil.Process, seconds: float) -> tuple[dict[int, float], float]:
    before = {t.id: t.user_time + t.system_time for t in proc.threads()}
    t0 = time.perf_counter()
    time.sleep(seconds)
    after = {t.id: t.user_time + t.system_time for t in proc.threads()}
    wall = time.perf_counter() - t0
    return {tid: 100.0 * (cpu - before.get(tid, 0.0)) / wall for tid, cpu in after.items()}, wall


def measure(what: str, cmd: list[str], ready_line: bool, seconds: float, settle: float) -> dict:
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        if ready_line:
            first = proc.stdout.readline()
            if not first:
                raise RuntimeError(f"{what}: the process ended before it was ready")
        time.sleep(settle)
        ps = psutil.Process(proc.pid)
        names = thread_names(proc.pid)
        cpu, wall = per_thread(ps, seconds)
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=60 if what.startswith("monitor") else 0.1)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    threads = {f"{names.get(tid, 'native' if names else 'thread')} {tid}": round(pct, 3)
               for tid, pct in sorted(cpu.items(), key=lambda kv: -kv[1])}
    return {"what": what, "seconds": round(wall, 2), "cpu_pct_of_core": round(sum(cpu.values()), 3),
            "threads": threads}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--settle", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--sets", default="nvml,top,gpu_procs", help="listener sets, each measured alone (all: every available listener)")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)

    from mlflow.tracking import MlflowClient

    uri = os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{os.path.join(tempfile.mkdtemp(prefix='radt-bench-'), 'mlflow.db')}"
    client = MlflowClient(uri)
    experiment = client.create_experiment(f"monitor-threads-{int(time.time())}")
    configs = [("python, sleeping", [sys.executable, "-c", SLEEPER], False),
               ("python, NVML initialised, sleeping", [sys.executable, "-c", NVML_SLEEPER], True)]
    for listeners in args.sets.split(","):
        run = client.create_run(experiment, run_name=f"threads-{listeners}")
        configs.append((f"monitor process, {listeners}",
                        [sys.executable, "-m", "radt_ext.run.monitor_process", "--run-id", run.info.run_id,
                         "--tracking-uri", uri, "--pid", str(os.getpid()), "--interval", str(1.0 / args.rate)]
                        + ([] if listeners == "all" else ["--listeners", listeners]), True))
    rows = []
    for what, cmd, ready in configs:
        try:
            rows.append(measure(what, cmd, ready, args.seconds, args.settle))
        except Exception as exc:  # one configuration failing must not lose the others
            rows.append({"what": what, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
        print(rows[-1], flush=True)
    text = f"### CPU by thread ({args.seconds:g} s measured after {args.settle:g} s, listeners at {args.rate:g} Hz)\n\n"
    text += table(["configuration", "CPU % of one core", "threads (% of one core each)"],
                  [[r["what"], r.get("cpu_pct_of_core", "–"),
                    r.get("error") or ", ".join(f"{k}: {v}" for k, v in r["threads"].items())] for r in rows])
    write_results(args.out, "monitor_threads", {"rows": rows, "rate_hz": args.rate, "seconds": args.seconds}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
