"""The collocation table of a sweep, read back from MLflow: one row per group variant.

    python -m benchmarks.collocation.collocation --experiment gpu-collocation --sweep gpu-collocation \
        --out-md table.md --out-json table.json

Columns: workloads, mode, batch size, makespan, aggregate throughput (samples over the
makespan, from the parent run), steady throughput (sum over the workloads of their mean
epoch `samples_per_s` after the first epoch, as torch_train logs it), per-workload
slowdown (the exclusive run's steady throughput over the collocated one's; startup left out),
SM active (GPM, parent), energy per sample (GPU energy counter over samples, parent).
"""
from __future__ import annotations

import argparse
import json
import statistics

from mlflow.tracking import MlflowClient

from radt_ext.figures.summary_names import upgrade


def steady_throughput(client: MlflowClient, run_id: str) -> float | None:
    history = sorted(client.get_metric_history(run_id, "samples_per_s"), key=lambda m: m.step)
    if not history:
        return None
    steady = history[1:] or history
    return statistics.mean(m.value for m in steady)


def rows(experiment: str, sweep: str, uri: str | None = None) -> list[dict]:
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], f"tags.`sweep.id` = '{sweep}'", max_results=10000)
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("sweep.role") != "report"]
    children: dict[str, list] = {}
    for r in runs:
        if "mlflow.parentRunId" in r.data.tags:
            children.setdefault(r.data.tags["mlflow.parentRunId"], []).append(r)
    # exclusive steady throughput per workload command
    alone: dict[str, float] = {}
    for p in parents:
        if p.data.tags.get("collocation.mode") == "exclusive" and p.info.status == "FINISHED":
            for c in children.get(p.info.run_id, []):
                t = steady_throughput(client, c.info.run_id)
                if t:
                    alone[c.data.tags.get("sweep.workload_hash", "")] = t
    out = []
    for p in sorted(parents, key=lambda r: r.info.start_time):
        m, tags = upgrade(dict(p.data.metrics)), p.data.tags  # runs of any version, by today's names
        kids = sorted(children.get(p.info.run_id, []), key=lambda r: r.data.tags.get("collocation.index", ""))
        per = []
        for c in kids:
            t = steady_throughput(client, c.info.run_id)
            base = alone.get(c.data.tags.get("sweep.workload_hash", ""))
            per.append({"workload": c.info.run_name, "status": c.info.status,
                        "steady_samples_per_s": t, "slowdown": (base / t) if (t and base) else None,
                        "duration_s": upgrade(dict(c.data.metrics)).get("summary/e2e_duration_s"),
                        "duration_slowdown": c.data.metrics.get("summary/slowdown_ratio"),
                        "peak_proc_gpu_mem_mib": c.data.metrics.get("system/gpu0_proc_mem_mib")})
        slow = [x["slowdown"] for x in per if x["slowdown"]] or [x["duration_slowdown"] for x in per
                                                                 if x["duration_slowdown"]]
        steady = [x["steady_samples_per_s"] for x in per if x["steady_samples_per_s"]]
        if tags.get("collocation.mode") == "exclusive" and steady:
            steady = [statistics.mean(steady)] if len(set(x["workload"] for x in per)) == 1 else steady
            agg_steady = len(per) / sum(1 / s for s in steady) if len(steady) == len(per) else None
        else:
            agg_steady = sum(steady) if steady and len(steady) == len(per) else None
        params = {k[len("sweep.param."):]: v for k, v in tags.items() if k.startswith("sweep.param.")}
        out.append({
            "group": tags.get("sweep.group"), "mode": tags.get("collocation.mode"), "params": params,
            "workloads": len(per), "status": p.info.status, "run_id": p.info.run_id,
            "makespan_s": m.get("summary/makespan_s"),
            "throughput_samples_per_s": m.get("summary/e2e_throughput_samples_per_s"),
            "steady_throughput_samples_per_s": agg_steady,
            "slowdown_mean": statistics.mean(slow) if slow else None, "slowdown_max": max(slow) if slow else None,
            "sm_active_pct": m.get("summary/e2e_gpu_mean_avg_sm_active_pct"),
            "energy_j": m.get("summary/e2e_gpu_total_energy_j"),
            "energy_per_sample_j": m.get("summary/e2e_energy_per_sample_j"),
            "start_skew_s": m.get("summary/start_skew_s"), "per_workload": per,
        })
    return out


def markdown(table: list[dict]) -> str:
    def f(v, fmt="{:.2f}"):
        return "-" if v is None else fmt.format(v)

    lines = ["| group | mode | params | n | status | makespan s | samples/s (makespan) | steady samples/s "
             "| slowdown mean / max | SM active % | J/sample |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table:
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        lines.append(f"| {r['group']} | {r['mode']} | {params} | {r['workloads']} | {r['status']} | "
                     f"{f(r['makespan_s'], '{:.1f}')} | {f(r['throughput_samples_per_s'], '{:.0f}')} | "
                     f"{f(r['steady_throughput_samples_per_s'], '{:.0f}')} | "
                     f"{f(r['slowdown_mean'])} / {f(r['slowdown_max'])} | {f(r['sm_active_pct'], '{:.1f}')} | "
                     f"{f(r['energy_per_sample_j'], '{:.5f}')} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--experiment", required=True)
    ap.add_argument("--sweep", required=True)
    ap.add_argument("--tracking-uri", default=None)
    ap.add_argument("--out-md", default=None)
    ap.add_argument("--out-json", default=None)
    args = ap.parse_args()
    table = rows(args.experiment, args.sweep, args.tracking_uri)
    text = markdown(table)
    print(text)
    if args.out_md:
        with open(args.out_md, "w") as fh:
            fh.write(text)
    if args.out_json:
        with open(args.out_json, "w") as fh:
            json.dump(table, fh, indent=1)


if __name__ == "__main__":
    main()
