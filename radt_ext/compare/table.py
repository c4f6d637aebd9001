"""The comparison itself: metric values per run and their ratio to the baseline run."""
from __future__ import annotations

import math
from dataclasses import dataclass

from radt_ext.report.data import run_name
from radt_ext.figures.summary_names import HEADLINE, OLD_NAMES, upgrade

SUMMARY = "summary/"
# the order metrics are shown in when present (active phase first); the rest of summary/* follows alphabetically
PREFERRED = HEADLINE
HIGHER_IS_BETTER = ("throughput", "tflops", "accuracy", "sm_active", "tensor_active", "samples_per_s", "speedup")
LOWER_IS_BETTER = ("duration", "startup", "energy", "power", "temp", "_per_sample_j", "time_s", "loss", "rss", "mem_mib",
                   "slowdown")


def direction(metric: str) -> int:
    """+1 when higher is better, -1 when lower is better, 0 when it is a matter of taste."""
    name = metric.lower()
    if any(word in name for word in HIGHER_IS_BETTER):
        return 1
    if any(word in name for word in LOWER_IS_BETTER):
        return -1
    return 0


@dataclass
class Comparison:
    runs: list  # mlflow Run objects, the baseline first
    baseline_id: str
    baseline_how: str
    metrics: list[str]  # full metric keys, e.g. summary/e2e_duration_s
    values: dict[str, dict[str, float]]  # metric -> run_id -> value

    def value(self, metric: str, run_id: str) -> float | None:
        return self.values[metric].get(run_id)

    def ratio(self, metric: str, run_id: str) -> float | None:
        base = self.values[metric].get(self.baseline_id)
        value = self.values[metric].get(run_id)
        if base is None or value is None or not math.isfinite(base) or not math.isfinite(value):
            return None
        if base == 0:
            return 1.0 if value == 0 else None
        return value / base

    def verdict(self, metric: str, run_id: str) -> int:
        """+1 better than the baseline, -1 worse, 0 same or unknown (1 % tolerance)."""
        r = self.ratio(metric, run_id)
        d = direction(metric)
        if r is None or d == 0 or abs(r - 1.0) < 0.01:
            return 0
        return d if r > 1 else -d

    def label(self, run) -> str:
        tags = run.data.tags
        extra = tags.get("variant") or tags.get("recipe")
        mode = tags.get("collocation.mode")
        name = run_name(run)
        parts = [name] + ([extra] if extra and extra != name else []) + ([f"[{mode}]"] if mode else [])
        return " ".join(parts)


def _key(metric: str, available: set[str]) -> str:
    if metric in available:
        return metric
    if SUMMARY + metric in available:
        return SUMMARY + metric
    name = metric[len(SUMMARY):] if metric.startswith(SUMMARY) else metric
    if name in OLD_NAMES:  # an old name asked for: today's name of the same figure
        return SUMMARY + OLD_NAMES[name]
    return metric


def compare_runs(runs: list, baseline, baseline_how: str, metrics: list[str] | None = None) -> Comparison:
    ordered = [baseline] + [r for r in runs if r.info.run_id != baseline.info.run_id]
    recorded = {r.info.run_id: upgrade(dict(r.data.metrics)) for r in ordered}  # old names read as today's
    available = {k for m in recorded.values() for k in m}
    if metrics:
        keys = [_key(m, available) for m in metrics]
    else:
        summaries = {k[len(SUMMARY):] for k in available if k.startswith(SUMMARY)}
        keys = [SUMMARY + m for m in PREFERRED if m in summaries]
        keys += [SUMMARY + m for m in sorted(summaries - set(PREFERRED))]
    values = {k: {rid: m[k] for rid, m in recorded.items() if k in m} for k in keys}
    return Comparison(ordered, baseline.info.run_id, baseline_how, keys, values)
