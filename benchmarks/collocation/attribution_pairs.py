"""Each job's own energy on a shared GPU: the tables from what benchmarks/collocation/attribution_pairs.sh left.

    python -m benchmarks.collocation.attribution_pairs --store sqlite:///mlflow.db --experiment attribution-pairs \
        --raw raw_gpu0.jsonl raw_gpu1.jsonl [--once-a-second raw_gpu0_1s.jsonl] --out DIR
    python -m benchmarks.collocation.attribution_pairs --raw proc_samples.jsonl.gz --out DIR   # the driver's ticks only
    python -m benchmarks.collocation.attribution_pairs --raw proc_samples.jsonl.gz --export-ticks FILE.json --note TEXT
        # every stretch where runs shared the GPU: their ticks and the power, the tests' fixture
    python -m benchmarks.collocation.attribution_pairs --store sqlite:///mlflow.db --export-groups FILE.json --group ID... --note TEXT
        # groups as the store holds them (what `recomputed` reads), the tests' fixture

Writes DIR/attribution_pairs.md and .json:
- identical pairs (a group of two runs of one workload), per mode and repeat: the two jobs' attributed
  energy as their runs logged it (as run), the gap between them (of their mean), and each one's interval
  (`summary/gpu_energy_attributed_low_j` / `_high_j`); per mode the mean and largest gap (goal: mean
  ≤ 3 %, none above 5 %) and whether every job's interval holds the mean of the repeats; the same
  recomputed from the store by today's split (`recomputed`), and the ticks alone (no progress);
- the unequal pair (`once` beside `twice`): the energy ratio against the work ratio (progress samples),
  as run and recomputed, for the whole energy, its active part and the energy inside each job's own
  active phase;
- the driver's ticks, from the raw per-process samples (listeners.record_proc_samples every 50 ms): the
  tick, processes named per tick, busy ticks per group and the runs of one name, and what a reader asking
  once a second keeps of them (--once-a-second: a second recorder's file of the same GPU).
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import statistics
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks.common import write_tables  # noqa: E402
from radt_ext.collocation.energy_split import Child, energy_in, split  # noqa: E402

MEAN_GOAL, MAX_GOAL, WORK_GOAL = 3.0, 5.0, 5.0  # %


def read_rows(path: str) -> list[dict]:
    opener = gzip.open if path.endswith(".gz") else open
    out = []
    with opener(path, "rt") as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line cut by the recorder's end
    return out


# ---- the store ---------------------------------------------------------------------------------------

def _series(client, run_id: str, key: str) -> list[tuple[float, float]]:
    """A run's timeline at its full rate: its timeline artifact (the store holds the timeline's shape)."""
    from radt_ext.store import timelines

    return sorted((m.timestamp / 1000.0, m.value) for m in timelines.history(client, run_id, [key])[key])


def store_groups(uri: str, experiment: str) -> list[dict]:
    """Every collocated group of the experiment with its two-or-more children and what they logged."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    runs = client.search_runs([exp.experiment_id], max_results=5000)
    kids = defaultdict(list)
    for r in runs:
        parent = r.data.tags.get("mlflow.parentRunId")
        if parent:
            kids[parent].append(r)
    out = []
    for p in runs:
        mode = p.data.tags.get("collocation.mode")
        if mode not in ("naive", "mps") or len(kids[p.info.run_id]) < 2:
            continue
        children = []
        for c in sorted(kids[p.info.run_id], key=lambda r: r.data.tags.get("collocation.index", "")):
            m, t = c.data.metrics, c.data.tags
            window = t.get("collocation.progress_window")
            children.append({
                "run_id": c.info.run_id, "name": t.get("collocation.workload", c.info.run_name),
                "workload": t.get("sweep.workload", t.get("collocation.workload", "")),
                "status": c.info.status,
                "energy_j": m.get("summary/gpu_energy_attributed_j"),
                "low_j": m.get("summary/gpu_energy_attributed_low_j"),
                "high_j": m.get("summary/gpu_energy_attributed_high_j"),
                "active_j": m.get("summary/gpu_energy_active_attributed_j"),
                "samples": m.get("summary/e2e_samples", m.get("summary/samples")),
                "window_samples": m.get("summary/samples"),
                "overlap_samples": m.get("summary/overlap_samples"),
                "command": t.get("radt_ext.command", ""),
                "start": float(t.get("collocation.started_s", 0) or 0),
                "end": float(t.get("collocation.ended_s", 0) or 0) or None,
                "window": tuple(float(x) for x in window.split(",")) if window else None,
                "sm": _series(client, c.info.run_id, "system/gpu0_proc_sm_pct"),
            })
        parent_series = {"gpu0_power_w": _series(client, p.info.run_id, "system/gpu0_power_w"),
                         "gpu0_energy_j": _series(client, p.info.run_id, "system/gpu0_energy_j")}
        out.append({"run_id": p.info.run_id, "mode": mode, "group": p.data.tags.get("sweep.group", ""),
                    "repeat": p.data.tags.get("sweep.repeat", ""), "device": p.data.tags.get("sweep.device", ""),
                    "status": p.info.status, "children": children, "parent_series": parent_series})
    return out


def stored_progress(child: dict, overlap: tuple[float, float] | None) -> list[tuple[float, float]] | None:
    """A job's progress as far as the store holds it: its first and last mark (the window), the samples
    between them and those inside the group's overlap (where every job was active); the part outside
    the overlap at its mean rate there. The live split reads every progress record instead."""
    window, total = child["window"], child["window_samples"]
    if not window or not total or window[1] <= window[0]:
        return None
    a, b = window
    inside = child["overlap_samples"]
    if overlap is None or inside is None or not (a <= overlap[0] < overlap[1] <= b):
        return [(a, 0.0), (b, float(total))]
    before, after = overlap[0] - a, b - overlap[1]
    outside = max(0.0, total - inside)
    pre = outside * before / (before + after) if before + after > 0 else 0.0
    points = [(a, 0.0), (overlap[0], pre), (overlap[1], pre + inside), (b, float(total))]
    return [p for i, p in enumerate(points) if i == 0 or p[0] > points[i - 1][0]]


def _split(group: dict, windows: bool, progress: bool) -> list:
    """The energy split of a group read from the store, redone by today's code: with the jobs' progress
    windows (windows) and their work over the window they all ran in (progress)."""
    spans = [c["window"] for c in group["children"] if c["window"]]
    overlap = None
    if len(spans) == len(group["children"]) and spans:
        lo, hi = max(w[0] for w in spans), min(w[1] for w in spans)
        overlap = (lo, hi) if hi > lo else None
    kids = [Child(c["name"], "0", c["start"], c["end"], {"gpu0_proc_sm_pct": c["sm"]} if c["sm"] else {},
                  window=c["window"] if windows else None,
                  progress=stored_progress(c, overlap) if progress else None, kind=c.get("command", ""))
            for c in group["children"]]
    return split(["0"], group["parent_series"], kids)


def recomputed(group: dict, windows: bool, progress: bool | None = None) -> dict[str, dict[str, float]]:
    """The split recomputed from the store: {name: {energy_j, active_j, low_j, high_j}}. windows: with the
    jobs' progress windows; progress (default: as windows): with their work (`stored_progress`)."""
    parts = _split(group, windows, windows if progress is None else progress)
    if not parts:
        return {}
    return {n: {"energy_j": s.energy_j, "active_j": s.active_j, "low_j": s.low_j, "high_j": s.high_j}
            for n, s in parts[0].shares.items()}


def gap_pct(a: float, b: float) -> float:
    return abs(a - b) / ((a + b) / 2) * 100 if a and b else float("nan")


def ratio(a, b) -> float:
    return a / b if a is not None and b else float("nan")


def own_phase_energy(group: dict, name: str, window) -> float:
    """A job's recomputed energy inside its own active phase (its progress window): the energy of its work."""
    parts = _split(group, windows=True, progress=True)
    if not parts or not window or name not in parts[0].shares:
        return float("nan")
    return energy_in(parts[0].shares[name].timeline, *window)


def _gaps(gaps: list) -> dict:
    """Mean and largest of the gaps there are (None and NaN left out)."""
    got = [g for g in gaps if g is not None and g == g]
    return {"mean_gap_pct": statistics.mean(got) if got else float("nan"), "max_gap_pct": max(got, default=float("nan"))}


def _summary(rows: list[dict], prefix: str) -> dict:
    """Mean and largest gap over the repeats, the goal, and how many intervals hold the repeats' mean."""
    gaps = _gaps([r.get(f"{prefix}gap_pct") for r in rows])
    energies = [e for r in rows for e in (r[f"{prefix}a_j"], r[f"{prefix}b_j"]) if e is not None]
    if gaps["mean_gap_pct"] != gaps["mean_gap_pct"] or not energies:
        return {"repeats": len(rows), "mean_gap_pct": float("nan"), "max_gap_pct": float("nan"), "goal_met": None,
                "mean_energy_j": float("nan"), "intervals_holding_the_mean": "–"}
    mean_e = statistics.mean(energies)
    held = sum(1 for r in rows for lo_hi in (r[f"{prefix}a_interval"], r[f"{prefix}b_interval"])
               if None not in lo_hi and lo_hi[0] <= mean_e <= lo_hi[1])
    return {"repeats": len(rows), **gaps,
            "goal_met": gaps["mean_gap_pct"] <= MEAN_GOAL and gaps["max_gap_pct"] <= MAX_GOAL,
            "mean_energy_j": mean_e, "intervals_holding_the_mean": f"{held}/{2 * len(rows)}"}


def pair_tables(groups: list[dict]) -> dict:
    """As run (what the runs logged) and recomputed from the store with today's split (`rc_` fields)."""
    identical = defaultdict(list)  # (workload, mode) -> rows
    unequal = []
    for g in groups:
        c = g["children"]
        if len(c) != 2 or any(x["energy_j"] is None for x in c):
            continue
        a, b = c
        store = recomputed(g, windows=True)
        if a["workload"] == b["workload"]:
            row = {"repeat": g["repeat"], "device": g["device"], "status": g["status"],
                   "a_j": a["energy_j"], "b_j": b["energy_j"], "gap_pct": gap_pct(a["energy_j"], b["energy_j"]),
                   "a_interval": [a["low_j"], a["high_j"]], "b_interval": [b["low_j"], b["high_j"]],
                   "a_samples": a["samples"], "b_samples": b["samples"]}
            if store:
                ra, rb = store[a["name"]], store[b["name"]]
                row.update({"rc_a_j": ra["energy_j"], "rc_b_j": rb["energy_j"],
                            "rc_gap_pct": gap_pct(ra["energy_j"], rb["energy_j"]),
                            "rc_a_interval": [ra["low_j"], ra["high_j"]], "rc_b_interval": [rb["low_j"], rb["high_j"]]})
            # without progress: the driver's ticks (naive), an even split of who is present (MPS): the split before
            ticks = recomputed(g, windows=False)
            if ticks:
                row["ticks_only_gap_pct"] = gap_pct(ticks[a["name"]]["energy_j"], ticks[b["name"]]["energy_j"])
            if a["samples"] and b["samples"]:  # jobs bound by time do unequal work: their joules per sample
                row["per_sample_gap_pct"] = gap_pct(a["energy_j"] / a["samples"], b["energy_j"] / b["samples"])
            identical[(a["workload"], g["mode"])].append(row)
        elif {a["workload"], b["workload"]} == {"once", "twice"}:
            once, twice = (a, b) if a["workload"] == "once" else (b, a)
            work = ratio(twice["samples"], once["samples"])
            row = {"repeat": g["repeat"], "device": g["device"], "once_j": once["energy_j"], "twice_j": twice["energy_j"],
                   "once_samples": once["samples"], "twice_samples": twice["samples"], "work_ratio": work,
                   "energy_ratio": ratio(twice["energy_j"], once["energy_j"]),
                   "active_ratio": ratio(twice["active_j"], once["active_j"]),
                   "once_interval": [once["low_j"], once["high_j"]], "twice_interval": [twice["low_j"], twice["high_j"]]}
            row["error_pct"] = (ratio(row["energy_ratio"], work) - 1) * 100
            row["active_error_pct"] = (ratio(row["active_ratio"], work) - 1) * 100
            if store:
                ro, rt = store[once["name"]], store[twice["name"]]
                row["rc_once_j"], row["rc_twice_j"] = ro["energy_j"], rt["energy_j"]
                row["rc_error_pct"] = (ratio(ratio(rt["energy_j"], ro["energy_j"]), work) - 1) * 100
                row["rc_active_error_pct"] = (ratio(ratio(rt["active_j"], ro["active_j"]), work) - 1) * 100
                row["rc_own_phase_error_pct"] = (ratio(ratio(own_phase_energy(g, twice["name"], twice["window"]),
                                                             own_phase_energy(g, once["name"], once["window"])),
                                                       work) - 1) * 100
            unequal.append(row)
    summary = {f"{w} {m}": {"as_run": _summary(rows, ""), "recomputed": _summary(rows, "rc_"),
                            "without_progress": _gaps([r.get("ticks_only_gap_pct") for r in rows])}
               for (w, m), rows in sorted(identical.items())}
    return {"identical": {f"{w} {m}": rows for (w, m), rows in sorted(identical.items())}, "summary": summary,
            "unequal": unequal}


# ---- the driver's ticks -------------------------------------------------------------------------------

def tick_stats(rows: list[dict], slow: list[dict] | None = None) -> dict:
    util = [r for r in rows if r.get("kind") == "util"]
    runs_of = {int(r["pid"]): r.get("run_id", "") for r in rows if r.get("kind") == "proc"}
    stamps = sorted({r["ts_us"] for r in util})
    spacing = sorted(b - a for a, b in zip(stamps, stamps[1:]))
    per_stamp = Counter(r["ts_us"] for r in util)
    out = {"samples": len(util), "ticks": len(stamps),
           "tick_ms": spacing[len(spacing) // 2] / 1000 if spacing else None,
           "most_processes_in_one_tick": max(per_stamp.values()) if per_stamp else 0,
           "missed_ticks": sum(1 for d in spacing if spacing and d > 1.5 * spacing[len(spacing) // 2])}
    # groups: busy processes of runs whose busy ticks overlap in time
    busy = sorted((r["ts_us"] / 1e6, int(r["pid"])) for r in util if r["sm"] >= 1 and runs_of.get(int(r["pid"])))
    spans = _busy_spans(util, runs_of)
    shared = []
    for g in _meeting(spans):
        if len(g) < 2:
            continue
        both = [(t, pid) for t, pid in busy if pid in g and max(spans[q][0] for q in g) <= t <= min(spans[q][1] for q in g)]
        names = [pid for _, pid in both]
        lengths = [len(list(run)) for _, run in itertools.groupby(names)]  # runs of one name
        shared.append({"runs": [runs_of[p] for p in sorted(g)], "busy_ticks_while_all_busy": len(names),
                       "named": {runs_of[p]: names.count(p) for p in sorted(g)},
                       "run_lengths": dict(sorted(Counter(lengths).items())),
                       "mean_run": statistics.mean(lengths) if lengths else None})
    out["shared_stretches"] = shared
    if slow is not None:
        fast = {(int(r["pid"]), r["ts_us"]): r["sm"] for r in util}
        got = [r for r in slow if r.get("kind") == "util"]
        reads = Counter(r["t"] for r in got)
        newest_per_read = defaultdict(int)
        for r in got:
            newest_per_read[r["t"]] = max(newest_per_read[r["t"]], r["ts_us"])
        kept = sum(1 for r in got if (int(r["pid"]), r["ts_us"]) in fast)
        out["once_a_second"] = {
            "reads_with_samples": len(reads), "entries": len(got),
            "entries_per_read": dict(sorted(Counter(reads.values()).items())),
            "entries_that_are_a_tick_of_the_fast_reader": kept,
            "entries_older_than_the_reads_newest": sum(1 for r in got if r["ts_us"] < newest_per_read[r["t"]]),
            "share_of_ticks_kept_pct": 100.0 * len(got) / max(1, out["ticks"])}
    return out


def _busy_spans(util: list[dict], runs_of: dict[int, str]) -> dict[int, tuple[float, float]]:
    """Each process of a run: its first and last busy tick (SM >= 1 %), in seconds."""
    spans: dict[int, tuple[float, float]] = {}
    for r in util:
        pid = int(r["pid"])
        if r["sm"] >= 1 and runs_of.get(pid):
            t = r["ts_us"] / 1e6
            lo, hi = spans.get(pid, (t, t))
            spans[pid] = (min(lo, t), max(hi, t))
    return spans


def _meeting(spans: dict[int, tuple[float, float]], gap_s: float = 2.0) -> list[set[int]]:
    """The processes grouped by busy spans that meet within gap_s of each other, in time order."""
    groups: list[set[int]] = []
    for pid, (lo, hi) in sorted(spans.items(), key=lambda kv: kv[1]):
        for g in groups:
            if any(lo <= spans[q][1] + gap_s and spans[q][0] <= hi + gap_s for q in g):
                g.add(pid)
                break
        else:
            groups.append({pid})
    return groups


def shared_stretches(rows: list[dict]) -> list[dict]:
    """Where processes of two or more runs were busy on the GPU within 2 s of each other: each run's
    per-process samples (driver time, SM %) and the recorder's power samples, from 1 s before the first
    to 1 s after the last."""
    util = [r for r in rows if r.get("kind") == "util"]
    runs_of = {int(r["pid"]): r.get("run_id", "") for r in rows if r.get("kind") == "proc"}
    spans = _busy_spans(util, runs_of)
    out = []
    for g in _meeting(spans):
        if len(g) < 2:
            continue
        lo = min(r["ts_us"] / 1e6 for r in util if int(r["pid"]) in g) - 1.0
        hi = max(spans[p][1] for p in g) + 1.0
        out.append({"runs": {runs_of[p]: sorted([r["ts_us"] / 1e6, float(r["sm"])] for r in util
                                                 if int(r["pid"]) == p and lo <= r["ts_us"] / 1e6 <= hi)
                             for p in sorted(g)},
                    "power_w": [[r["t"], r["w"]] for r in rows if r.get("kind") == "power" and lo <= r["t"] <= hi],
                    "start": lo, "end": hi})
    return out


# ---- output ------------------------------------------------------------------------------------------

def fmt(v, digits=1):
    return "–" if v is None or v != v else f"{v:.{digits}f}"


def markdown(result: dict) -> str:
    lines = ["# Each job's own energy on a shared GPU", ""]
    tables = result.get("pairs")
    goal = {True: "met", False: "missed", None: "–"}
    if tables:
        lines += ["## Identical pairs", "",
                  "As run: what the runs logged (`summary/gpu_energy_attributed_j`, the split of the version that ran). "
                  "Recomputed: today's split from the same store (each job's progress window, samples and samples "
                  "inside the group's overlap; the driver's ticks; the parent's power and counter).", "",
                  "Without progress: the same store split as before the split by work (naive: the driver's ticks; "
                  "MPS, where the driver names only the MPS server: evenly among the jobs present).", "",
                  "| pair | mode | repeats | as run: mean gap % | largest % | goal (mean ≤ 3, each ≤ 5) | intervals holding the mean "
                  "| recomputed: mean gap % | largest % | goal | intervals holding the mean | without progress: mean gap % | largest % |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key, s in tables["summary"].items():
            w, m = key.rsplit(" ", 1)
            x, y = s["as_run"], s["recomputed"]
            lines.append(f"| {w} | {m} | {x['repeats']} | {fmt(x['mean_gap_pct'])} | {fmt(x['max_gap_pct'])} | "
                         f"{goal[x['goal_met']]} | {x['intervals_holding_the_mean']} | {fmt(y['mean_gap_pct'])} | "
                         f"{fmt(y['max_gap_pct'])} | {goal[y['goal_met']]} | {y['intervals_holding_the_mean']} | "
                         f"{fmt(s['without_progress']['mean_gap_pct'])} | {fmt(s['without_progress']['max_gap_pct'])} |")
        lines += ["", "| pair | mode | repeat | GPU | as run: a J [low, high] | b J [low, high] | gap % "
                      "| recomputed: a J [low, high] | b J [low, high] | gap % | without progress gap % | as run: J/sample gap % |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key, rows in tables["identical"].items():
            w, m = key.rsplit(" ", 1)
            for r in rows:
                rc = (f"{fmt(r.get('rc_a_j'), 0)} [{fmt((r.get('rc_a_interval') or [None])[0], 0)}, "
                      f"{fmt((r.get('rc_a_interval') or [None, None])[1], 0)}] | {fmt(r.get('rc_b_j'), 0)} "
                      f"[{fmt((r.get('rc_b_interval') or [None])[0], 0)}, {fmt((r.get('rc_b_interval') or [None, None])[1], 0)}]")
                lines.append(f"| {w} | {m} | {r['repeat']} | {r['device']} | {fmt(r['a_j'], 0)} [{fmt(r['a_interval'][0], 0)}, "
                             f"{fmt(r['a_interval'][1], 0)}] | {fmt(r['b_j'], 0)} [{fmt(r['b_interval'][0], 0)}, "
                             f"{fmt(r['b_interval'][1], 0)}] | {fmt(r['gap_pct'])} | {rc} | {fmt(r.get('rc_gap_pct'))} | "
                             f"{fmt(r.get('ticks_only_gap_pct'))} | {fmt(r.get('per_sample_gap_pct'))} |")
        if tables["unequal"]:
            lines += ["", "## The unequal pair (same kernel, one does twice the work)", "",
                      "Error: the energy ratio against the work ratio. Whole: each job's whole attributed energy (its "
                      "start-up and tear-down, the same for both jobs, included); active: its active part; own phase: "
                      "its energy inside its own active phase (the energy of its work).", "",
                      "| repeat | GPU | work ratio | as run: once J | twice J | whole error % | active error % "
                      "| recomputed: once J | twice J | whole error % | active error % | own phase error % |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for r in tables["unequal"]:
                lines.append(f"| {r['repeat']} | {r['device']} | {fmt(r['work_ratio'], 3)} | {fmt(r['once_j'], 0)} | "
                             f"{fmt(r['twice_j'], 0)} | {fmt(r['error_pct'])} | {fmt(r['active_error_pct'])} | "
                             f"{fmt(r.get('rc_once_j'), 0)} | {fmt(r.get('rc_twice_j'), 0)} | {fmt(r.get('rc_error_pct'))} | "
                             f"{fmt(r.get('rc_active_error_pct'))} | {fmt(r.get('rc_own_phase_error_pct'))} |")
    for name, t in result.get("ticks", {}).items():
        lines += ["", f"## The driver's ticks: {name}", "",
                  f"{t['ticks']} ticks, one every {fmt(t['tick_ms'], 0)} ms; at most {t['most_processes_in_one_tick']} "
                  f"process(es) named in one tick; {t['missed_ticks']} gaps longer than 1.5 ticks.", ""]
        if t["shared_stretches"]:
            lines += ["| runs sharing the GPU | busy ticks while all busy | named | runs of one name (length: count) | mean run |",
                      "|---|---|---|---|---|"]
            for s in t["shared_stretches"]:
                lines.append(f"| {', '.join(r[:8] for r in s['runs'])} | {s['busy_ticks_while_all_busy']} | "
                             f"{' / '.join(str(v) for v in s['named'].values())} | "
                             f"{', '.join(f'{k}: {v}' for k, v in s['run_lengths'].items())} | {fmt(s['mean_run'], 2)} |")
        if "once_a_second" in t:
            o = t["once_a_second"]
            lines += ["", f"A reader asking once a second: {o['reads_with_samples']} reads with samples, {o['entries']} "
                          f"entries ({fmt(o['share_of_ticks_kept_pct'])} % of the ticks), entries per read "
                          f"{o['entries_per_read']}, {o['entries_that_are_a_tick_of_the_fast_reader']} of them a tick the "
                          f"50-ms reader saw, {o['entries_older_than_the_reads_newest']} older than the read's newest."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default=None, help="the MLflow store the sweep filled")
    ap.add_argument("--experiment", default="attribution-pairs")
    ap.add_argument("--raw", nargs="*", default=[], help="record_proc_samples files (.jsonl or .jsonl.gz)")
    ap.add_argument("--once-a-second", default=None, help="a once-a-second recorder's file of the first --raw GPU")
    ap.add_argument("--out", default=None)
    ap.add_argument("--export-ticks", default=None, help="write the shared stretches of the first --raw file here")
    ap.add_argument("--note", default="", help="with --export-ticks/--export-groups: where the samples came from")
    ap.add_argument("--export-groups", default=None,
                    help="with --store: write the groups named by --group (parent run id prefixes) here, the tests' fixture")
    ap.add_argument("--group", nargs="*", default=[], help="parent run id prefixes for --export-groups")
    args = ap.parse_args(argv)
    if args.export_groups:
        if not args.store:
            ap.error("--export-groups needs --store")
        chosen = [g for g in store_groups(args.store, args.experiment)
                  if any(g["run_id"].startswith(x) for x in args.group)]
        with open(args.export_groups, "w") as fh:
            json.dump({"meta": {"note": args.note}, "groups": chosen}, fh, separators=(",", ":"))
        if not args.out:
            return 0
    if args.export_ticks:
        with open(args.export_ticks, "w") as fh:
            json.dump({"meta": {"note": args.note}, "stretches": shared_stretches(read_rows(args.raw[0]))}, fh)
        if not args.out:
            return 0
    if not args.out:
        ap.error("--out is required")
    os.makedirs(args.out, exist_ok=True)
    result: dict = {}
    if args.store:
        result["pairs"] = pair_tables(store_groups(args.store, args.experiment))
    slow = read_rows(args.once_a_second) if args.once_a_second and os.path.exists(args.once_a_second) else None
    result["ticks"] = {}
    for i, path in enumerate(args.raw):
        if os.path.exists(path):
            result["ticks"][os.path.basename(path)] = tick_stats(read_rows(path), slow if i == 0 else None)
    write_tables(args.out, "attribution_pairs", result, markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
