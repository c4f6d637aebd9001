"""A packing proof's queue run plain, the way a user runs it without radt-ext: each job's script as plain
`python`, one lane per GPU, each lane taking the queue's next job (in the queue file's order) when its
last one ended. Each job runs under benchmarks/sampling/stamp.py (its start, end, exit code and last line);
nothing of radt-ext runs in the jobs or beside them.

    python -m benchmarks.packing.plain --queue FILE --out DIR [--devices 0,1] [--dry]

DIR/plain.json: {"devices", "started", "ended", "makespan_s", "jobs": {name: {"device", "started", "ended",
"wall_s", "rc", "last", "samples"}}}; `samples`: the count of work the job's last line gives (`N samples`),
else None. --dry: the queue's `cpu` arguments (with --device cpu --tiny), as pack_bound's dry flow.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from benchmarks.common import in_lanes
from benchmarks.packing.pack_bound import queue

STAMP = Path(__file__).resolve().parents[1] / "sampling" / "stamp.py"
SAMPLES = re.compile(r"([0-9]+) samples")


def commands(path: str, dry: bool, python: str = sys.executable) -> dict[str, list[str]]:
    """Each job's plain command line, in the queue file's order (pack_bound.spec's scripts and arguments)."""
    folder = os.path.dirname(os.path.abspath(path))
    out = {}
    for name, job in queue(path).items():
        args = f"{job['cpu']} --device cpu --tiny" if dry else job["gpu"]
        out[name] = [python, os.path.join(folder, job["script"]), *args.split()]
    return out


def read(stamp: Path) -> dict:
    """What the stamp saw of one job (`error` where it wrote nothing)."""
    try:
        s = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return {"error": f"no stamp {stamp.name}"}
    m = SAMPLES.search(s["last"])
    return {"started": s["started"], "ended": s["ended"], "wall_s": s["ended"] - s["started"], "rc": s["rc"],
            "last": s["last"], "samples": float(m.group(1)) if m else None}


def lanes(cmds: dict[str, list[str]], devices: list[str], folder: Path) -> dict:
    """The jobs in `cmds` plain, one lane per device, each taking the next job when its last one ended."""
    folder.mkdir(parents=True, exist_ok=True)
    jobs = {}

    def run(item: tuple[str, list[str]], device: str) -> None:
        name, cmd = item
        stamp = folder / f"{name}.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RADT_EXT_", "MLFLOW_"))}
        env["CUDA_VISIBLE_DEVICES"] = device
        with open(folder / f"{name}.log", "w") as log:
            subprocess.call([sys.executable, str(STAMP), str(stamp), "--", *cmd], stderr=log, env=env)
        jobs[name] = {"device": device, **read(stamp)}

    started, ended = in_lanes(list(cmds.items()), devices, run)
    return {"devices": devices, "started": started, "ended": ended, "makespan_s": ended - started,
            "jobs": {n: jobs[n] for n in cmds if n in jobs}}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queue", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--devices", default="0,1", help="one lane per device (CUDA_VISIBLE_DEVICES of its jobs)")
    ap.add_argument("--dry", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out)
    res = lanes(commands(args.queue, args.dry), args.devices.split(","), out / "plain")
    (out / "plain.json").write_text(json.dumps(res, indent=1))
    failed = [n for n, j in res["jobs"].items() if j.get("rc") != 0]
    print(f"plain: {len(res['jobs'])} jobs on {len(res['devices'])} lane(s) in {res['makespan_s']:.1f} s"
          + (f"; not 0: {', '.join(failed)}" if failed else ""))


if __name__ == "__main__":
    main()
