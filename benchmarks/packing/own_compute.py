"""Each job's own compute time in a queue's alone pass against its plain run: the seconds (and samples) its
script prints as its last line, from the plain lanes' `plain.json` and the alone pass's `alone.log` (the
sweep's output, which holds each job's own lines). A job's line is found in the log by its plain line with
every decimal number blanked (its command's counts stay: two jobs of one script with other arguments differ),
else, for a job that stops on time (its count of work varies), with every number blanked where one line
alone has that shape.

    python -m benchmarks.packing.own_compute --results docs/validation/pack_plain/long

Writes RESULTS/own_compute.json ({job: {"plain_s", "alone_s", "cost_pct", "plain_samples", "alone_samples"}}:
cost_pct, the job's rate of work plain over its rate in the alone pass, less one, in %; for a job that stops
on time, the work it did) and prints the table.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from benchmarks.common import table

DECIMAL = re.compile(r"[0-9]+\.[0-9]+")
NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?")
SECONDS = re.compile(r"([0-9]+\.[0-9]+) s\b")
SAMPLES = re.compile(r"([0-9]+) samples")


def shape(line: str, numbers: re.Pattern = DECIMAL) -> str:
    return numbers.sub("#", line.strip())


def figures(line: str) -> tuple[float | None, float | None]:
    """(own seconds, samples) of a job's last line; None where the line gives none."""
    s, n = SECONDS.findall(line), SAMPLES.search(line)
    return (float(s[-1]) if s else None), (float(n.group(1)) if n else None)


def compare(plain: dict, log: str) -> dict:
    lines, loose = {}, {}
    for text in log.splitlines():
        lines.setdefault(shape(text), text)
        loose.setdefault(shape(text, NUMBER), []).append(text)
    out = {}
    for job, p in plain["jobs"].items():
        last = p.get("last", "")
        alone = lines.get(shape(last))
        if alone is None and len(loose.get(shape(last, NUMBER), [])) == 1:
            alone = loose[shape(last, NUMBER)][0]
        if alone is None:
            continue
        (ps, pn), (as_, an) = figures(p["last"]), figures(alone)
        cost = None
        if ps and as_:  # its rate of work plain over its rate in the alone pass (the same work: its times)
            cost = (pn / ps) / (an / as_) if pn and an else as_ / ps
        out[job] = {"plain_s": ps, "alone_s": as_, "cost_pct": None if cost is None else round((cost - 1) * 100, 2),
                    "plain_samples": pn, "alone_samples": an}
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, help="a queue's results folder (plain.json, alone.log)")
    args = ap.parse_args(argv)
    folder = Path(args.results)
    found = compare(json.loads((folder / "plain.json").read_text()), (folder / "alone.log").read_text())
    (folder / "own_compute.json").write_text(json.dumps(found, indent=1) + "\n")
    rows = [[job, f["plain_s"], f["alone_s"], "" if f["cost_pct"] is None else f"{f['cost_pct']:+.1f}",
             f["plain_samples"], f["alone_samples"]] for job, f in found.items()]
    print(table(["job", "own s plain", "own s alone pass", "cost %", "samples plain", "samples alone pass"], rows))


if __name__ == "__main__":
    main()
