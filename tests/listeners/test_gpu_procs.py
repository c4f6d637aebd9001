"""`gpu_procs`: per-process GPU memory/SM utilization, filtered by the workload's process tree,
against the real H200 recording (the matmul child had pid 459 there)."""
from __future__ import annotations

import os

import pytest

from listeners import nvml_backend, registry
from listeners.base import Target
from listeners.gpu_procs import GpuProcsListener, process_tree

def run(pid: int, n: int, interval: float = 1e-6, closing: bool = False) -> list:
    """n samples back to back (and the closing one): every Reading, in order."""
    listener = GpuProcsListener(Target(pid=pid, cuda_visible_devices=None), interval)
    listener.open()
    try:
        out = [r for _ in range(n) for r in listener.sample()]
        return out + (listener.closing_sample() if closing else [])
    finally:
        listener.close()


def readings(pid: int, n: int, interval: float = 1e-6) -> list[dict]:
    return [dict(r.values) for r in run(pid, n, interval)]


def recorded_samples(replay: dict, pid: int) -> list[tuple[int, int]]:
    """(µs, SM %) of the process's recorded utilization samples, in order."""
    return [(s["fields"]["timeStamp"], s["fields"]["smUtil"]) for answer in
            replay["calls"]["nvmlDeviceGetProcessUtilization"]['[{"ref":"dev0"},"*"]']
            if isinstance(answer, list) for s in answer if s["fields"]["pid"] == pid]


def test_registered_and_available_under_replay(replay):
    assert registry.load("gpu_procs") is GpuProcsListener
    assert registry.availability("gpu_procs", Target(pid=1)) is None


def test_the_workloads_own_process_is_attributed(replay, monkeypatch):
    import listeners.gpu_procs as gpu_procs

    monkeypatch.setattr(gpu_procs, "UTIL_EVERY_S", 0.0)  # with a µs interval: every read, as recorded
    load_pid = replay["meta"]["load"]["pid"]
    n = len(replay["calls"]["nvmlDeviceGetComputeRunningProcesses"]['[{"ref":"dev0"}]'])
    got = run(load_pid, n)
    values = [r.values for r in got if "gpu0_proc_mem_mib" in r.values]
    recorded_mem = [sum(p["fields"]["usedGpuMemory"] for p in answer if p["fields"]["pid"] == load_pid) / 2**20
                    for answer in replay["calls"]["nvmlDeviceGetComputeRunningProcesses"]['[{"ref":"dev0"}]']]
    assert [v["gpu0_proc_mem_mib"] for v in values] == pytest.approx(recorded_mem)
    assert max(v["gpu0_proc_count"] for v in values) == 1
    sm = [(r.time, r.values["gpu0_proc_sm_pct"]) for r in got if "gpu0_proc_sm_pct" in r.values]
    recorded = recorded_samples(replay, load_pid)[1:]  # the first was in the driver at open: no run's
    assert [v for _, v in sm] == [v for _, v in recorded] and max(v for _, v in sm) > 50  # the matmul
    # each sample at its own driver time (the trace's clock moved once onto this one), not the read's
    assert [t - sm[0][0] for t, _ in sm] == pytest.approx([(ts - recorded[0][0]) / 1e6 for ts, _ in recorded])


def test_read_rarely_each_sample_keeps_its_driver_time(replay, monkeypatch):
    """Utilization asked every 10th tick (the process list, asked every tick, paces the recording): each
    read gets the process's newest sample since the last one, at the driver's timestamp, not the read's."""
    import listeners.gpu_procs as gpu_procs

    monkeypatch.setattr(gpu_procs, "UTIL_EVERY_S", 0.0)
    load_pid = replay["meta"]["load"]["pid"]
    listener = GpuProcsListener(Target(pid=load_pid, cuda_visible_devices=None), 1e-6)
    listener.open()
    nv = nvml_backend.nvml()
    got = []
    try:
        for k in range(1, 121):
            if k % 10:
                nv.nvmlDeviceGetComputeRunningProcesses(listener.devices[0].handle)  # the recording's ticks
            else:
                got += [r for r in listener.sample() if "gpu0_proc_sm_pct" in r.values]
    finally:
        listener.close()
    assert nv.calls_made("nvmlDeviceGetProcessUtilization") == 13  # open, then every 10th tick
    # the k-th read sees the recording as its 10k-th tick did: the process's newest sample by then
    answers = replay["calls"]["nvmlDeviceGetProcessUtilization"]['[{"ref":"dev0"},"*"]']
    expected = []
    for k in range(1, 13):
        seen = [(s["fields"]["timeStamp"], s["fields"]["smUtil"]) for a in answers[:10 * k]
                if isinstance(a, list) for s in a if s["fields"]["pid"] == load_pid]
        if seen and (not expected or seen[-1][0] > expected[-1][0]):
            expected.append(seen[-1])
    assert [r.values["gpu0_proc_sm_pct"] for r in got] == [v for _, v in expected]
    assert any(v > 50 for _, v in expected) and any(v == 0 for _, v in expected)  # idle, then the load
    # at the driver's times (moved once onto this clock), a second apart as recorded, not µs as read
    assert [r.time - got[0].time for r in got] == pytest.approx([(ts - expected[0][0]) / 1e6 for ts, _ in expected])


def test_process_utilization_is_read_at_most_once_a_second(replay):
    load_pid = replay["meta"]["load"]["pid"]
    values = readings(load_pid, 20, interval=0.2)  # back to back, well inside a second
    assert all("gpu0_proc_mem_mib" in v for v in values)  # the cheap process list: every read
    assert nvml_backend.nvml().calls_made("nvmlDeviceGetProcessUtilization") == 1  # at open; ~2 ms of driver CPU
    run(load_pid, 5, interval=0.2, closing=True)
    assert nvml_backend.nvml().calls_made("nvmlDeviceGetProcessUtilization") == 3  # open and close


def test_on_a_time_sliced_gpu_every_tick_is_read(replay):
    """Beside other workloads sharing the GPU by time-slicing, which process each driver tick names is
    what tells them apart: the listener samples at least every TICK_READ_S and reads utilization each time,
    so it keeps every one of the recorded process's samples (the once-a-second reader keeps its newest)."""
    import listeners.gpu_procs as gpu_procs

    load_pid = replay["meta"]["load"]["pid"]
    listener = GpuProcsListener(Target(pid=load_pid, cuda_visible_devices=None, time_sliced=True), 0.5)
    assert listener.interval == gpu_procs.TICK_READ_S
    listener.interval = 1e-6  # back to back: the recording's ticks, as fast as they came
    listener.open()
    n = len(replay["calls"]["nvmlDeviceGetComputeRunningProcesses"]['[{"ref":"dev0"}]'])
    try:
        got = [r for _ in range(n) for r in listener.sample() if "gpu0_proc_sm_pct" in r.values]
    finally:
        listener.close()
    assert nvml_backend.nvml().calls_made("nvmlDeviceGetProcessUtilization") == n + 1  # open, then every sample
    assert [r.values["gpu0_proc_sm_pct"] for r in got] == [v for _, v in recorded_samples(replay, load_pid)[1:]]
    slow = GpuProcsListener(Target(pid=load_pid, cuda_visible_devices=None), 0.5)
    assert slow.interval == 0.5 and slow.util_every_s == gpu_procs.UTIL_EVERY_S  # alone on its GPU: as before


def test_the_closing_read_keeps_the_last_second_of_an_exited_workload(replay, monkeypatch):
    """A workload whose process ended since the last read: its samples of that time still count."""
    import listeners.gpu_procs as gpu_procs

    load_pid = replay["meta"]["load"]["pid"]
    monkeypatch.setattr(gpu_procs, "process_tree", lambda pid, *_: {load_pid} if pid == load_pid else set())
    listener = GpuProcsListener(Target(pid=load_pid, cuda_visible_devices=None), 0.2)
    listener.open()
    try:
        nv = nvml_backend.nvml()
        for _ in range(60):  # the recording moves on, into the load, between two reads
            listener.sample()
        monkeypatch.setattr(gpu_procs, "process_tree", lambda pid, *_: set())  # psutil no longer sees it
        listener.target.pid = None
        closing = listener.closing_sample()
    finally:
        listener.close()
    assert nv.calls_made("nvmlDeviceGetProcessUtilization") == 2
    assert [r.values["gpu0_proc_sm_pct"] for r in closing] == [recorded_samples(replay, load_pid)[29][1]]


def test_other_processes_are_not_counted(replay):
    values = readings(os.getpid(), 60)  # this test process never ran on the recorded GPU
    assert all(v["gpu0_proc_count"] == 0 and v["gpu0_proc_mem_mib"] == 0 for v in values)
    assert not any("gpu0_proc_sm_pct" in v for v in values)


def test_process_tree_holds_descendants():
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert {os.getpid(), child.pid} <= process_tree(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert process_tree(None) == set()


def test_a_process_on_the_gpu_that_the_last_listing_missed_is_counted_at_once(replay, monkeypatch):
    """The tree is listed at open and then about once a second; a process NVML shows that the last listing
    does not hold (a worker started since) makes it list again in the same sample."""
    import listeners.gpu_procs as gpu_procs

    load_pid = replay["meta"]["load"]["pid"]
    root = load_pid + 100_000  # the workload's root, never on the GPU
    listings = []

    def late_worker(pid, *_):  # the worker (the recording's matmul process) starts right after open
        listings.append(pid)
        return {root} if len(listings) == 1 else {root, load_pid}

    monkeypatch.setattr(gpu_procs, "process_tree", late_worker)
    listener = GpuProcsListener(Target(pid=root, cuda_visible_devices=None), 1e-6)
    listener.open()
    try:
        counts = [r.values["gpu0_proc_count"] for _ in range(6) for r in listener.sample()
                  if "gpu0_proc_count" in r.values]
    finally:
        listener.close()
    assert counts == [1] * 6
    assert len(listings) >= 2

def test_a_strangers_process_on_the_gpu_does_not_make_the_tree_listed_every_sample(replay, monkeypatch):
    import listeners.gpu_procs as gpu_procs

    listings = []
    real = gpu_procs.process_tree
    monkeypatch.setattr(gpu_procs, "process_tree", lambda pid, *a: listings.append(pid) or real(pid, *a))
    values = readings(os.getpid(), 10)  # the recorded GPU's processes are none of this test's tree
    assert all(v["gpu0_proc_count"] == 0 for v in values)
    assert len(listings) < len(values)  # not one listing a sample


@pytest.mark.parametrize("whose, most", [("load", "1"), ("ours", "0")])
def test_a_tag_says_which_watched_gpu_the_workload_used(replay, whose, most):
    pid = replay["meta"]["load"]["pid"] if whose == "load" else os.getpid()
    listener = GpuProcsListener(Target(pid=pid, cuda_visible_devices=None), 1e-6)
    listener.open()
    try:
        for _ in range(len(replay["calls"]["nvmlDeviceGetComputeRunningProcesses"]['[{"ref":"dev0"}]'])):
            listener.sample()
    finally:
        listener.close()
    assert listener.tags() == {"gpu.0.workload_processes_max": most}
