"""NVML traces: the JSON format, and a replay object that answers pynvml calls from one.

A trace is recorded at the pynvml-call level by `listeners.record_trace` on a real GPU:

    {"format": "radt-ext-nvml-trace/1", "meta": {...},
     "calls": {"nvmlDeviceGetPowerUsage": {"[{\"ref\": \"dev0\"}]": [71234, 71502, ...]}}}

Every call's arguments are turned into a key (device handles and GPM samples become
labels such as "dev0" / "gpm0"); the key maps to the results in the order the real calls
returned them. A result is plain JSON; a ctypes struct becomes a dict with a "struct"
entry, a handle {"ref": label}, an NVMLError {"nvml_error": code}. nvmlDeviceGetSamples answers
are stored compactly, {"value_type": t, "samples": [[µs, value], ...]}, and replayed as a timeline
with the driver's last-seen semantics (`SampleTimeline`); a trace without them replays the
buffer as not supported.

Setter calls (`SETTERS`: the power limit, locked clocks) are answered "permitted or not" from the
trace like any call, keyed by the device alone; a permitted one is recorded (`set_calls`; into the
JSON-lines file RADT_EXT_NVML_REPLAY_SETS names, shared by every process replaying the trace) and the
replayed GPU honours it: its power-limit reads answer the limit last set, its graphics/SM clock reads
stay within the clocks last locked, until they are reset.

`Replay` has the same interface as the pynvml functions the listeners call. Each call
key answers its recorded results in order (deterministic); past the end it keeps
answering the last one. A field-values call whose ids are among those of a recorded call is
answered from that call's entries (each field is its own entry), at that call's position.
nvmlDeviceGetProcessUtilization answers, per process, the newest recorded sample newer than its
`since` up to where the recording has come (`ProcessTimeline`), so a listener asking once a second
gets the second's newest sample, not the recording's next 100 ms. A recorded error is raised as `pynvml.NVMLError(code)`, which
pynvml maps to its subclass (e.g. NVMLError_NotSupported). Constants and error classes
come from the real pynvml module. A call the trace never saw raises `TraceMissing`,
so a listener that changed its calls fails loudly in tests instead of reading nothing.
"""
from __future__ import annotations

import bisect
import ctypes
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pynvml

from listeners.power_samples import VALUE_ATTR, sample_value

FORMAT = "radt-ext-nvml-trace/1"

# Arguments left out of the call key because they change from run to run.
KEY_IGNORED_ARGS = {"nvmlDeviceGetProcessUtilization": (1,),  # the "since" timestamp
                    "nvmlDeviceGetSamples": (2,),  # the last-seen timestamp
                    # a setter's answer (permitted or not) is the device's, whatever the value
                    "nvmlDeviceSetPowerManagementLimit": (1,),
                    "nvmlDeviceSetGpuLockedClocks": (1, 2)}
SETTERS = ("nvmlDeviceSetPowerManagementLimit", "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks")
SETS_ENV = "RADT_EXT_NVML_REPLAY_SETS"  # a JSON-lines file of the permitted setter calls, across processes
POWER_READS = ("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetEnforcedPowerLimit")
CLOCK_READS = (0, 1)  # nvmlDeviceGetClockInfo's NVML_CLOCK_GRAPHICS and NVML_CLOCK_SM
SAMPLES = "nvmlDeviceGetSamples"
PROCESS_UTIL = "nvmlDeviceGetProcessUtilization"
# The recorder asks the per-process calls of a device in the same tick, so the running-process list
# (asked every tick) tells how far into the recording a utilization call (asked rarely) is.
PACED_BY = {PROCESS_UTIL: "nvmlDeviceGetComputeRunningProcesses"}


class TraceMissing(LookupError):
    """The replay trace holds no answer for this call."""


class Ref:
    """A device handle or GPM sample in a replay: only its label matters."""

    __slots__ = ("label",)

    def __init__(self, label: str):
        self.label = label

    def __repr__(self) -> str:
        return f"Ref({self.label!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other.label == self.label

    def __hash__(self) -> int:
        return hash(self.label)


class Record:
    """A recorded struct: its fields as attributes (like nvmlFriendlyObject)."""

    def __init__(self, struct: str, fields: dict[str, Any]):
        self._struct = struct
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        fields = {k: v for k, v in self.__dict__.items() if k != "_struct"}
        return f"{self._struct}({fields})"


# ---- encoding (recorder side) --------------------------------------------------------

def is_pointer(obj: Any) -> bool:
    return isinstance(obj, ctypes._Pointer)


def encode(obj: Any, label_of) -> Any:
    """A pynvml value → JSON. `label_of(pointer)` names opaque handles."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, bytes):
        return obj.decode(errors="replace")
    if isinstance(obj, Ref):
        return {"ref": obj.label}
    if is_pointer(obj):
        return {"ref": label_of(obj)}
    if isinstance(obj, pynvml.NVMLError):
        return {"nvml_error": int(obj.value)}
    if isinstance(obj, (ctypes.Structure, ctypes.Union)):
        fields = {}
        for spec in obj._fields_:
            name = spec[0]
            if type(obj).__name__ == "c_nvmlGpmMetricsGet_t" and name == "metrics":
                fields[name] = [encode_gpm_metric(m) for m in obj.metrics[: obj.numMetrics]]
                continue
            fields[name] = encode(getattr(obj, name), label_of)
        return {"struct": type(obj).__name__, "fields": fields}
    if isinstance(obj, pynvml.nvmlFriendlyObject):
        return {"struct": "nvmlFriendlyObject",
                "fields": {k: encode(v, label_of) for k, v in vars(obj).items()}}
    if isinstance(obj, Record):
        return {"struct": obj._struct, "fields": {k: encode(v, label_of)
                                                   for k, v in vars(obj).items() if k != "_struct"}}
    if isinstance(obj, (list, tuple, ctypes.Array)):
        return [encode(x, label_of) for x in obj]
    if isinstance(obj, ctypes._SimpleCData):
        return encode(obj.value, label_of)
    raise TypeError(f"cannot record {type(obj).__name__} in an NVML trace")


def encode_samples(result: Any) -> dict:
    """nvmlDeviceGetSamples' (value type, samples) → {"value_type": t, "samples": [[µs, value], ...]}."""
    value_type, samples = result
    out = []
    for s in samples:
        v = sample_value(value_type, s.sampleValue)
        out.append([int(s.timeStamp), int(v) if v == int(v) else v])
    return {"value_type": int(value_type), "samples": out}


def encode_gpm_metric(metric: Any) -> dict:
    # metricInfo holds C string pointers owned by NVML; the id, status and value are what matter.
    return {"struct": "c_nvmlGpmMetric_t",
            "fields": {"metricId": int(metric.metricId), "nvmlReturn": int(metric.nvmlReturn),
                       "value": float(metric.value)}}


def call_key(fn: str, args: tuple, label_of) -> str:
    ignored = KEY_IGNORED_ARGS.get(fn, ())
    parts = []
    for i, arg in enumerate(args):
        if i in ignored:
            parts.append("*")
        elif fn == "nvmlGpmMetricsGet":
            # the request is the two samples and the metric ids, not the whole struct
            parts.append({"sample1": encode(arg.sample1, label_of),
                          "sample2": encode(arg.sample2, label_of),
                          "metrics": [int(arg.metrics[j].metricId) for j in range(arg.numMetrics)]})
        else:
            parts.append(encode(arg, label_of))
    return json.dumps(parts, sort_keys=True, separators=(",", ":"))


# ---- decoding (replay side) ----------------------------------------------------------

def decode(obj: Any) -> Any:
    if isinstance(obj, list):
        return [decode(x) for x in obj]
    if isinstance(obj, dict):
        if "ref" in obj:
            return Ref(obj["ref"])
        if "nvml_error" in obj:
            return pynvml.NVMLError(obj["nvml_error"])
        if "struct" in obj:
            return Record(obj["struct"], {k: decode(v) for k, v in obj["fields"].items()})
    return obj


class _GpmMetric:
    def __init__(self):
        self.metricId = 0
        self.nvmlReturn = 0
        self.value = 0.0


class ReplayGpmMetricsGet:
    """Stands in for pynvml.c_nvmlGpmMetricsGet_t: the same fields, Python objects inside."""

    def __init__(self):
        self.version = 0
        self.numMetrics = 0
        self.sample1 = None
        self.sample2 = None
        self.metrics = [_GpmMetric() for _ in range(pynvml.NVML_GPM_METRIC_MAX)]


class SampleTimeline:
    """Replays one nvmlDeviceGetSamples key with the driver's last-seen semantics.

    The recorded answers, joined, are the buffer's timeline. The i-th call sees the buffer as the
    i-th recorded call saw it (up to that answer's newest sample) and gets every sample newer than
    the `last_seen` it passes: the first call with 0 gets the backlog, a drain gets what came since.
    Past the recorded calls the timeline repeats (whole recorded cycles, timestamps moved on by the
    cycle's length), one recorded drain's worth of time per call. Nothing is made up: every value
    is a recorded sample.
    """

    def __init__(self, answers: list):
        self.value_type = 1
        self.error: int | None = None
        stamps: dict[int, float] = {}
        self.cuts: list[int] = []  # newest sample each recorded call saw
        for raw in answers:
            if isinstance(raw, dict) and "nvml_error" in raw:
                if raw["nvml_error"] != pynvml.NVML_ERROR_NOT_FOUND and self.error is None:
                    self.error = raw["nvml_error"]
                if self.cuts:
                    self.cuts.append(self.cuts[-1])
                continue
            self.value_type = raw["value_type"]
            for ts, v in raw["samples"]:
                stamps[int(ts)] = v
            if raw["samples"]:
                self.cuts.append(max(self.cuts[-1:] + [int(ts) for ts, _ in raw["samples"]]))
        # the driver's buffer holds a fixed number of samples: no answer holds more than the largest recorded
        self.capacity = max([len(raw["samples"]) for raw in answers if isinstance(raw, dict) and "samples" in raw],
                            default=0)
        self.times = sorted(stamps)
        self.values = [stamps[t] for t in self.times]
        if self.times:
            gaps = sorted(b - a for a, b in zip(self.times, self.times[1:]))
            step = gaps[len(gaps) // 2] if gaps else 20_000
            self.period = self.times[-1] - self.times[0] + step
            drains = len(self.cuts) - 1
            self.drain = (self.cuts[-1] - self.cuts[0]) // drains if drains and self.cuts[-1] > self.cuts[0] \
                else self.period
        self.calls = 0

    def answer(self, last_seen: int) -> tuple[int, list]:
        if not self.times:
            raise pynvml.NVMLError(self.error if self.error is not None else pynvml.NVML_ERROR_NOT_SUPPORTED)
        i, self.calls = self.calls, self.calls + 1
        cut = self.cuts[i] if i < len(self.cuts) else self.cuts[-1] + (i - len(self.cuts) + 1) * self.drain
        out = []
        t0 = self.times[0]
        cycle = max(0, (int(last_seen) - t0) // self.period)
        while t0 + cycle * self.period <= cut:
            shift = cycle * self.period
            for t, v in zip(self.times, self.values):
                if last_seen < t + shift <= cut:
                    out.append(Record("c_nvmlSample_t", {
                        "timeStamp": t + shift, "sampleValue": Record("c_nvmlValue_t", {VALUE_ATTR[self.value_type]: v})}))
            cycle += 1
        if not out:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return self.value_type, out[-self.capacity:]


class ProcessTimeline:
    """Replays one nvmlDeviceGetProcessUtilization key with the driver's `since` semantics.

    The recorded answers, joined, are the driver's per-process samples. A call at recording position
    i (the i-th recorded call's moment) gets, for each process, its newest sample newer than the
    `since` it passes among those the i-th recorded call could see: NVML documents one entry per
    process a call, and no recorded answer holds more (not even the first, asked since 0, of a
    process that had run for seconds). A recorded error other than NotFound at that position is
    raised as recorded. Past the recording nothing new comes (NotFound).
    """

    def __init__(self, answers: list):
        self.answers = answers
        self.cuts: list[int] = []  # newest sample timestamp the i-th recorded call could see
        samples: dict[tuple[int, int], Any] = {}
        newest = 0
        for raw in answers:
            if isinstance(raw, list):
                for s in raw:
                    ts = int(s["fields"]["timeStamp"])
                    samples[(ts, int(s["fields"]["pid"]))] = s
                    newest = max(newest, ts)
            self.cuts.append(newest)
        keys = sorted(samples)
        self.samples = [samples[k] for k in keys]
        self.times = [ts for ts, _ in keys]
        self.pids = [pid for _, pid in keys]

    def answer(self, position: int, since: int) -> list:
        i = min(position, len(self.answers) - 1)
        raw = self.answers[i]
        if isinstance(raw, dict) and "nvml_error" in raw and raw["nvml_error"] != pynvml.NVML_ERROR_NOT_FOUND:
            raise pynvml.NVMLError(raw["nvml_error"])
        lo, hi = bisect.bisect_right(self.times, int(since)), bisect.bisect_right(self.times, self.cuts[i])
        newest = {self.pids[k]: k for k in range(lo, hi)}  # each process's newest (times ascend)
        if not newest:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return [decode(self.samples[k]) for k in sorted(newest.values())]


def load_trace(path: str | Path) -> dict:
    with open(path) as fh:
        trace = json.load(fh)
    if trace.get("format") != FORMAT:
        raise ValueError(f"{path}: not an NVML trace (format {trace.get('format')!r}, expected {FORMAT!r})")
    return trace


class Replay:
    """Answers pynvml calls from a trace; use it where the `pynvml` module would be."""

    c_nvmlGpmMetricsGet_t = ReplayGpmMetricsGet

    def __init__(self, trace: dict | str | Path):
        if not isinstance(trace, dict):
            self.path = str(trace)
            trace = load_trace(trace)
        else:
            self.path = "<dict>"
        self.meta = trace.get("meta", {})
        self._calls: dict[str, dict[str, list]] = trace["calls"]
        self._next: dict[tuple[str, str], int] = {}
        self._timelines: dict[str, SampleTimeline | ProcessTimeline] = {}
        self._lock = threading.Lock()
        self._sets: list[dict] = []  # the permitted setter calls, where no RADT_EXT_NVML_REPLAY_SETS file keeps them

    def __getattr__(self, name: str) -> Any:
        real = getattr(pynvml, name)  # AttributeError for names pynvml lacks, as the module would
        if name.startswith("nvml") and callable(real) and not isinstance(real, type):
            fn = lambda *args: self._answer(name, args)  # noqa: E731
            fn.__name__ = name
            return fn
        return real  # constants, error classes, struct classes

    def _answer(self, fn: str, args: tuple) -> Any:
        key = call_key(fn, args, _label_of_ref)
        if fn in SETTERS:
            return self._set(fn, key, args)
        value = self._recorded(fn, key, args)
        if fn in POWER_READS:
            limit = self._last(("nvmlDeviceSetPowerManagementLimit",), args[0])
            return limit["args"][0] if limit else value
        if fn == "nvmlDeviceGetClockInfo" and args[1] in CLOCK_READS:
            lock = self._last(("nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks"), args[0])
            if lock and lock["fn"] == "nvmlDeviceSetGpuLockedClocks":
                low, high = lock["args"]
                return min(max(value, low), high)
        return value

    def _set(self, fn: str, key: str, args: tuple) -> None:
        """A setter: its recorded answer (None: permitted; an error: raised), and a permitted call kept."""
        value = self._recorded(fn, key, args)  # raises the recorded refusal
        call = {"fn": fn, "device": _label_of_ref(args[0]), "args": [encode(a, _label_of_ref) for a in args[1:]],
                "pid": os.getpid(), "time": time.time()}
        path = os.environ.get(SETS_ENV)
        if path:
            with open(path, "a") as fh:  # one short line per call: appended whole
                fh.write(json.dumps(call) + "\n")
        else:
            with self._lock:
                self._sets.append(call)
        return value

    def set_calls(self) -> list[dict]:
        """Every permitted setter call so far ({fn, device, args, pid, time}), in order: this process's, or
        every process's where RADT_EXT_NVML_REPLAY_SETS names the file they share."""
        path = os.environ.get(SETS_ENV)
        if not path:
            with self._lock:
                return list(self._sets)
        try:
            with open(path) as fh:
                return [json.loads(line) for line in fh if line.strip()]
        except FileNotFoundError:
            return []

    def _last(self, fns: tuple[str, ...], handle: Any) -> dict | None:
        label = _label_of_ref(handle)
        found = [c for c in self.set_calls() if c["fn"] in fns and c["device"] == label]
        return found[-1] if found else None

    def _recorded(self, fn: str, key: str, args: tuple) -> Any:
        if fn == SAMPLES:
            # a trace recorded before the sample buffer was read has none: the buffer is "not supported"
            with self._lock:
                timeline = self._timelines.get(key)
                if timeline is None:
                    timeline = self._timelines[key] = SampleTimeline(self._calls.get(fn, {}).get(key, []))
                self._next[(fn, key)] = self._next.get((fn, key), 0) + 1
                return timeline.answer(args[2])
        results = self._calls.get(fn, {}).get(key)
        if fn == PROCESS_UTIL and results:
            return self._process_samples(key, args, results)
        pick = recorded = None
        if not results and fn == "nvmlDeviceGetFieldValues":
            results, pick, recorded = self._field_subset(args)
        if not results:
            raise TraceMissing(f"{self.path}: no recorded answer for {fn}{key}")
        with self._lock:
            i = self._next.get((fn, key), 0)
            if recorded is not None:
                # subsets of one recorded call move through its answers together: a field asked rarely
                # (the energy counter) gets the answer of the moment, not the recording's next one
                shared = (fn, "recorded", recorded)
                i = max(i, self._next.get(shared, 0))
                self._next[shared] = max(self._next.get(shared, 0), i)
            self._next[(fn, key)] = i + 1
        raw = results[min(i, len(results) - 1)]
        if pick is not None and isinstance(raw, list):
            raw = [raw[j] for j in pick]
        value = decode(raw)
        if isinstance(value, pynvml.NVMLError):
            raise value
        if fn == "nvmlGpmMetricsGet":
            request = args[0]
            for j, metric in enumerate(value.metrics):
                request.metrics[j].metricId = metric.metricId
                request.metrics[j].nvmlReturn = metric.nvmlReturn
                request.metrics[j].value = metric.value
            return request
        if fn in ("nvmlGpmSampleGet", "nvmlGpmMigSampleGet"):
            return args[-1]
        return value

    def _process_samples(self, key: str, args: tuple, results: list) -> list:
        """Per-process samples since args[1], as far as the recording has come: the position of the
        call that paces it (asked every tick), or this call's own count where that is not asked."""
        pacer = (PACED_BY[PROCESS_UTIL], call_key(PACED_BY[PROCESS_UTIL], args[:1], _label_of_ref))
        with self._lock:
            timeline = self._timelines.get(key)
            if timeline is None:
                timeline = self._timelines[key] = ProcessTimeline(results)
            own = self._next.get((PROCESS_UTIL, key), 0)
            self._next[(PROCESS_UTIL, key)] = own + 1
            position = max(own, self._next.get(pacer, 0) - 1)
        return timeline.answer(position, args[1])

    def _field_subset(self, args: tuple) -> tuple[list | None, list[int] | None, str | None]:
        """A field-values call whose ids a recorded call asked among others: that call's answers,
        where each asked id sits in them (each entry is a field of its own), and the recorded key."""
        handle, ids = args[0], [int(i) for i in args[1]]
        for recorded, results in self._calls.get("nvmlDeviceGetFieldValues", {}).items():
            r_handle, r_ids = json.loads(recorded)
            if decode(r_handle) == handle and set(ids) <= set(r_ids):
                return results, [r_ids.index(i) for i in ids], recorded
        return None, None, None

    def calls_made(self, fn: str) -> int:
        """How many answers `fn` has given (all keys); for tests."""
        return sum(n for (name, _), n in self._next.items() if name == fn)


def read_recorded(path: str) -> dict | None:
    """A trace recorded on a GPU (not one derived from another), or None."""
    with open(path) as fh:
        trace = json.load(fh)
    if trace.get("format") != FORMAT or trace.get("meta", {}).get("derived"):
        return None
    return trace

def write_derived(source: str, target: str, derive) -> int:
    """A derive script's work: derive(the trace recorded in source) written to target; 2 and one line on stderr
    where source holds no recorded trace (a derived one, or another format)."""
    trace = read_recorded(source)
    if trace is None:
        print(f"{source}: give a real (not derived) NVML trace", file=sys.stderr)
        return 2
    with open(target, "w") as fh:
        json.dump(derive(trace), fh, separators=(",", ":"))
    return 0


def _label_of_ref(obj: Any) -> str:
    if isinstance(obj, Ref):
        return obj.label
    raise TypeError(f"replay got a real NVML handle {obj!r}; mixed real and replayed NVML objects")
