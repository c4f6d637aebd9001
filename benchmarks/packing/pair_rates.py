"""A queue's pairs measured side by side on one GPU, for the packing simulator: each job alone once (the
baseline every pair's slowdown is taken against), then two jobs at a time in one collocation group (MPS by
default), started together, in the order given; each group's parent tag `collocation.pairs` holds the two
jobs' rates of work over the span both were in their active phases, against their rates alone
(radt_ext/collocation/pairs.py). A queue's packed passes measure only the pairs their plans tried; this
measures those a plan would want to know.

    python -m benchmarks.packing.pair_rates spec --queue examples/pack_bound/queue.yaml --name b \
        --pairs vae+epochs,encoder+epochs --out pairs.yaml
    python -m benchmarks.packing.pair_rates fixture --store sqlite:///mlflow.db --experiment pack-pairs-b \
        --base tests/radt_ext/packing/fixtures/queue_b_h200_rates.json --card "NVIDIA H200" --out FILE

`fixture` writes the simulator's data (queue_rates.py's shape): the jobs alone and the pairs of the FINISHED
groups of this store, with the pairs and start-ups of `--base` (the queue's packed passes, same card) after them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from benchmarks.packing import pack_bound, queue_rates


def parse_pairs(text: str, jobs: dict) -> list[tuple[str, str]]:
    """`A+B,C+D`, or `all`: every two of the queue's jobs, in its order."""
    if text.strip() == "all":
        names = list(jobs)
        return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    out = []
    for item in filter(None, (p.strip() for p in text.split(","))):
        a, sep, b = item.partition("+")
        if not sep or a not in jobs or b not in jobs or a == b:
            sys.exit(f"pair_rates: {item!r} is not two of the queue's jobs as A+B ({', '.join(jobs)})")
        out.append((a, b))
    return out


def spec(path: str, name: str, pairs: list[tuple[str, str]], mode: str, dry: bool,
         measure_s: float | None = None, devices: list[str] | None = None) -> str:
    """Each job of the pairs alone (exclusive, run first by the sweep), then each pair as one group; with
    `measure_s`, every group stopped once its active phases ran that long (alone, or side by side): the pairs
    of long jobs measured in short windows."""
    jobs = pack_bound.queue(path)
    folder = os.path.dirname(os.path.abspath(path))
    used = [n for n in jobs if any(n in p for p in pairs)]
    lines = [f"name: pack-pairs-{name}", f"devices: {json.dumps(devices or ['0'])}",
             *pack_bound.listener_lines(dry), "workloads:"]
    lines += [pack_bound.workload_line(n, jobs[n], folder, dry) for n in used]
    lines.append("groups:")
    cut = f", measure_s: {measure_s:g}" if measure_s else ""
    lines += [f"  - {{workloads: [{n}], modes: [exclusive]{cut}}}" for n in used]
    lines += [f"  - {{workloads: [{a}, {b}], modes: [{mode}]{cut}}}" for a, b in pairs]
    return "\n".join(lines) + "\n"


def fixture(store: str, experiment: str, base: str | None, card: str, queue_path: str | None) -> dict:
    data = {"card": card, **queue_rates.extract(store, experiment, finished_only=True)}
    data["source"] = (f"python -m benchmarks.packing.pair_rates fixture --experiment {experiment}"
                      + (f" --base {os.path.basename(base)}" if base else ""))
    if base:
        with open(base) as fh:
            before = json.load(fh)
        data["pairs"] += before.get("pairs", [])
        data["boots"] += before.get("boots", [])
        for key in ("order", "queue"):
            if key in before:
                data[key] = before[key]
        missing = sorted(set(before["jobs"]) - set(data["jobs"]))
        data["jobs"].update({n: before["jobs"][n] for n in missing})  # jobs no pair here used: as the base has them
    if queue_path:
        data["queue"] = queue_path
    return data


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("spec", help="the sweep spec: each job alone, then each pair")
    s.add_argument("--queue", required=True)
    s.add_argument("--name", required=True)
    s.add_argument("--pairs", required=True, help="A+B,C+D,... in the order to run them, or all")
    s.add_argument("--measure-s", type=float, help="stop every group once its active phases ran this long")
    s.add_argument("--devices", default="0", help="the GPUs its groups take, as they come free (default 0)")
    s.add_argument("--mode", default="mps", choices=("mps", "naive"))
    s.add_argument("--dry", action="store_true", help="the queue's tiny CPU arguments")
    s.add_argument("--out", required=True)
    f = sub.add_parser("fixture", help="the simulator's data from the store")
    f.add_argument("--store", required=True)
    f.add_argument("--experiment", required=True)
    f.add_argument("--base", help="a queue_rates.py file of the same queue whose pairs and start-ups are added")
    f.add_argument("--card", default="")
    f.add_argument("--queue")
    f.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "spec":
        pairs = parse_pairs(args.pairs, pack_bound.queue(args.queue))
        with open(args.out, "w") as fh:
            fh.write(spec(args.queue, args.name, pairs, args.mode, args.dry, args.measure_s,
                          args.devices.split(",")))
        return
    data = fixture(args.store, args.experiment, args.base, args.card, args.queue)
    with open(args.out, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    print(f"{len(data['jobs'])} jobs, {len(data['pairs'])} pairs, {len(data['boots'])} start-ups -> {args.out}")


if __name__ == "__main__":
    main()
