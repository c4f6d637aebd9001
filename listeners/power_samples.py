"""The driver's own power samples of one GPU: `nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)`.

The driver keeps a ring buffer of power readings, each with its own CPU timestamp (µs since the
epoch), about every 20 ms on Hopper. One call returns every sample newer than `last_seen`; the
first call (last_seen 0) returns the whole backlog. Draining it about once a second gives a 50 Hz
power timeline for the cost of one cheap call, instead of 50 point reads.
"""
from __future__ import annotations

from typing import Any

# Timestamps further than this from time.time() are on another clock than the epoch (a replayed
# trace): they are shifted once, at open, so the newest backlog sample reads as "now".
CLOCK_TOLERANCE_S = 60.0
# Drain at most this long apart, and at most half the span the buffer was seen to hold.
DRAIN_EVERY_S = 1.0


# nvmlValueType_t → the nvmlValue_t union member that holds the value
VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def sample_value(value_type: int, value: Any) -> float:
    """One nvmlValue_t union member, chosen by the value type NVML returned with the samples."""
    return float(getattr(value, VALUE_ATTR.get(int(value_type), "uiVal")))


class PowerSamples:
    """Drains one GPU's power sample buffer; `open()` says whether the buffer can be read at all."""

    def __init__(self, handle: Any):
        self.handle = handle
        self.last_seen = 0  # newest driver timestamp handed out (µs, the driver's clock)
        self.offset_s = 0.0  # added to driver timestamps to get epoch seconds
        self.backlog = 0  # samples in the buffer at open (history before the run, not logged)
        self.backlog_span_s = 0.0  # time those samples covered: a lower bound of what the buffer holds
        self.drain_every_s = DRAIN_EVERY_S
        self.spacing_us = 20_000  # the driver's sample spacing, learned from the backlog
        self.missed_s = 0.0  # time the buffer overran between two drains (samples lost, e.g. a stalled monitor)

    def open(self, nv, now: float) -> str | None:
        """Read the backlog once; None when the buffer works, else the one-line reason it does not."""
        try:
            _, samples = nv.nvmlDeviceGetSamples(self.handle, nv.NVML_TOTAL_POWER_SAMPLES, 0)
        except nv.NVMLError_NotFound:  # supported, but empty right now
            self.last_seen = int(now * 1e6)
            return None
        except (AttributeError, nv.NVMLError) as exc:
            return f"nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES) failed: {type(exc).__name__}: {exc}"
        stamps = sorted(int(s.timeStamp) for s in samples)
        if not stamps:
            self.last_seen = int(now * 1e6)
            return None
        self.last_seen = stamps[-1]  # what was there before open belongs to no run
        self.backlog = len(stamps)
        self.backlog_span_s = (stamps[-1] - stamps[0]) / 1e6
        if abs(now - stamps[-1] / 1e6) > CLOCK_TOLERANCE_S:
            self.offset_s = now - stamps[-1] / 1e6
        if self.backlog_span_s > 0:
            self.drain_every_s = min(DRAIN_EVERY_S, self.backlog_span_s / 2)
        if len(stamps) > 2:
            gaps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
            self.spacing_us = max(1, gaps[len(gaps) // 2])
        return None

    def drain(self, nv) -> list[tuple[float, float]]:
        """(epoch seconds, watts) of every sample newer than the last drain, oldest first."""
        try:
            value_type, samples = nv.nvmlDeviceGetSamples(self.handle, nv.NVML_TOTAL_POWER_SAMPLES, self.last_seen)
        except nv.NVMLError_NotFound:  # nothing new since last_seen
            return []
        fresh = sorted(((int(s.timeStamp), s.sampleValue) for s in samples if int(s.timeStamp) > self.last_seen),
                       key=lambda pair: pair[0])
        if not fresh:
            return []
        gap = fresh[0][0] - self.last_seen
        if gap > 3 * self.spacing_us:  # the oldest sample in the buffer is newer than the last one handed out
            self.missed_s += (gap - self.spacing_us) / 1e6
        self.last_seen = fresh[-1][0]
        # NVML reports power samples in mW
        return [(ts / 1e6 + self.offset_s, sample_value(value_type, v) / 1000.0) for ts, v in fresh]
