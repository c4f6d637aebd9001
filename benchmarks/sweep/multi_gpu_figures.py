"""Figures of benchmarks/sweep/multi_gpu.sh, read from its MLflow stores; each part prints and writes JSON.

    python3 benchmarks/sweep/multi_gpu_figures.py mps  --uri sqlite:///... --out mps.json
    python3 benchmarks/sweep/multi_gpu_figures.py pool --uri2 sqlite:///... --uri1 sqlite:///... --out pool.json
    python3 benchmarks/sweep/multi_gpu_figures.py ddp  --uri sqlite:///... --out ddp.json
"""
from __future__ import annotations

import argparse
import json
import re

from mlflow.tracking import MlflowClient

from radt_ext.store import timelines


def runs_of(client: MlflowClient):
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids, max_results=5000) if ids else []


def summaries(run) -> dict[str, float]:
    return {k[len("summary/"):]: v for k, v in sorted(run.data.metrics.items()) if k.startswith("summary/")}


def mps(uri: str) -> dict:
    """Every MPS group: its GPU, status, the UUID its daemon and clients were given, each child's
    status, attributed energy and stderr tail (when it failed)."""
    client = MlflowClient(uri)
    runs = runs_of(client)
    groups = [r for r in runs if r.data.tags.get("collocation.mode") == "mps" and "mlflow.parentRunId" not in r.data.tags]
    out = []
    for g in sorted(groups, key=lambda r: r.info.start_time):
        kids = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == g.info.run_id]
        out.append({
            "run_id": g.info.run_id, "status": g.info.status, "gpu": g.data.tags.get("collocation.gpu"),
            "visible": {k: v for k, v in g.data.tags.items() if k.endswith(".visible")},
            "start_ms": g.info.start_time, "end_ms": g.info.end_time,
            "gpu_energy_attributed_total_j": g.data.metrics.get("summary/gpu_energy_attributed_total_j"),
            "children": [{"name": k.data.tags.get("collocation.workload"), "status": k.info.status,
                          "gpu_energy_attributed_j": k.data.metrics.get("summary/gpu_energy_attributed_j"),
                          "duration_s": k.data.metrics.get("summary/e2e_duration_s"),
                          "stderr_tail": k.data.tags.get("radt_ext.stderr_tail", "")[-600:]} for k in kids],
        })
    overlap = None
    sweep_groups = [g for g in out if g["gpu"] in ("0", "1")]
    if len(sweep_groups) >= 2:
        a, b = sweep_groups[0], sweep_groups[1]
        overlap = (min(a["end_ms"], b["end_ms"]) - max(a["start_ms"], b["start_ms"])) / 1000
    ok = all(g["status"] == "FINISHED" and all(c["status"] == "FINISHED" and (c["gpu_energy_attributed_j"] or 0) > 0
                                              for c in g["children"]) for g in out) and bool(out)
    return {"groups": out, "first_two_groups_overlap_s": overlap, "all_finished_with_attributed_energy": ok}


def makespan(uri: str) -> dict:
    client = MlflowClient(uri)
    parents = [r for r in runs_of(client) if "mlflow.parentRunId" not in r.data.tags
               and r.data.tags.get("sweep.hash") and r.data.tags.get("sweep.role") != "report"]
    if not parents:
        return {"variants": 0}
    start = min(r.info.start_time for r in parents)
    end = max(r.info.end_time or 0 for r in parents)
    return {"variants": len(parents), "finished": sum(r.info.status == "FINISHED" for r in parents),
            "makespan_s": (end - start) / 1000,
            "devices": sorted(r.data.tags.get("sweep.device", "?") for r in parents),
            "variant_duration_s": sorted(round((r.info.end_time - r.info.start_time) / 1000, 2) for r in parents)}


def pool(uri2: str, uri1: str) -> dict:
    two, one = makespan(uri2), makespan(uri1)
    ratio = two["makespan_s"] / one["makespan_s"] if two.get("makespan_s") and one.get("makespan_s") else None
    return {"two_gpus": two, "one_gpu": one, "makespan_ratio": ratio, "goal": 0.55,
            "met": ratio is not None and ratio <= 0.55}


def integrate(points: list[tuple[float, float]], t0: float, t1: float) -> float:
    """Trapezoid integral of (t s, W) over [t0, t1]."""
    pts = sorted(p for p in points if t0 <= p[0] <= t1)
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(pts, pts[1:]))


def ddp(uri: str) -> dict:
    """The wrapper's run and the runs the job opened: every summary, the GPUs recorded, and per GPU the
    power points integrated over the run's span and the energy counter's rise, from the store."""
    client = MlflowClient(uri)
    out = {}
    for r in sorted(runs_of(client), key=lambda r: r.info.start_time):
        kind = "wrapper" if r.data.tags.get("radt_ext.command") else "script"
        t0, t1 = r.info.start_time / 1000, (r.info.end_time or r.info.start_time) / 1000
        gpus = sorted({int(m.group(1)) for k in r.data.metrics if (m := re.match(r"system/gpu(\d+)_power_w$", k))})
        per_gpu = {}
        for i in gpus:
            keys = [f"system/gpu{i}_power_w", f"system/gpu{i}_energy_j"]  # full rate: the timeline artifact
            full = timelines.history(client, r.info.run_id, keys)
            power = [(m.timestamp / 1000, m.value) for m in full[keys[0]]]
            energy = [(m.timestamp / 1000, m.value) for m in full[keys[1]]]
            inside = sorted(p for p in energy if t0 <= p[0] <= t1)
            per_gpu[str(i)] = {
                "power_points": len(power), "power_integrated_j": integrate(power, t0, t1),
                "power_first_last_s": [min(p[0] for p in power) - t0, max(p[0] for p in power) - t0] if power else None,
                "max_power_w": max((p[1] for p in power), default=None),
                "energy_counter_points": len(energy),
                "energy_counter_rise_j": inside[-1][1] - inside[0][1] if len(inside) > 1 else None}
        out[r.info.run_id] = {
            "kind": kind, "name": r.data.tags.get("mlflow.runName"), "status": r.info.status,
            "span_s": t1 - t0, "gpus_recorded": gpus,
            "system_metrics": len([k for k in r.data.metrics if k.startswith("system/")]),
            "gpu_tags": {k: v for k, v in r.data.tags.items() if re.match(r"machine\.gpu\.\d+\.(name|uuid|nvml_index|workload_processes_max)$", k)},
            "summaries": summaries(r), "per_gpu": per_gpu,
            "integrated_total_j": sum(g["power_integrated_j"] for g in per_gpu.values())}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["mps", "pool", "ddp"])
    ap.add_argument("--uri")
    ap.add_argument("--uri1")
    ap.add_argument("--uri2")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    result = {"mps": lambda: mps(args.uri), "pool": lambda: pool(args.uri2, args.uri1), "ddp": lambda: ddp(args.uri)}[args.part]()
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1, default=str)
    print(json.dumps(result, indent=1, default=str)[:6000])


if __name__ == "__main__":
    main()
