"""Figures of benchmarks/progress/active_phase.sh from its MLflow store: the active-phase summaries of each
training beside the recipe's own per-epoch samples/s.

    python3 benchmarks/progress/active_phase_figures.py --experiment active-phase --out RESULTS

The recipe's per-epoch figure is the mean `samples_per_s` of the epochs after the first (the first
carries cuDNN's autotuning and the allocator's warm-up), and over all epochs. The steady figure is the
samples of the epochs after the first over the wall time from the first epoch's end to the last one's
(the evaluations between them included, as in the active phase): the active phase without epoch 1.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from mlflow.tracking import MlflowClient

from radt_ext.figures.summary_names import upgrade


def epochs(client, run_id: str) -> list[float]:
    hist = sorted(client.get_metric_history(run_id, "samples_per_s"), key=lambda m: m.step)
    return [m.value for m in hist]


def steady(client, run_id: str, samples: float | None, per_epoch: list[float]) -> float | None:
    """Samples/s from the end of epoch 1 to the end of the last epoch (wall time, evaluations included)."""
    ends = [m.value for m in sorted(client.get_metric_history(run_id, "epoch_end_time_s"), key=lambda m: m.step)]
    if len(ends) < 2 or not samples or ends[-1] <= ends[0]:
        return None
    return samples * (len(ends) - 1) / len(ends) / (ends[-1] - ends[0])


def row(client, run) -> dict:
    m = upgrade({k[len("summary/"):]: v for k, v in run.data.metrics.items() if k.startswith("summary/")}, prefix="")
    per_epoch = epochs(client, run.info.run_id)
    later = per_epoch[1:] or per_epoch
    return {
        "run_id": run.info.run_id, "name": run.info.run_name,
        "mode": run.data.tags.get("collocation.mode"), "batch_size": int(float(run.data.params.get("batch_size", 0))),
        "active_source": run.data.tags.get("radt_ext.active_source"),
        "e2e_duration_s": m.get("e2e_duration_s"), "startup_s": m.get("startup_s"), "active_s": m.get("active_s"),
        "active_samples_per_s": m.get("throughput_samples_per_s"),
        "e2e_samples_per_s": m.get("e2e_throughput_samples_per_s"),
        "overlap_s": m.get("overlap_s"), "overlap_samples_per_s": m.get("overlap_throughput_samples_per_s"),
        "slowdown_ratio": m.get("slowdown_ratio"),
        "epoch_samples_per_s": per_epoch,
        "epoch_samples_per_s_after_first": sum(later) / len(later) if later else None,
        "train_time_s": run.data.metrics.get("train_time_s"),
        "steady_samples_per_s": steady(client, run.info.run_id, m.get("e2e_samples"), per_epoch),
    }


def ratio(a, b):
    return a / b if a and b else None


def pct(a, b):
    return 100.0 * (a - b) / b if a is not None and b else None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--experiment", default="active-phase")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    client = MlflowClient()
    exp = client.get_experiment_by_name(args.experiment)
    runs = client.search_runs([exp.experiment_id], "tags.`mlflow.parentRunId` != ''") if exp else []
    # children: one per workload (the parent runs carry the group's figures)
    rows = [row(client, r) for r in runs if r.data.tags.get("collocation.workload")]
    alone = {r["batch_size"]: r for r in rows if r["mode"] == "exclusive"}
    paired = [r for r in rows if r["mode"] == "naive"]
    out: dict = {"runs": rows}
    sizes = sorted(alone)
    if len(sizes) >= 2:
        small, large = alone[sizes[0]], alone[sizes[-1]]
        out["batch_size_ratio"] = {
            "sizes": [sizes[0], sizes[-1]],
            "active_phase": ratio(large["active_samples_per_s"], small["active_samples_per_s"]),
            "whole_run": ratio(large["e2e_samples_per_s"], small["e2e_samples_per_s"]),
            "recipe_epochs_after_first": ratio(large["epoch_samples_per_s_after_first"],
                                               small["epoch_samples_per_s_after_first"]),
            "steady": ratio(large["steady_samples_per_s"], small["steady_samples_per_s"]),
        }
        b = out["batch_size_ratio"]
        b["active_vs_epochs_pct"] = pct(b["active_phase"], b["recipe_epochs_after_first"])
        b["whole_run_vs_epochs_pct"] = pct(b["whole_run"], b["recipe_epochs_after_first"])
    base = alone.get(paired[0]["batch_size"]) if paired else None
    if base:
        out["collocated"] = []
        for r in paired:
            epoch_slowdown = ratio(base["epoch_samples_per_s_after_first"], r["epoch_samples_per_s_after_first"])
            out["collocated"].append({
                "run_id": r["run_id"], "overlap_s": r["overlap_s"], "slowdown_ratio": r["slowdown_ratio"],
                "slowdown_from_recipe_epochs": epoch_slowdown,
                "slowdown_steady": ratio(base["steady_samples_per_s"], r["steady_samples_per_s"]),
                "slowdown_vs_epochs_pct": pct(r["slowdown_ratio"], epoch_slowdown),
                "whole_run_duration_ratio": ratio(r["e2e_duration_s"], base["e2e_duration_s"]),
            })
    Path(args.out, "active_phase_figures.json").write_text(json.dumps(out, indent=1))
    Path(args.out, "active_phase_figures.md").write_text(markdown(out))


def fmt(v, spec="{:.3f}"):
    return "–" if v is None else spec.format(v)


def markdown(out: dict) -> str:
    lines = ["| run | mode | bs | source | e2e s | start-up s | active s | active samples/s | e2e samples/s | "
             "recipe samples/s (epochs 2+) | steady samples/s | overlap samples/s | slowdown |", "|" + "---|" * 13]
    for r in out["runs"]:
        lines.append(f"| {r['run_id'][:8]} | {r['mode']} | {r['batch_size']} | {r['active_source']} | "
                     f"{fmt(r['e2e_duration_s'], '{:.1f}')} | {fmt(r['startup_s'], '{:.1f}')} | "
                     f"{fmt(r['active_s'], '{:.1f}')} | {fmt(r['active_samples_per_s'], '{:.0f}')} | "
                     f"{fmt(r['e2e_samples_per_s'], '{:.0f}')} | {fmt(r['epoch_samples_per_s_after_first'], '{:.0f}')} | "
                     f"{fmt(r.get('steady_samples_per_s'), '{:.0f}')} | "
                     f"{fmt(r['overlap_samples_per_s'], '{:.0f}')} | {fmt(r['slowdown_ratio'])} |")
    b = out.get("batch_size_ratio")
    if b:
        lines += ["", f"Throughput ratio bs {b['sizes'][1]} / bs {b['sizes'][0]}: active phase {fmt(b['active_phase'])}, "
                  f"recipe's epochs {fmt(b['recipe_epochs_after_first'])} (active vs epochs "
                  f"{fmt(b['active_vs_epochs_pct'], '{:+.1f}')} %), whole run {fmt(b['whole_run'])} "
                  f"({fmt(b['whole_run_vs_epochs_pct'], '{:+.1f}')} %), steady {fmt(b.get('steady'))}."]
    for c in out.get("collocated", []):
        lines.append(f"Collocated {c['run_id'][:8]}: slowdown over the overlap ({fmt(c['overlap_s'], '{:.1f}')} s) "
                     f"{fmt(c['slowdown_ratio'])}, from the recipe's epochs {fmt(c['slowdown_from_recipe_epochs'])} "
                     f"({fmt(c['slowdown_vs_epochs_pct'], '{:+.1f}')} %), steady {fmt(c.get('slowdown_steady'))}; whole-run duration ratio "
                     f"{fmt(c['whole_run_duration_ratio'])}.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
