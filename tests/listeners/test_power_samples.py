"""The driver's power sample buffer (`listeners.power_samples`) read through the replay backend."""
from __future__ import annotations

import json
import os

import pynvml
import pytest

from listeners.power_samples import PowerSamples
from listeners.replay import Ref, Replay, decode
from nvml_fake import TRACES, gpu_label, real_gpu_traces, record_fake

NOW = 1_800_000_000.0  # an epoch time handed to open(): nothing here depends on the clock


def buffer_traces() -> list:
    """The hand-made (fake) trace and every real recording that holds sample buffer answers."""
    out = ["fake"]
    for path in real_gpu_traces():
        if json.load(open(path))["calls"].get("nvmlDeviceGetSamples"):
            out.append(path)
    return out


def load(param) -> dict:
    return record_fake() if param == "fake" else json.load(open(param))


def recorded_samples(trace: dict) -> list[tuple[int, float]]:
    """Every recorded (µs, value) of GPU 0's power buffer, each once, in time order."""
    answers = next(iter(trace["calls"]["nvmlDeviceGetSamples"].values()))
    seen = {}
    for raw in answers:
        if "samples" in raw:
            seen.update({int(t): v for t, v in raw["samples"]})
    return sorted(seen.items())


@pytest.fixture(params=buffer_traces(), ids=lambda p: os.path.basename(p) if p != "fake" else p)
def trace(request):
    return load(request.param)


def test_open_reads_the_backlog_and_logs_none_of_it(trace):
    nv = Replay(trace)
    buffer = PowerSamples(gpu_label(trace))
    assert buffer.open(nv, NOW) is None
    first = next(iter(trace["calls"]["nvmlDeviceGetSamples"].values()))[0]["samples"]
    assert buffer.backlog == len(first) and buffer.last_seen == max(t for t, _ in first)
    assert buffer.backlog_span_s == pytest.approx((max(t for t, _ in first) - min(t for t, _ in first)) / 1e6)
    # drained at most every second, and at most every half of what the buffer was seen to hold
    assert 0 < buffer.drain_every_s <= min(1.0, buffer.backlog_span_s / 2)


def test_drains_hand_out_each_recorded_sample_once_in_order_in_watts(trace):
    nv = Replay(trace)
    buffer = PowerSamples(gpu_label(trace))
    buffer.open(nv, NOW)
    backlog_newest = buffer.last_seen
    answers = next(iter(trace["calls"]["nvmlDeviceGetSamples"].values()))
    got = []
    for _ in answers[1:]:  # as many drains as the recording made after open
        got += buffer.drain(nv)
    after_open = [(t, v) for t, v in recorded_samples(trace) if t > backlog_newest]
    assert got and len(got) == len(after_open)
    times = [t for t, _ in got]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert [w for _, w in got] == pytest.approx([v / 1000.0 for _, v in after_open])  # NVML's mW
    # each sample keeps its own time: the recorded µs stamps, moved by one offset
    assert [t - buffer.offset_s for t in times] == pytest.approx([t / 1e6 for t, _ in after_open])
    more = buffer.drain(nv)  # past the recording the timeline goes on (recorded values), never back in time
    assert more and min(t for t, _ in more) > times[-1]
    assert {w for _, w in more} <= {v / 1000.0 for _, v in recorded_samples(trace)}


def test_timestamps_on_another_clock_are_moved_once_so_the_backlog_ends_now():
    trace = record_fake()  # the fake driver stamps its samples in 2023
    nv = Replay(trace)
    buffer = PowerSamples(gpu_label(trace))
    buffer.open(nv, NOW)
    assert buffer.last_seen / 1e6 + buffer.offset_s == pytest.approx(NOW)
    offset = buffer.offset_s
    buffer.drain(nv)
    assert buffer.offset_s == offset


def test_epoch_timestamps_are_kept_as_they_are():
    stamps = [int(NOW * 1e6) - 20_000 * k for k in range(5, 0, -1)]
    trace = {"format": "radt-ext-nvml-trace/1", "meta": {}, "calls": {"nvmlDeviceGetSamples": {
        '[{"ref":"dev0"},0,"*"]': [{"value_type": 1, "samples": [[t, 70_000] for t in stamps]},
                                   {"value_type": 1, "samples": [[stamps[-1] + 20_000, 71_500]]}]}}}
    nv = Replay(trace)
    buffer = PowerSamples(Ref("dev0"))
    assert buffer.open(nv, NOW) is None and buffer.offset_s == 0.0
    assert buffer.drain(nv) == [((stamps[-1] + 20_000) / 1e6, 71.5)]


def test_a_trace_without_buffer_answers_says_why_the_buffer_cannot_be_read():
    trace = json.load(open(os.path.join(TRACES, "h200_idle.json")))
    assert "nvmlDeviceGetSamples" not in trace["calls"]  # recorded before the buffer was read
    reason = PowerSamples(gpu_label(trace)).open(Replay(trace), NOW)
    assert reason.startswith("nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES) failed: NVMLError_NotSupported")
    assert "\n" not in reason


def test_a_recorded_not_supported_is_the_reason():
    trace = record_fake(power_samples=False)
    answers = next(iter(trace["calls"]["nvmlDeviceGetSamples"].values()))
    assert isinstance(decode(answers[0]), pynvml.NVMLError_NotSupported)
    assert "NotSupported" in PowerSamples(gpu_label(trace)).open(Replay(trace), NOW)


def test_a_drain_that_comes_too_late_counts_the_time_the_buffer_lost():
    backlog = [[1_000_000 + 20_000 * k, 70_000] for k in range(10)]
    trace = {"format": "radt-ext-nvml-trace/1", "meta": {}, "calls": {"nvmlDeviceGetSamples": {
        '[{"ref":"dev0"},0,"*"]': [{"value_type": 1, "samples": backlog},
                                   {"value_type": 1, "samples": [[1_200_000 + 20_000 * k, 70_000] for k in range(3)]},
                                   # the monitor stalled: the buffer overran, its oldest sample is 1 s later
                                   {"value_type": 1, "samples": [[2_260_000 + 20_000 * k, 70_000] for k in range(3)]}]}}}
    nv = Replay(trace)
    buffer = PowerSamples(Ref("dev0"))
    buffer.open(nv, NOW)
    assert buffer.spacing_us == 20_000
    buffer.drain(nv)
    assert buffer.missed_s == 0.0
    buffer.drain(nv)
    assert buffer.missed_s == pytest.approx(1.0)  # the sample after 1.24 s was due at 1.26 s; it is 2.26 s
