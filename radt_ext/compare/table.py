"""The comparison itself: metric values per setting and their ratio to the baseline.

Runs that repeat one setting (report/settings.py) are one column: the mean of each metric and its 95 %
Student-t interval, and a difference from the baseline that lies within the noise is marked as such
(figures/repeats.py). A setting run once is a column of one run, as before.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from radt_ext.figures import repeats
from radt_ext.figures.summary_names import HEADLINE, OLD_NAMES, upgrade
from radt_ext.report import settings
from radt_ext.report.data import run_name

SUMMARY = "summary/"
# the order metrics are shown in when present (active phase first); the rest of summary/* follows alphabetically
PREFERRED = HEADLINE
HIGHER_IS_BETTER = ("throughput", "tflops", "accuracy", "sm_active", "tensor_active", "samples_per_s", "speedup")
LOWER_IS_BETTER = ("duration", "startup", "energy", "power", "temp", "_per_sample_j", "time_s", "loss", "rss", "mem_mib",
                   "slowdown")
SAME = 0.01  # a ratio this close to 1 is no difference


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
    runs: list  # one mlflow Run per setting (its first run), the baseline's first
    baseline_id: str
    baseline_how: str
    metrics: list[str]  # full metric keys, e.g. summary/e2e_duration_s
    values: dict[str, dict[str, repeats.Estimate]]  # metric -> a setting's first run id -> over its repeats
    settings: dict[str, list]  # a setting's first run id -> its runs (repeats), in order

    def _key(self, run_id: str) -> str:
        if run_id in self.settings:
            return run_id
        return next((k for k, runs in self.settings.items() if any(r.info.run_id == run_id for r in runs)), run_id)

    def estimate(self, metric: str, run_id: str) -> repeats.Estimate | None:
        return self.values[metric].get(self._key(run_id))

    def value(self, metric: str, run_id: str) -> float | None:
        est = self.estimate(metric, run_id)
        return None if est is None else est.mean

    def repeats(self, run_id: str) -> int:
        return len(self.settings.get(self._key(run_id), [])) or 1

    def ratio(self, metric: str, run_id: str) -> float | None:
        base, value = self.value(metric, self.baseline_id), self.value(metric, run_id)
        if base is None or value is None or not math.isfinite(base) or not math.isfinite(value):
            return None
        if base == 0:
            return 1.0 if value == 0 else None
        return value / base

    def noise(self, metric: str, run_id: str) -> bool | None:
        """True when the setting's difference from the baseline lies within the noise of their repeats;
        None for the baseline itself, or where neither side has repeats."""
        if self._key(run_id) == self.baseline_id:
            return None
        return repeats.noise(self.estimate(metric, self.baseline_id), self.estimate(metric, run_id))

    def verdict(self, metric: str, run_id: str) -> int:
        """+1 better than the baseline, -1 worse, 0 same, within the noise, or unknown (1 % tolerance)."""
        r = self.ratio(metric, run_id)
        d = direction(metric)
        if r is None or d == 0 or abs(r - 1.0) < SAME or self.noise(metric, run_id):
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


def compare_runs(runs: list, baseline, baseline_how: str, metrics: list[str] | None = None,
                 per_run: bool = False) -> Comparison:
    """The runs side by side, repeats of one setting together (per_run: every run a column of its own);
    the baseline's setting first, the baseline run its first run."""
    if not any(r.info.run_id == baseline.info.run_id for r in runs):
        runs = [baseline, *runs]
    groups = [[r] for r in runs] if per_run else settings.group_runs(runs)
    base = next(g for g in groups if any(r.info.run_id == baseline.info.run_id for r in g))
    base.sort(key=lambda r: r.info.run_id != baseline.info.run_id)  # the baseline run stands for its setting
    groups = [base] + [g for g in groups if g is not base]
    recorded = {r.info.run_id: upgrade(dict(r.data.metrics)) for g in groups for r in g}  # old names as today's
    available = {k for m in recorded.values() for k in m}
    if metrics:
        keys = [_key(m, available) for m in metrics]
    else:
        summaries = {k[len(SUMMARY):] for k in available if k.startswith(SUMMARY)}
        keys = [SUMMARY + m for m in PREFERRED if m in summaries]
        keys += [SUMMARY + m for m in sorted(summaries - set(PREFERRED))]
    values: dict[str, dict[str, repeats.Estimate]] = {}
    for k in keys:
        values[k] = {}
        for g in groups:
            est = repeats.estimate(recorded[r.info.run_id].get(k) for r in g)
            if est is not None:
                values[k][g[0].info.run_id] = est
    return Comparison([g[0] for g in groups], baseline.info.run_id, baseline_how, keys, values,
                      {g[0].info.run_id: g for g in groups})
