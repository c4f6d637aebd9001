"""Each pair of a group's workloads measured side by side: over the longest span in which both were in
their active phases (the later one's first guard.SETTLE_S left out) and neither was paused, each one's
rate of work against its rate alone, i.e. its slowdown beside the other. The parent run keeps them as the
tag `collocation.pairs` (JSON: [{"a", "b", "slowdowns": [a's, b's], "span_s"}]); the packing planner reads
them as measured pairs (packing/profiles.py).

Likewise each job's slowdown in its active phase while another job started up beside it (from that one's
process start to its active phase's start, no third job alive, its first guard.SETTLE_S left out): the
tag `collocation.startup_pairs` (JSON: [{"active", "starting", "slowdown", "span_s"}])."""
from __future__ import annotations

import json

from radt_ext.collocation.guard import SETTLE_S
from radt_ext.figures import active

TAG = "collocation.pairs"
STARTUP_TAG = "collocation.startup_pairs"
MIN_S = 2.0  # a shorter span side by side measures nothing


def _free(lo: float, hi: float, cuts: list[tuple[float, float]]) -> tuple[float, float]:
    """The longest part of [lo, hi] outside every span in `cuts`."""
    parts = [(lo, hi)]
    for a, b in cuts:
        parts = [p for x, y in parts for p in ((x, min(y, a)), (max(x, b), y)) if p[1] > p[0]]
    return max(parts, key=lambda p: p[1] - p[0], default=(lo, lo))


def measure(items, alone_rates: dict[str, tuple[float, str]], paused: dict[str, list[tuple[float, float]]]) -> list[dict]:
    """items: (name, progress marks, active window) of each workload; alone_rates: name -> (rate, unit)."""
    out = []
    for n, (na, ma, wa) in enumerate(items):
        for nb, mb, wb in items[n + 1:]:
            if na not in alone_rates or nb not in alone_rates or ma is None or mb is None:
                continue
            lo, hi = _free(max(wa.start, wb.start) + SETTLE_S, min(wa.end, wb.end),
                           paused.get(na, []) + paused.get(nb, []))
            if hi - lo < MIN_S:
                continue
            slow = []
            for marks, name in ((ma, na), (mb, nb)):
                rate, unit = alone_rates[name]
                done = active.counts(marks, lo, hi).get(unit, 0.0)
                slow.append(round(rate * (hi - lo) / done, 4) if done > 0 else None)
            if None not in slow:
                out.append({"a": na, "b": nb, "slowdowns": slow, "span_s": round(hi - lo, 2)})
    return out


def measure_startups(items, alone_rates: dict[str, tuple[float, str]],
                     paused: dict[str, list[tuple[float, float]]]) -> list[dict]:
    """items: (name, progress marks, active window, process start) of each workload."""
    out = []
    for na, ma, wa, _ in items:
        if na not in alone_rates or ma is None:
            continue
        for nb, _, wb, sb in items:
            if nb == na or sb is None:
                continue
            others = [(s, w.end) for n, _, w, s in items if n not in (na, nb) and s is not None]
            lo, hi = _free(max(wa.start + SETTLE_S, sb), min(wa.end, wb.start), paused.get(na, []) + others)
            if hi - lo < MIN_S:
                continue
            rate, unit = alone_rates[na]
            done = active.counts(ma, lo, hi).get(unit, 0.0)
            if done > 0:
                out.append({"active": na, "starting": nb, "slowdown": round(rate * (hi - lo) / done, 4),
                            "span_s": round(hi - lo, 2)})
    return out


def read_startups(tag: str | None) -> list[dict]:
    try:
        found = json.loads(tag) if tag else []
    except ValueError:
        return []
    return [b for b in found if isinstance(b, dict) and {"active", "starting", "slowdown"} <= set(b)]


def text(pairs: list[dict]) -> str:
    return json.dumps(pairs, separators=(",", ":"))


def read(tag: str | None) -> list[dict]:
    try:
        pairs = json.loads(tag) if tag else []
    except ValueError:
        return []
    return [p for p in pairs if isinstance(p, dict) and len(p.get("slowdowns", ())) == 2]
