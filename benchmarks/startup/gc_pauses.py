"""The cycle collector's full passes (generation 2) in `radt-ext sweep`'s process around a sweep of one job,
with the command's quiet heap (MLflow's import and first connection without the collector, then frozen:
radt_ext/store/client.py quiet_heap) and without it: each pass's length and when, from gc.callbacks. Each
sweep in a fresh interpreter, into a fresh SQLite store of its own; NVML replayed where RADT_EXT_NVML_REPLAY
says so, so it runs without a GPU.

    RADT_EXT_NVML_REPLAY=listeners/traces/h200_matmul.json python -m benchmarks.startup.gc_pauses --out DIR
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ONE = textwrap.dedent("""
    import contextlib, gc, json, sys, time
    passes, start = [], {}
    def seen(phase, info):
        if info["generation"] == 2:
            if phase == "start":
                start["t"] = time.perf_counter()
            else:
                passes.append([time.time(), time.perf_counter() - start["t"]])
    gc.callbacks.append(seen)
    out, quiet = sys.argv[1], sys.argv[2] == "on"
    from radt_ext import cli
    from radt_ext.store import client
    if not quiet:
        client.quiet_heap = lambda step: contextlib.nullcontext()
    with contextlib.suppress(SystemExit):
        cli.main.main(["sweep", out + "/one.yaml"], standalone_mode=False)
    json.dump({"passes": passes, "ended": time.time()}, open(out + "/passes.json", "w"))
""")


def one(out: Path, quiet: bool, seconds: float) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    (out / "one.yaml").write_text(f"name: {out.name}\nmodes: [exclusive]\nworkloads:\n"
                                  f"  job: {{command: \"{sys.executable} -c 'import time; time.sleep({seconds})'\"}}\n")
    t0 = time.time()
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{out / 'mlflow.db'}", "RADT_EXT_SPOOL_DIR": str(out / "spool")}
    subprocess.run([sys.executable, "-c", ONE, str(out), "on" if quiet else "off"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    found = json.loads((out / "passes.json").read_text())
    return {"passes": [[round(t - t0, 3), round(s, 4)] for t, s in found["passes"]],
            "total_s": round(sum(s for _, s in found["passes"]), 4), "sweep_s": round(found["ended"] - t0, 3)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=5.0, help="the job's length")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    out = Path(args.out)
    result = {how: [one(out / f"{how}-{r}", how == "quiet", args.seconds) for r in range(args.repeats)]
              for how in ("as-is", "quiet")}
    (out / "gc_pauses.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = ["| collector | sweep s | full passes (s after the command: length s) | their total s |", "| --- | --- | --- | --- |"]
    for how, runs in result.items():
        for r in runs:
            passes = ", ".join(f"{t:.2f}: {s:.3f}" for t, s in r["passes"]) or "none"
            lines.append(f"| {how} | {r['sweep_s']:.2f} | {passes} | {r['total_s']:.3f} |")
    with contextlib.suppress(OSError):
        (out / "gc_pauses.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
