"""The energy split at the end of a real group: real CPU stand-in children, a real SQLite store, NVML
answered by the H200 recording (from the start of its matmul load). The recorded matmul process is
answered as one stand-in's own pid, so that child's gpu_procs reads the recorded SM activity."""
from __future__ import annotations

import json
import os

import psutil
import pytest
from mlflow.tracking import MlflowClient

from listeners import nvml_backend
from listeners.replay import Replay
from radt_ext.collocation import Group, Workload, run_group
from radt_ext.report import ARTIFACT
from tests.radt_ext.collocation.support import cpu_command
from tests.radt_ext.helpers import full_rate

TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "listeners", "traces", "h200_matmul.json")
BUSY_BATCH = 8  # the stand-in that is answered as the recorded matmul process


class OwnedByStandIn:
    """The recording from its load on, with the recorded workload's pid answered as the pid of this
    test's child that runs with `--batch-size 8`."""

    def __init__(self):
        with open(TRACE) as fh:
            trace = json.load(fh)
        self.recorded_pid = trace["meta"]["load"]["pid"]
        # skip the idle seconds but the last half: 10 Hz calls by 44, 5 Hz GPM by 22. The group starts on
        # the idle GPU just before the load (as a workload's start-up comes before its GPU work), so the
        # GPU's floor in the group is its idle power; a rarely read call (the energy counter, process
        # utilization) answers from the position its every-tick sibling has reached
        for calls in trace["calls"].values():
            for key, answers in calls.items():
                if len(answers) >= 150:
                    calls[key] = answers[44:]
                elif len(answers) >= 40:
                    calls[key] = answers[22:]
        self.replay = Replay(trace)
        self.busy_pid = -1

    def __getattr__(self, name):
        return getattr(self.replay, name)

    def _busy_pid(self) -> int:
        # once found it stays that child's pid, also after it exits (the listener's closing read)
        if self.busy_pid > 0:
            return self.busy_pid
        for p in psutil.Process().children(recursive=True):
            try:
                if f"--batch-size {BUSY_BATCH} " in " ".join(p.cmdline()) + " ":
                    self.busy_pid = p.pid
                    return p.pid
            except psutil.Error:
                continue
        return -1

    def _owned(self, answer):
        pid = self._busy_pid()
        for entry in answer:
            if int(entry.pid) == self.recorded_pid:
                entry.pid = pid
        return answer

    def nvmlDeviceGetProcessUtilization(self, handle, since):
        return self._owned(self.replay.nvmlDeviceGetProcessUtilization(handle, since))

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        return self._owned(self.replay.nvmlDeviceGetComputeRunningProcesses(handle))


@pytest.fixture
def recorded_gpu(monkeypatch):
    monkeypatch.setenv(nvml_backend.REPLAY_ENV, TRACE)  # listeners see NVML as available
    nvml_backend.reset()
    with nvml_backend.use(OwnedByStandIn()) as backend:
        yield backend
    nvml_backend.reset()


def _runs(uri, result):
    client = MlflowClient(uri)
    return client, client.get_run(result.parent_run_id), {c.name: client.get_run(c.run_id) for c in result.children}


def _idle_seconds(mine: tuple[float, float], other: tuple[float, float]) -> float:
    """Seconds of idle power a workload is charged: alone in full, beside the other one half."""
    shared = max(0.0, min(mine[1], other[1]) - max(mine[0], other[0]))
    return (mine[1] - mine[0] - shared) + shared / 2


def test_children_get_their_share_and_the_parts_add_up(tracking_uri, recorded_gpu):
    g = Group(mode="naive", experiment_name="split", interval=0.1, listeners="nvml", child_listeners="gpu_procs",
              workloads=[Workload("busy", cpu_command(2.0, BUSY_BATCH)), Workload("quiet", cpu_command(2.0, 32))])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FINISHED"
    client, parent, kids = _runs(tracking_uri, result)
    assert "radt_ext.attribution_error" not in parent.data.tags
    p = parent.data.metrics
    busy, quiet = kids["busy"].data.metrics, kids["quiet"].data.metrics
    parts = busy["summary/gpu_energy_attributed_j"] + quiet["summary/gpu_energy_attributed_j"]
    assert parts + p["summary/gpu_energy_unattributed_j"] == pytest.approx(p["summary/e2e_gpu_total_energy_j"], rel=0.01)
    # the child whose process the GPU saw busy gets the active energy; idle power is shared
    assert busy["summary/gpu_energy_active_attributed_j"] > 3 * quiet["summary/gpu_energy_active_attributed_j"]
    # idle power is shared while both run and whole while one runs alone (a loaded machine starts one later)
    spans = {n: (float(k.data.tags["collocation.started_s"]), float(k.data.tags["collocation.ended_s"]))
             for n, k in kids.items()}
    expected = _idle_seconds(spans["busy"], spans["quiet"]) / _idle_seconds(spans["quiet"], spans["busy"])
    assert busy["summary/gpu_energy_idle_attributed_j"] / quiet["summary/gpu_energy_idle_attributed_j"] == (
        pytest.approx(expected, rel=0.2))
    for m in (busy, quiet):
        assert m["summary/energy_per_sample_attributed_j"] == pytest.approx(
            m["summary/gpu_energy_attributed_j"] / m["summary/e2e_samples"])
        # the interval the samples allow holds the share (the start-up, split evenly for want of samples,
        # makes it wide); the parent has each workload's too
        assert m["summary/gpu_energy_attributed_low_j"] <= m["summary/gpu_energy_attributed_j"] <= (
            m["summary/gpu_energy_attributed_high_j"])
        assert m["summary/gpu_energy_attributed_low_j"] < m["summary/gpu_energy_attributed_high_j"]
    assert p["summary/busy_gpu_energy_attributed_low_j"] == pytest.approx(busy["summary/gpu_energy_attributed_low_j"])
    for kid in kids.values():  # a naive group: each child's gpu_procs keeps every driver tick
        assert "gpu_procs:0.1" in kid.data.tags["radt_ext.listeners"]
        first, last = (float(x) for x in kid.data.tags["collocation.progress_window"].split(","))
        assert float(kid.data.tags["collocation.started_s"]) < first < last <= float(kid.data.tags["collocation.ended_s"])
    assert p["summary/busy_gpu_energy_attributed_j"] == pytest.approx(busy["summary/gpu_energy_attributed_j"])
    for c in result.children:  # the timeline at its full rate in the child's artifact, its shape in the store
        history = full_rate(tracking_uri, c.run_id, "system/gpu0_power_attributed_w")
        stored = client.get_metric_history(c.run_id, "system/gpu0_power_attributed_w")
        assert len(history) > 3 and all(h.value >= 0 for h in history)
        assert 0 < len(stored) <= len(history) and max(h.value for h in stored) == max(h.value for h in history)
    timeline = [h.value for h in full_rate(tracking_uri, result.children[0].run_id, "system/gpu0_power_attributed_w")]
    assert max(timeline) > p["summary/gpu_idle_power_w"]  # the busy child draws more than an idle share
    with open(client.download_artifacts(result.parent_run_id, ARTIFACT), encoding="utf-8") as fh:
        page = fh.read()
    assert "GPU energy by workload" in page and "interval the samples allow" in page  # the split and its intervals
    # drawn at the group's end from the timeline files its runs logged, not read back: the same page the store gives
    from radt_ext.report.build import run_html

    assert page == run_html(client, result.parent_run_id)


def test_without_activity_the_split_follows_progress_and_still_adds_up(tracking_uri, recorded_gpu):
    """No gpu_procs on the children (nothing reports activity) and one workload ends early: their own
    progress says who worked when; start-up and tear-down are the group's overhead, shared by each one's
    time outside its work."""
    g = Group(mode="naive", experiment_name="split", interval=0.1, listeners="nvml", child_listeners="top",
              workloads=[Workload("long", cpu_command(2.0, 16)), Workload("short", cpu_command(0.5, 16))])
    result = run_group(g, echo=lambda m: None)
    client, parent, kids = _runs(tracking_uri, result)
    p = parent.data.metrics
    long, short = kids["long"].data.metrics, kids["short"].data.metrics
    parts = long["summary/gpu_energy_attributed_j"] + short["summary/gpu_energy_attributed_j"]
    assert parts + p["summary/gpu_energy_unattributed_j"] == pytest.approx(p["summary/e2e_gpu_total_energy_j"], rel=0.01)
    assert p["summary/attribution_work_split_s"] > 1.5  # the long one's 2 s of work
    assert p["summary/attribution_overhead_pooled_s"] > 0  # start-up and tear-down
    assert long["summary/gpu_energy_attributed_j"] > short["summary/gpu_energy_attributed_j"]
    long_work = [float(x) for x in kids["long"].data.tags["collocation.progress_window"].split(",")]
    ended = float(kids["short"].data.tags["collocation.ended_s"])
    timeline = full_rate(tracking_uri, kids["short"].info.run_id, "system/gpu0_power_attributed_w")
    # each point covers the time since the one before it (a loaded machine spaces the power samples out)
    alone = [h for before, h in zip(timeline, timeline[1:])
             if ended <= before.timestamp / 1000.0 and h.timestamp / 1000.0 < long_work[1]]
    assert alone and all(h.value == 0.0 for h in alone)  # the long one alone at work: all of it its own


def test_attributed_energy_inside_a_window_of_the_share_timeline():
    """A share's (interval end, W) timeline integrated over a window, as the group's overlap uses it."""
    from radt_ext.collocation.energy_split import energy_in

    timeline = [(0.0, 0.0), (1.0, 100.0), (2.0, 200.0), (3.0, 0.0)]  # 100 W over (0, 1], 200 W over (1, 2]
    assert energy_in(timeline, 0.0, 3.0) == pytest.approx(300.0)
    assert energy_in(timeline, 0.5, 1.5) == pytest.approx(50.0 + 100.0)
    assert energy_in(timeline, 2.0, 3.0) == 0.0


def test_overlap_figures_on_the_recorded_gpu(tracking_uri, recorded_gpu, tmp_path):
    """Two workloads whose work starts together: the parent and both children get the overlap window, the
    GPU's energy over it, each child its throughput and attributed energy per sample over it."""
    stamp = str(tmp_path / "stamps.txt")
    g = Group(mode="naive", experiment_name="overlap", interval=0.1, listeners="nvml", child_listeners="gpu_procs",
              workloads=[Workload("busy", cpu_command(1.5, BUSY_BATCH, stamp, together=2)),
                         Workload("quiet", cpu_command(1.5, 32, stamp, together=2))])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FINISHED"
    client, parent, kids = _runs(tracking_uri, result)
    p = parent.data.metrics
    assert 0 < p["summary/overlap_s"] <= min(k.data.metrics["summary/active_s"] for k in kids.values()) + 1e-6
    assert 0 < p["summary/overlap_gpu_total_energy_j"] < p["summary/e2e_gpu_total_energy_j"]
    attributed = 0.0
    for kid in kids.values():
        m = kid.data.metrics
        assert m["summary/overlap_s"] == pytest.approx(p["summary/overlap_s"])
        assert m["summary/overlap_throughput_samples_per_s"] == pytest.approx(
            m["summary/overlap_samples"] / m["summary/overlap_s"])
        assert m["summary/overlap_energy_per_sample_attributed_j"] == pytest.approx(
            m["summary/overlap_gpu_energy_attributed_j"] / m["summary/overlap_samples"])
        attributed += m["summary/overlap_gpu_energy_attributed_j"]
    # like with like: the children's shares over the overlap add up to the energy the split itself had
    # there (the parent's power shaped by its counter, the split's intervals prorated at the window's edges)
    from radt_ext.collocation.attribution import segments

    def series(key):  # at the full rate the split had: the parent's timeline artifact
        return sorted((h.timestamp / 1000.0, h.value) for h in full_rate(tracking_uri, parent.info.run_id, key))

    grid, seg, _ = segments(series("system/gpu0_power_w"), series("system/gpu0_energy_j"))
    tags = next(iter(kids.values())).data.tags
    a, b = float(tags["collocation.overlap_start"]), float(tags["collocation.overlap_end"])
    inside = sum(e * max(0.0, min(t1, b) - max(t0, a)) / (t1 - t0)
                 for t0, t1, e in zip(grid, grid[1:], seg) if t1 > t0)
    assert inside > 0
    # the attributed timeline comes in 0.2-s bins: a window edge inside a bin reads that bin's mean power
    assert attributed == pytest.approx(inside, rel=0.02)
