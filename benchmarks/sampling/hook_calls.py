"""What progress counting's start-up hook costs a script whose loop calls many small modules itself: the
unmodified `examples/unmodified/layer_decode.py` on the CPU (`--tiny`: each call a few microseconds, so the
hook's own cost per call shows), plain against the same script with the hook loaded as `radt-ext run` loads it
(its `sitecustomize` first on PYTHONPATH, the progress file in the environment), in alternating rounds; with
`--before`, also the hook of another checkout (e.g. `git worktree add <dir> <commit>`).

    python -m benchmarks.sampling.hook_calls --repeats 7 [--before DIR] [--out FILE.json]

Each configuration's own compute time (the script's last line), its median, and the cost against plain: the
median of each round's time over the plain run of its round, and the medians' difference per module call.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from radt_ext.workload_api.progress import ENV as PROGRESS_ENV

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "unmodified" / "layer_decode.py"
ARGS = ("--device", "cpu", "--tiny", "--batch", "2", "--tokens", "64", "--sequences", "150")
# module calls the script makes a token with --tiny: the embedding, 2 layers of 6 Linears, the head
CALLS = 150 * 64 * (1 + 2 * 6 + 1)
SITE = Path("radt_ext") / "workload_api" / "autoprogress" / "site"
OWN_S = re.compile(r"in ([0-9.]+) s$")


def run(root: Path | None, progress: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RADT_EXT_")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(root / SITE), str(root)])
        env[PROGRESS_ENV] = progress
    else:
        env.pop("PYTHONPATH", None)
    out = subprocess.run([sys.executable, str(SCRIPT), *ARGS], env=env, capture_output=True, text=True, check=True)
    return float(OWN_S.search(out.stdout.strip().splitlines()[-1]).group(1))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--before", help="another checkout's root: its hook too")
    ap.add_argument("--out", help="write the result here as JSON")
    args = ap.parse_args(argv)
    configs = {"plain": None, "hook": REPO, **({"hook_before": Path(args.before)} if args.before else {})}
    times: dict[str, list[float]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for c, root in configs.items():
                times[c].append(run(root, os.path.join(tmp, f"{c}-{r}.jsonl")))
    result = {"script": f"examples/unmodified/layer_decode.py {' '.join(ARGS)}", "repeats": args.repeats,
              "own_s": times, "median_s": {c: round(statistics.median(t), 4) for c, t in times.items()},
              "cost_pct": {c: round(statistics.median((x / p - 1) * 100 for x, p in zip(t, times["plain"])), 2)
                           for c, t in times.items() if c != "plain"},
              "module_calls": CALLS,  # the medians' difference over them: the hook's cost per module call
              "cost_us_per_call": {c: round((statistics.median(t) - statistics.median(times["plain"])) / CALLS * 1e6, 3)
                                   for c, t in times.items() if c != "plain"},
              "command": "python -m benchmarks.sampling.hook_calls " + " ".join(argv if argv is not None else sys.argv[1:])}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
