"""Whether the host or the GPU sets a network's pace, and how far a host-bound step may move on another machine
with the same GPU: the one rule `ops profile`, `ops best-gpu` and the predictor's interval all apply.

A step is host-bound when the host's time to issue it on an idle GPU (a profile's `host_ms`, its network phases
together) is at least `host_bound_share` of the step's measured time: the GPU waits on the host, a faster GPU does
not help, and the step moves with the machine's CPU. Machines with the same GPU differ in their hosts, and a
host-bound step with them: on another such machine it lies within its time divided or multiplied by
1 + `machine_spread`. Both figures are data, with the measurements they come from, in `host_spread.json`.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

SPREAD_FILE = Path(__file__).with_name("host_spread.json")


@lru_cache(maxsize=1)
def figures() -> dict:
    """The rule's data: `host_bound_share`, `machine_spread` and the measurements behind them."""
    return json.loads(SPREAD_FILE.read_text())


@dataclass(frozen=True)
class Pace:
    """What sets a profile's pace: `share` is its issue time over its step (NaN without a host record)."""
    share: float
    issue_ms: float = math.nan
    step_ms: float = math.nan

    @property
    def known(self) -> bool:
        return math.isfinite(self.share)

    @property
    def host_bound(self) -> bool:
        return self.known and self.share >= figures()["host_bound_share"]

    @property
    def machine_spread(self) -> float:
        """How far the step may move on another machine with this GPU (0 where the GPU sets the pace)."""
        return float(figures()["machine_spread"]) if self.host_bound else 0.0

    def sentence(self) -> str:
        """One clause for the user: who sets the pace, and for a host-bound step what to expect elsewhere."""
        if not self.known:
            return "the profile has no host record: whether the host sets its pace is not known"
        issue = f"the host issues a step in {self.issue_ms:.3g} ms, {self.share:.0%} of it"
        if not self.host_bound:
            return f"{issue}: the GPU sets the pace"
        return f"{issue}: the host sets the pace: a faster GPU will not help; {expectation()}"


def expectation() -> str:
    """What a host-bound step may do on another machine with the same GPU, in percent both ways."""
    f = 1 + float(figures()["machine_spread"])
    return f"expect {1 / f - 1:+.0%} to {f - 1:+.0%} on another machine with this GPU"


def of(rows, device: str = "") -> Pace:
    """The pace of one profile's rows (a profile's table or its dataset rows: network rows with `time_ms` and
    `host_ms`). A profile made on the CPU (`device` "cpu") has no GPU to wait: its pace is not told."""
    if device.lower() == "cpu" or "host_ms" not in rows.columns:
        return Pace(math.nan)
    net = rows[rows.op == "network"]
    issue, step = net.host_ms.astype(float), net.time_ms.astype(float)
    if net.empty or issue.isna().any() or not step.sum() > 0:
        return Pace(math.nan)
    return Pace(float(issue.sum() / step.sum()), float(issue.sum()), float(step.sum()))
