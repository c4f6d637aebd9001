"""The energy split on its own, fed with the H200 recording: power and the energy counter as the
driver timestamped them, and the matmul process's own per-process SM samples (idle 5 s, bf16 matmul
10 s, idle)."""
from __future__ import annotations

import json
import os

import pytest

from radt_ext.collocation.attribution import WorkloadActivity, attribute, binned, idle_power, segments

TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "listeners", "traces", "h200_matmul.json")
POWER, ENERGY = 186, 83  # NVML_FI_DEV_POWER_INSTANT (mW), NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ)


@pytest.fixture(scope="module")
def recorded():
    with open(TRACE) as fh:
        trace = json.load(fh)
    power, energy = [], []
    for answer in trace["calls"]["nvmlDeviceGetFieldValues"]['[{"ref":"dev0"},[186,185,83,82]]']:
        for field in answer:
            f = field["fields"]
            if f["nvmlReturn"] != 0:
                continue
            t = f["timestamp"] / 1e6
            if f["fieldId"] == POWER:
                power.append((t, f["value"]["fields"]["uiVal"] / 1000.0))
            elif f["fieldId"] == ENERGY:
                energy.append((t, f["value"]["fields"]["ullVal"] / 1000.0))
    pid = trace["meta"]["load"]["pid"]
    sm = [(s["fields"]["timeStamp"] / 1e6, float(s["fields"]["smUtil"]))
          for answer in trace["calls"]["nvmlDeviceGetProcessUtilization"]['[{"ref":"dev0"},"*"]']
          if isinstance(answer, list) for s in answer if s["fields"]["pid"] == pid]
    return {"power": power, "energy": energy, "sm": sm, "start": power[0][0], "end": power[-1][0]}


def counter_j(energy):
    return energy[-1][1] - energy[0][1]


def test_the_parts_add_up_to_the_counter(recorded):
    r = recorded
    split = attribute(r["power"], [WorkloadActivity("matmul", r["start"], None, r["sm"]),
                                   WorkloadActivity("other", r["start"], None, [])], r["energy"])
    parts = sum(s.energy_j for s in split.shares.values()) + split.unattributed_j
    assert parts == pytest.approx(counter_j(r["energy"]), rel=0.01)
    assert split.check() < 0.01
    # the matmul did the work: nearly all of the active energy is its; idle power is shared evenly
    mm, other = split.shares["matmul"], split.shares["other"]
    assert mm.active_j > 20 * other.active_j
    assert mm.idle_j == pytest.approx(other.idle_j)
    assert split.idle_power_w < min(w for _, w in r["power"]) * 1.2  # the floor, not the mean


def test_an_idle_stretch_nobody_reports_is_split_evenly(recorded):
    r = recorded
    load = next(t for t, v in r["sm"][1:] if v > 0)  # the first sample covers the process's start-up
    lo, hi = r["sm"][1][0], load - 1.0  # idle seconds before the load: every sample says 0 %
    quiet = [(t, v) for t, v in r["sm"] if lo <= t <= hi]
    assert quiet and all(v == 0 for _, v in quiet)
    split = attribute([p for p in r["power"] if lo <= p[0] <= hi],
                      [WorkloadActivity("a", lo, None, quiet), WorkloadActivity("b", lo, None, [])],
                      [e for e in r["energy"] if lo <= e[0] <= hi])
    assert split.even_split_s == pytest.approx(hi - lo, abs=0.3)
    assert split.shares["a"].energy_j == pytest.approx(split.shares["b"].energy_j)
    assert split.check() < 0.01


def test_a_workload_that_ends_early_gets_nothing_after(recorded):
    r = recorded
    mid = (r["start"] + r["end"]) / 2
    split = attribute(r["power"], [WorkloadActivity("long", r["start"], None, r["sm"]),
                                   WorkloadActivity("short", r["start"], mid, r["sm"])], r["energy"])
    short = split.shares["short"]
    assert all(w == 0.0 for t, w in short.timeline if t > mid + 0.2)
    assert any(w > 0.0 for t, w in short.timeline if t < mid)
    assert split.shares["long"].energy_j > short.energy_j
    assert split.check() < 0.01


def test_missing_power_samples_still_add_up_to_the_counter(recorded):
    r = recorded
    n = len(r["power"])
    holey = r["power"][: n // 3] + r["power"][n // 2:]  # a stretch of power samples lost
    irregular = holey[::3] + holey[1::7]  # and an uneven rate: any power timeline will do
    split = attribute(irregular, [WorkloadActivity("matmul", r["start"], None, r["sm"])], r["energy"])
    assert sum(s.energy_j for s in split.shares.values()) + split.unattributed_j == pytest.approx(
        counter_j(r["energy"]), rel=0.01)


def test_without_a_counter_the_power_integral_is_the_total(recorded):
    r = recorded
    split = attribute(r["power"], [WorkloadActivity("matmul", r["start"], None, r["sm"])])
    assert split.total_j == pytest.approx(split.power_integral_j)
    # the recorded counter and the integral of instantaneous power agree to a few per cent
    assert split.total_j == pytest.approx(counter_j(r["energy"]), rel=0.05)


def test_identical_activity_gets_identical_shares(recorded):
    r = recorded
    split = attribute(r["power"], [WorkloadActivity("a", r["start"], None, r["sm"]),
                                   WorkloadActivity("b", r["start"], None, list(r["sm"]))], r["energy"])
    assert split.shares["a"].energy_j == pytest.approx(split.shares["b"].energy_j, rel=1e-9)


def test_before_the_first_workload_starts_the_energy_is_the_groups(recorded):
    r = recorded
    late = r["start"] + 3.0
    split = attribute(r["power"], [WorkloadActivity("matmul", late, None, r["sm"])], r["energy"])
    before = segments([p for p in r["power"] if p[0] <= late], [e for e in r["energy"] if e[0] <= late])
    assert split.unattributed_j == pytest.approx(sum(before[1]), rel=0.05)
    assert split.check() < 0.01


def test_mig_scale_weighs_instances_by_their_size(recorded):
    r = recorded
    busy = [t for t, v in r["sm"][1:] if v > 0]
    lo, hi = busy[0] + 0.5, busy[-1] - 0.5  # the load: every interval has activity
    inside = lambda points: [p for p in points if lo <= p[0] <= hi]  # noqa: E731
    split = attribute(inside(r["power"]), [WorkloadActivity("big", lo, None, r["sm"], scale=4 / 7),
                                           WorkloadActivity("small", lo, None, list(r["sm"]), scale=1 / 7)],
                      inside(r["energy"]))
    assert split.even_split_s == 0.0
    assert split.shares["big"].active_j == pytest.approx(4 * split.shares["small"].active_j, rel=1e-6)


def test_idle_power_is_the_low_quantile_and_a_given_one_wins(recorded):
    r = recorded
    grid, seg, _ = segments(r["power"], r["energy"])
    floor = idle_power(grid, seg)
    assert min(w for _, w in r["power"]) * 0.8 < floor < max(w for _, w in r["power"]) / 2
    split = attribute(r["power"], [WorkloadActivity("matmul", r["start"], None, r["sm"])], r["energy"],
                      idle_power_w=0.0)
    assert split.idle_j == 0.0 and split.shares["matmul"].active_j == pytest.approx(split.total_j)


def test_binned_timeline_keeps_the_energy(recorded):
    r = recorded
    split = attribute(r["power"], [WorkloadActivity("matmul", r["start"], None, r["sm"])], r["energy"])
    fine = split.shares["matmul"].timeline
    coarse = binned(fine, r["start"], 1.0)
    assert len(coarse) < len(fine) / 5

    def energy(points):
        prev, total = r["start"], 0.0
        for t, w in points:
            total += w * (t - prev)
            prev = t
        return total

    assert energy(coarse) == pytest.approx(energy(fine), rel=1e-6)


def test_no_samples_at_all_is_an_empty_split():
    split = attribute([], [WorkloadActivity("a", 0.0, None, [])])
    assert split.total_j == 0.0 and split.shares["a"].energy_j == 0.0 and split.check() == 0.0


def test_under_mig_the_instances_gpm_is_the_activity(recorded):
    """Children on MIG instances have no per-process SM % (NVML does not sample it there): their
    instance's GPM sm_active, weighted by the profile's slices, is what splits the GPU's energy."""
    from radt_ext.collocation.energy_split import Child, split

    r = recorded
    busy = [t for t, v in r["sm"][1:] if v > 0]
    lo, hi = busy[0] + 0.5, busy[-1] - 0.5
    inside = lambda points: [p for p in points if lo <= p[0] <= hi]  # noqa: E731
    parent = {"gpu0_power_w": inside(r["power"]), "gpu0_energy_j": inside(r["energy"])}
    kids = [Child("big", "0", lo, None, {"gpu0_mig1_sm_active_pct": r["sm"]}, mig="4g.71gb"),
            Child("small", "0", lo, None, {"gpu0_mig2_sm_active_pct": list(r["sm"])}, mig="1g.18gb"),
            Child("elsewhere", "cpu", lo, None, {})]
    parts = split(["0", "cpu"], parent, kids)
    assert list(parts) == [0]
    shares = parts[0].shares
    assert set(shares) == {"big", "small"}
    assert shares["big"].active_j == pytest.approx(4 * shares["small"].active_j, rel=1e-6)


# ---- the H100 groups (what benchmarks/collocation/collocation_energy.sh logged; see the fixture's meta) ----

H100 = os.path.join(os.path.dirname(__file__), "fixtures", "h100_collocation_series.json")


@pytest.fixture(scope="module")
def h100():
    with open(H100) as fh:
        return json.load(fh)["groups"]


def _h100_split(group, one_per_tick=True, window=None):
    power, energy = [tuple(p) for p in group["power_w"]], [tuple(e) for e in group["energy_j"]]
    if window:
        power = [p for p in power if window[0] <= p[0] <= window[1]]
        energy = [e for e in energy if window[0] <= e[0] <= window[1]]
    work = [WorkloadActivity(w["name"], w["start"], w["end"], [tuple(p) for p in w["sm_pct"]])
            for w in group["workloads"]]
    return attribute(power, work, energy, one_per_tick=one_per_tick), work


def test_h100_identical_trainings_split_evenly_while_both_run(h100):
    group = h100["same-naive"]
    _, work = _h100_split(group)
    window = (max(w.start for w in work), min(w.end for w in work))
    split, _ = _h100_split(group, window=window)
    a, b = (s.energy_j for s in split.shares.values())
    assert abs(a - b) / ((a + b) / 2) < 0.02
    whole, _ = _h100_split(group)
    assert whole.check() < 0.01
    # the whole runs differ: the one that ended later had the GPU to itself and pays for it
    later = max(work, key=lambda w: w.end).name
    assert whole.shares[later].energy_j == max(s.energy_j for s in whole.shares.values())


def test_h100_a_workload_nvml_stops_naming_gets_no_active_energy(h100):
    """NVML names one process per tick: once r18a's samples stop while r18b's go on, the active
    energy is r18b's (holding r18a's last busy sample would hand it half of r18b's)."""
    group = h100["same-naive"]
    split, work = _h100_split(group)
    held, _ = _h100_split(group, one_per_tick=False)
    first = min(work, key=lambda w: w.end)
    last_sample = first.activity[-1][0]
    idle_half = split.idle_power_w / 2
    after = [w for t, w in split.shares[first.name].timeline if last_sample + 0.5 < t < first.end]
    assert after and all(w <= idle_half + 1e-6 for w in after)  # its idle share at most
    after_held = [w for t, w in held.shares[first.name].timeline if last_sample + 0.5 < t < first.end]
    assert max(after_held) > idle_half + 10  # the hold rule charged it for the other's work


def test_h100_mps_clients_have_no_samples_so_the_split_is_even(h100):
    group = h100["same-mps"]
    assert all(not w["sm_pct"] for w in group["workloads"])  # NVML named only the MPS server
    split, work = _h100_split(group)
    both = min(w.end for w in work) - max(w.start for w in work)
    assert split.even_split_s >= both
    assert split.check() < 0.01
