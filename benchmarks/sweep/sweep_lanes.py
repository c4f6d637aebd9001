"""Lanes: the same four matmul jobs as a sweep on two GPUs at once against one GPU.

    python -m benchmarks.sweep.sweep_lanes specs --out DIR [--seconds 20] [--size 8192]
    python -m benchmarks.sweep.sweep_lanes summarize --out DIR

`specs` writes three sweeps of the same four jobs (matmul of two sizes, each twice):
- lanes.yaml: devices ["0", "1"], grid size [a, b] → 4 variants, a lane per GPU (--executor local);
- one_gpu.yaml: devices ["0"], grid size [a, b], repeats 2 → the same 4 jobs on GPU 0;
- sequential.yaml: lanes.yaml's variants run one at a time (--executor sequential), the sweep as it
  ran before lanes.
Each runs into its own SQLite store DIR/<case>.db. `summarize` reads the stores back: each case's
makespan (first parent run start to last parent run end), whether the lanes' spans overlapped, the
ratios lanes/one_gpu and lanes/sequential; it writes DIR/sweep_lanes.{json,md}.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

CASES = (("lanes", "local"), ("one_gpu", "local"), ("sequential", "sequential"))


def spec(name: str, devices: list[str], sizes: list[int], seconds: float, repeats: int) -> str:
    return "\n".join([
        f"name: {name}",
        f"experiment: sweep-lanes-{name}",
        f"devices: [{', '.join(repr(d) for d in devices)}]",
        "device_mode: each",  # every variant on every listed device: a lane per GPU
        f"repeats: {repeats}",
        "listeners: nvml:0.2",
        "child_listeners: top:0.5",
        "workloads:",
        f"  mm: {{command: \"{sys.executable} -m radt_ext.workloads.matmul --seconds {seconds:g} --size {{size}}\", "
        f"params: {{size: {sizes[0]}}}}}",
        "groups:",
        "  - {workloads: [mm], modes: [exclusive]}",
        f"grid: {{size: [{', '.join(str(s) for s in sizes)}]}}",
        "",
    ])


def write_specs(out: Path, seconds: float, size: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    sizes = [size, size * 3 // 4]
    (out / "lanes.yaml").write_text(spec("lanes", ["0", "1"], sizes, seconds, 1))
    (out / "one_gpu.yaml").write_text(spec("one_gpu", ["0"], sizes, seconds, 2))
    (out / "sequential.yaml").write_text(spec("sequential", ["0", "1"], sizes, seconds, 1))
    for name, executor in CASES:
        print(f"{out / (name + '.yaml')} --executor {executor}")


def spans(db: Path) -> list[dict]:
    from mlflow.tracking import MlflowClient

    if not db.exists():
        return []
    client = MlflowClient(f"sqlite:///{db}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)
    return [{"device": r.data.tags.get("collocation.gpu"), "status": r.info.status, "start_s": r.info.start_time / 1000,
             "end_s": (r.info.end_time or r.info.start_time) / 1000, "size": r.data.tags.get("sweep.param.size"),
             "repeat": r.data.tags.get("sweep.repeat"), "run_id": r.info.run_id}
            for r in runs if r.data.tags.get("sweep.hash") and "mlflow.parentRunId" not in r.data.tags]


def overlap_s(rows: list[dict]) -> float:
    """Seconds during which runs on different devices ran at the same time."""
    total = 0.0
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            if a["device"] != b["device"]:
                total += max(0.0, min(a["end_s"], b["end_s"]) - max(a["start_s"], b["start_s"]))
    return total


def summarize(out: Path) -> int:
    from benchmarks.common import fmt, table, write_results

    cases = {}
    for name, executor in CASES:
        rows = spans(out / f"{name}.db")
        ok = len(rows) == 4 and all(r["status"] == "FINISHED" for r in rows)
        makespan = (max(r["end_s"] for r in rows) - min(r["start_s"] for r in rows)) if rows else float("nan")
        cases[name] = {"executor": executor, "variants": len(rows), "all_finished": ok, "makespan_s": makespan,
                       "device_overlap_s": overlap_s(rows), "runs": rows}
    ratio_one = cases["lanes"]["makespan_s"] / cases["one_gpu"]["makespan_s"] if cases["one_gpu"]["variants"] else None
    ratio_seq = (cases["lanes"]["makespan_s"] / cases["sequential"]["makespan_s"]
                 if cases["sequential"]["variants"] else None)
    rows = [(name, c["executor"], c["variants"], "yes" if c["all_finished"] else "NO", fmt(c["makespan_s"]),
             fmt(c["device_overlap_s"])) for name, c in cases.items()]
    md = "\n".join([
        "### Sweep lanes: four matmul jobs on two GPUs at once vs one GPU",
        "",
        table(["case", "executor", "variants", "all FINISHED", "makespan s", "GPU0/GPU1 overlap s"], rows),
        "",
        f"makespan ratio lanes / one_gpu: {fmt(ratio_one, 3)}; lanes / sequential: {fmt(ratio_seq, 3)}",
    ])
    write_results(out, "sweep_lanes", {"cases": cases, "ratio_lanes_over_one_gpu": ratio_one,
                                       "ratio_lanes_over_sequential": ratio_seq}, md)
    return 0 if all(c["all_finished"] for c in cases.values()) else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["specs", "summarize"])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seconds", type=float, default=20.0, help="matmul seconds per job")
    ap.add_argument("--size", type=int, default=8192, help="the larger matrix side (the other is 3/4 of it)")
    args = ap.parse_args(argv)
    if args.what == "specs":
        write_specs(args.out, args.seconds, args.size)
        return 0
    return summarize(args.out)


if __name__ == "__main__":
    sys.exit(main())
