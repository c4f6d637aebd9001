"""Where a sweep's own time goes, from a results folder of overhead_plain (each sweep's RADT_EXT_TIMINGS file
beside each job's stamp): for a sweep of one job (`jobs`, config sweep) its time before the job and after it,
split at its steps; for an alone pass (`alone`) when its first job started after the plan, the gaps between
the jobs of each lane (a GPU's) and its exit after the last.

    python -m benchmarks.sampling.sweep_steps RESULTS [RESULTS ...] > sweep_steps.md
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} s" if values else "-"


def one_job(folder: Path) -> list[str]:
    """A row per sweep of one job: seconds from the command to its plan, its job's process, the job's first
    line; from the job's end to the devices free, the group's end, the sweep's end, its exit."""
    rows = []
    path = folder / "jobs.jsonl"
    for rec in (json.loads(line) for line in path.read_text().splitlines()) if path.exists() else ():
        steps = folder / "logs" / f"{rec['kind']}-{rec['config']}-{rec['round']}.timings.json"
        if not rec["config"].startswith("sweep") or "job_ended" not in rec or not steps.exists():
            continue
        t = json.loads(steps.read_text())
        group, launched, ended = t["groups"][0], rec["launched"], rec["job_ended"]
        rows.append([f"{rec['kind']} {rec['round']}", t["planned"] - launched, group["workload_started"] - launched,
                     rec["job_started"] - launched, group["freed"] - ended, group["closed"] - ended,
                     t["ended"] - ended, rec["exited"] - ended])
    if not rows:
        return []
    head = ["job", "plan", "its process", "its first line", "devices free", "group ended", "sweep ended", "exited"]
    out = [f"### {folder.name}: a sweep of one job (s after the command; s after the job ended)", "",
           "| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    out += ["| " + " | ".join([r[0], *(f"{x:.2f}" for x in r[1:])]) + " |" for r in rows]
    for i, name in enumerate(head[1:], start=1):
        out.append(f"- {name}: {_span([r[i] for r in rows])}")
    return out + [""]


def _lanes(jobs: list[dict]) -> list[list[dict]]:
    """The jobs (by start) a lane each GPU: by their device where stamped, else each after the job of a lane
    that ended last before it started (a pool hands the next job to the GPU just freed)."""
    lanes: list[list[dict]] = []
    for j in jobs:
        if "device" in j:
            free = [lane for lane in lanes if lane[-1].get("device") == j["device"]]
        else:
            free = [lane for lane in lanes if lane[-1]["job_ended"] <= j["job_started"]]
        if free:
            max(free, key=lambda lane: lane[-1]["job_ended"]).append(j)
        else:
            lanes.append([j])
    return lanes


def alone(folder: Path) -> list[str]:
    """Each alone pass through the sweep: its first job's start after the plan, the gaps, the exit."""
    path = folder / "alone.json"
    if not path.exists():
        return []
    out = [f"### {folder.name}: the sweep's alone pass (s)", "",
           "| round | first job after the plan | gaps between jobs | exit after the last job |", "| --- | --- | --- | --- |"]
    for p in json.loads(path.read_text())["passes"]:
        steps = folder / "logs" / f"alone-sweep-{p['round']}.timings.json"
        if p["how"] != "sweep":
            continue
        t = json.loads(steps.read_text()) if steps.exists() else None  # passes before the timings file: gaps only
        jobs = sorted((j for j in p["jobs"].values() if "job_started" in j), key=lambda j: j["job_started"])
        lanes = _lanes(jobs)
        gaps = "; ".join((f"lane {n}: " if len(lanes) > 1 else "")
                         + ", ".join(f"{b['job_started'] - a['job_ended']:.2f}" for a, b in zip(js, js[1:]))
                         for n, js in enumerate(lanes))
        first = f"{jobs[0]['job_started'] - t['planned']:.2f}" if t else "-"
        last = f"{t['ended'] - max(j['job_ended'] for j in jobs):.2f}" if t else "-"
        out.append(f"| {p['round']} | {first} | {gaps} | {last} |")
    return out + [""]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", type=Path)
    args = ap.parse_args(argv)
    for folder in args.results:
        print("\n".join(one_job(folder) + alone(folder)))


if __name__ == "__main__":
    main()
