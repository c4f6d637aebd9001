"""Each workload's share of a time-sliced GPU, fed with NVML's raw per-process samples recorded on an
H100 (every tick, by listeners.record_proc_samples beside three naive groups; see the fixture's meta):
two identical ResNet-18 trainings, two identical bf16 matmul loads, and ResNet-50 beside ResNet-18."""
from __future__ import annotations

import json
import os

import pytest

from radt_ext.collocation.attribution import WorkloadActivity, attribute
from radt_ext.collocation.time_slicing import TimeSlices, dispersion, wilson

TICKS = os.path.join(os.path.dirname(__file__), "fixtures", "h100_proc_ticks.json")
SAME_R18, SAME_MATMUL, MIXED = 0, 1, 2  # the stretches, in the order they ran


@pytest.fixture(scope="module")
def stretches():
    with open(TICKS) as fh:
        return json.load(fh)["stretches"]


def _work(stretch, names=("a", "b"), windows=None, thin=None):
    runs = list(stretch["runs"].values())
    out = []
    for name, ticks in zip(names, runs):
        ticks = [tuple(t) for t in ticks]
        if thin:
            ticks = thin(ticks)
        out.append(WorkloadActivity(name, stretch["start"], stretch["end"], ticks,
                                    window=(windows or {}).get(name)))
    return out


def _split(stretch, work):
    return attribute([tuple(p) for p in stretch["power_w"]], work, one_per_tick=True)


def _gap(split):
    a, b = (s.energy_j for s in split.shares.values())
    return abs(a - b) / ((a + b) / 2)


def once_a_second(phase):
    """What a reader asking once a second keeps: each process's newest tick since its last read."""
    def thin(ticks):
        kept, read, i = [], ticks[0][0] + phase, 0
        while i < len(ticks):
            newest = None
            while i < len(ticks) and ticks[i][0] <= read:
                newest, i = ticks[i], i + 1
            if newest:
                kept.append(newest)
            read += 1.0
        return kept
    return thin


def test_one_process_is_named_per_tick(stretches):
    """The driver's per-process samples: one process a tick, in runs, never two at one time."""
    for s in stretches:
        stamps = [t for ticks in s["runs"].values() for t, _ in ticks]
        assert len(stamps) == len(set(stamps))


@pytest.mark.parametrize("which", [SAME_R18, SAME_MATMUL])
def test_identical_jobs_get_equal_energy_from_every_tick(stretches, which):
    split = _split(stretches[which], _work(stretches[which]))
    assert _gap(split) < 0.03
    assert split.check() < 0.01
    # the names alone are far from equal (the matmuls: 44 / 51 busy ticks): the counts agree with equal
    # shares within their noise, so they do not move the split
    slices = TimeSlices([(w.name, w.start, w.end, w.activity) for w in _work(stretches[which])])
    (regime,) = slices.regimes.values()
    assert regime.counts["a"] != regime.counts["b"]
    assert regime.z < 3 and regime.weights == {"a": 0.5, "b": 0.5}


def test_each_share_has_an_interval_that_holds_the_equal_split(stretches):
    split = _split(stretches[SAME_MATMUL], _work(stretches[SAME_MATMUL]))
    mean = sum(s.energy_j for s in split.shares.values()) / 2
    for s in split.shares.values():
        assert s.low_j < mean < s.high_j
        assert s.low_j < s.energy_j < s.high_j
        assert (s.high_j - s.low_j) < s.energy_j  # an interval, not "anything"


@pytest.mark.parametrize("phase", [0.0, 0.25, 0.5, 0.75])
def test_read_once_a_second_the_matmul_pair_still_splits_evenly(stretches, phase):
    split = _split(stretches[SAME_MATMUL], _work(stretches[SAME_MATMUL], thin=once_a_second(phase)))
    assert _gap(split) < 0.05


def _cut(stretch, at):
    """The matmul pair as if `a` had half the work: its process ends at `at`, and every busy tick after it
    names `b` (the only process then left with work: what the driver does with one busy process)."""
    (ra, ta), (rb, tb) = stretch["runs"].items()
    a = [t for t in ta if t[0] <= at]
    b = sorted([t for t in tb if t[0] <= at] + [t for t in ta + tb if t[0] > at])
    return {**stretch, "runs": {ra: a, rb: b}}


def test_the_split_follows_the_work_when_one_job_does_twice_as_much(stretches):
    s = stretches[SAME_MATMUL]
    busy = sorted(t for ticks in s["runs"].values() for t, v in ticks if v >= 1)
    first, last = busy[0], busy[-1]
    at = first + (last - first) * 2 / 3  # a: 2/3 of the time at half the GPU; b: that and 1/3 alone
    cut = _cut(s, at)
    work = _work(cut)
    work[0].end = at + 0.3
    windows = {"a": (first - 0.2, at), "b": (first - 0.2, last)}
    with_windows = _split(cut, _work(cut, windows=windows))
    power = [tuple(p) for p in s["power_w"]]
    idle = with_windows.idle_power_w

    def active(lo, hi):
        pts = [(t, w) for t, w in power if lo <= t <= hi]
        return sum((t1 - t0) * ((w0 + w1) / 2 - idle) for (t0, w0), (t1, w1) in zip(pts, pts[1:]))

    expected = (active(first - 0.2, at) / 2 + active(at, last)) / (active(first - 0.2, at) / 2)
    got = with_windows.shares["b"].active_j / with_windows.shares["a"].active_j
    assert got == pytest.approx(expected, rel=0.05)
    ticks_only = attribute(power, work, one_per_tick=True)
    for name, share in ticks_only.shares.items():
        assert share.low_j <= with_windows.shares[name].energy_j <= share.high_j


def test_counts_far_from_equal_move_the_split_towards_them(stretches):
    """Two thirds of a's busy ticks named b instead (as when a holds the GPU a third as long): the
    counts leave equal shares by far more than their noise, and the weights follow them."""
    s = stretches[SAME_MATMUL]
    (ra, ta), (rb, tb) = s["runs"].items()
    busy_a = [t for t in ta if t[1] >= 1]
    moved = {tuple(t) for i, t in enumerate(busy_a) if i % 3}
    runs = {ra: [t for t in ta if tuple(t) not in moved], rb: sorted(tb + [list(t) for t in moved])}
    work = _work({**s, "runs": runs})
    slices = TimeSlices([(w.name, w.start, w.end, w.activity) for w in work])
    (regime,) = slices.regimes.values()
    counted = regime.counts["a"] / sum(regime.counts.values())
    assert regime.z > 3
    assert counted < regime.weights["a"] < 0.5
    assert regime.low["a"] <= counted <= regime.high["a"]


def test_a_job_the_ticks_stop_naming_is_not_busy_after(stretches):
    """ResNet-18 beside ResNet-50: once r18's busy ticks end, the active energy is r50's."""
    s = stretches[MIXED]
    split = _split(s, _work(s, names=("r18", "r50")))
    ends = {n: max(t for t, v in ticks if v >= 1) for n, ticks in zip(("r18", "r50"), s["runs"].values())}
    first = min(ends, key=ends.get)
    after = [w for t, w in split.shares[first].timeline if ends[first] + 0.5 < t < ends[max(ends, key=ends.get)]]
    assert after and max(after) <= split.idle_power_w / 2 + 1e-6


def test_wilson_and_dispersion():
    lo, hi = wilson(25, 50)
    assert lo < 0.5 < hi and hi - lo == pytest.approx(0.27, abs=0.02)
    assert wilson(0, 0) == (0.0, 1.0)
    alternating = ["a", "b"] * 20
    runs_of_four = (["a"] * 4 + ["b"] * 4) * 5
    assert dispersion(alternating) == 1.0
    assert dispersion(runs_of_four) > 2.0  # names in runs say less than as many independent ones
