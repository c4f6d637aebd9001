"""GPU readings from one long-lived `nvidia-smi --query-gpu=... -lms N` process.

An independent second opinion next to NVML (the same driver, another path), and
radT's original source. Names carry an `smi_` prefix so they never collide with
the nvml listener's. Which fields are asked for depends on what this driver's
`--help-query-gpu` lists; a field the driver does not know would make
nvidia-smi refuse the whole query.
"""
from __future__ import annotations

import csv
import functools
import re
import shutil
import subprocess
from datetime import datetime

from listeners.base import Listener, ListenerError, Reading, Target
from listeners.streaming import DRAIN_EVERY_S, StreamingProcess

TOOL = "nvidia-smi"
EXIT_GRACE_S = 0.1  # seconds nvidia-smi gets to leave on SIGTERM at close before it is killed

# metric suffix -> the query field names that can serve it, preferred first
FIELDS: dict[str, tuple[str, ...]] = {
    "power_w": ("power.draw",),
    "power_instant_w": ("power.draw.instant",),
    "util_pct": ("utilization.gpu",),
    "mem_util_pct": ("utilization.memory",),
    "mem_used_mib": ("memory.used",),
    "temp_c": ("temperature.gpu",),
    "mem_temp_c": ("temperature.memory",),
    "sm_clock_mhz": ("clocks.sm", "clocks.current.sm"),
    "mem_clock_mhz": ("clocks.mem", "clocks.current.memory"),
    "clock_reasons": ("clocks_event_reasons.active", "clocks_throttle_reasons.active"),
    "pstate_level": ("pstate",),
    "energy_j": ("total_energy_consumption",),
}
KEYS = ("timestamp", "index", "uuid")  # always asked for, first, in this order
# Queried when `--help-query-gpu` cannot be read: fields every driver since 450 knows.
BASIC = ("power.draw", "utilization.gpu", "utilization.memory", "memory.used", "temperature.gpu",
         "clocks.sm", "clocks.mem", "pstate")

# clocks_event_reasons bits (nvml.h nvmlClocksEventReason*) folded into what a user asks:
REASON_BITS = {
    "clocks_idle_bool": 0x1,
    "throttle_power_bool": 0x4 | 0x80,  # software power cap, hardware power brake
    "throttle_thermal_bool": 0x20 | 0x40,  # software and hardware thermal slowdown
    "throttle_hw_bool": 0x8,  # hardware slowdown (any cause)
}
MISSING = {"", "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]",
           "[insufficient permissions]", "[no data]", "[not available]"}
_DIGITS = re.compile(r"[0-9]+")
_HELP_NAME = re.compile(r'"([a-z0-9_.]+)"', re.I)


def supported_fields(help_text: str) -> set[str]:
    """Field names listed by `nvidia-smi --help-query-gpu` (entries look like `"name" or "alias"`)."""
    names: set[str] = set()
    for line in help_text.splitlines():
        if line.startswith('"'):
            names.update(_HELP_NAME.findall(line))
    return names


def choose_fields(available: set[str] | None) -> dict[str, str]:
    """metric suffix -> query field, keeping only fields this driver lists."""
    chosen: dict[str, str] = {}
    for suffix, candidates in FIELDS.items():
        for name in candidates:
            if (name in available) if available is not None else (name in BASIC):
                chosen[suffix] = name
                break
    return chosen


def parse_number(text: str) -> float | None:
    text = text.strip()
    if text.lower() in MISSING:
        return None
    if text[:1] in "Pp" and _DIGITS.fullmatch(text[1:]):  # pstate "P0"
        return float(text[1:])
    if text.lower().startswith("0x"):
        return float(int(text, 16))
    try:
        value = float(text.split()[0])  # tolerate a unit if nounits was ignored
    except (ValueError, IndexError):
        return None
    return value if value == value and abs(value) != float("inf") else None


@functools.lru_cache(maxsize=4)
def _minute(text: str) -> float:
    """Epoch seconds of a local `2026/11/21 21:33` (raises ValueError); a stream asks the same one ~600 times."""
    return datetime.strptime(text, "%Y/%m/%d %H:%M").timestamp()


def parse_timestamp(text: str) -> float | None:
    """nvidia-smi writes local time as `2026/11/21 21:33:07.123`."""
    text = text.strip()
    if len(text) >= 19 and text[16] == ":" and text[17:19].isdigit():  # the minute once, then the seconds
        try:
            seconds = float(text[17:])
            if seconds < 60:
                return _minute(text[:16]) + seconds
        except (ValueError, OverflowError, OSError):
            pass
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(text.strip(), fmt).timestamp()
        except (ValueError, OverflowError, OSError):
            continue
    return None


def parse_gpu_list(text: str) -> tuple[dict[str, int], dict[str, int]]:
    """`nvidia-smi -L` → ({GPU uuid: index}, {MIG uuid: parent GPU index})."""
    gpus: dict[str, int] = {}
    migs: dict[str, int] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"\s*GPU (\d+):.*\(UUID: (GPU-[^)\s]+)\)", line)
        if m:
            current = int(m.group(1))
            gpus[m.group(2)] = current
            continue
        m = re.match(r"\s*MIG .*\(UUID: (MIG-[^)\s]+)\)", line)
        if m and current is not None:
            migs[m.group(1)] = current
    return gpus, migs


def visible_gpus(cuda_visible_devices: str | None, gpu_list: str) -> list[int] | None:
    """Physical indices the workload sees, in its own order; None: every GPU.

    Follows CUDA's reading: entries are indices, GPU-/MIG- UUIDs (a unique
    prefix is enough), and the list stops at the first entry that names nothing.
    """
    if cuda_visible_devices is None:
        return None
    gpus, migs = parse_gpu_list(gpu_list)
    out: list[int] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if _DIGITS.fullmatch(entry):
            found = int(entry) if int(entry) in gpus.values() or not gpus else None
        else:
            hits = [i for u, i in {**gpus, **migs}.items() if u.startswith(entry)] if entry else []
            found = hits[0] if len(set(hits)) == 1 else None
        if found is None:
            break
        if found not in out:
            out.append(found)
    return out


class RowParser:
    """One CSV line of `--format=csv,noheader,nounits` → one Reading."""

    def __init__(self, columns: list[str], suffixes: dict[str, str], ordinal: dict[int, int] | None):
        self.columns = columns  # query field names in output order
        self.by_field = {field: suffix for suffix, field in suffixes.items()}
        self.ordinal = ordinal  # physical index -> workload ordinal; None: the same
        self.energy_start: dict[int, float] = {}
        self._names: dict[int, dict[str, str]] = {}  # GPU -> {suffix: metric name}, built once per GPU

    def __call__(self, line: str, received: float) -> list[Reading] | None:
        if '"' in line:  # quoted cells (never seen from nvidia-smi): the csv module's reading
            try:
                rows = list(csv.reader([line], skipinitialspace=True))
            except csv.Error:
                return None
            cells = rows[0] if rows else []
        else:
            cells = line.split(",")
        if len(cells) != len(self.columns):
            return None
        row = dict(zip(self.columns, (cell.strip() for cell in cells)))
        index = parse_number(row.get("index", ""))
        if index is None or index < 0 or index != int(index):
            return None
        physical = int(index)
        gpu = self.ordinal.get(physical) if self.ordinal is not None else physical
        if gpu is None:
            return []
        when = parse_timestamp(row.get("timestamp", "")) or received
        values: dict[str, float] = {}
        names = self._names.get(gpu)
        if names is None:
            prefix = f"smi_gpu{gpu}_"
            names = self._names[gpu] = {n: prefix + n for n in [*self.by_field.values(), *REASON_BITS]}
        for field, suffix in self.by_field.items():
            value = parse_number(row.get(field, ""))
            if value is None:
                continue
            if suffix == "clock_reasons":
                mask = int(value)
                for name, bits in REASON_BITS.items():
                    values[names[name]] = 1.0 if mask & bits else 0.0
            elif suffix == "energy_j":  # driver counter in mJ since driver load; report since open
                start = self.energy_start.setdefault(physical, value)
                values[names[suffix]] = (value - start) / 1000.0
            else:
                values[names[suffix]] = value
        return [Reading(when, values)] if values else []


def _run(argv: list[str], timeout: float = 15.0) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


class SmiListener(Listener):
    name = "smi"
    description = "nvidia-smi --query-gpu stream (power, utilisation, memory, clocks, temperatures, throttling)"
    default_interval = 0.5
    tool = TOOL

    @classmethod
    def probe(cls, target: Target) -> str | None:
        path = shutil.which(cls.tool)
        if path is None:
            return f"{cls.tool} not found on PATH (install the NVIDIA driver utilities)"
        try:
            listed = _run([path, "-L"])
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"{cls.tool} -L failed: {exc}"
        if listed.returncode != 0 or "GPU " not in listed.stdout:
            text = (listed.stdout + listed.stderr).strip().splitlines()
            return f"{cls.tool} sees no GPU: {text[0] if text else 'exit code ' + str(listed.returncode)}"
        visible = visible_gpus(target.cuda_visible_devices, listed.stdout)
        if visible == []:
            return f"CUDA_VISIBLE_DEVICES={target.cuda_visible_devices!r} names no GPU nvidia-smi lists"
        return None

    def open(self) -> None:
        path = shutil.which(self.tool)
        if path is None:
            raise ListenerError(f"{self.tool} not found on PATH")
        try:
            listed = _run([path, "-L"]).stdout
            help_run = _run([path, "--help-query-gpu"])
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ListenerError(f"{self.tool} failed: {exc}") from None
        available = supported_fields(help_run.stdout) if help_run.returncode == 0 else set()
        self.fields = choose_fields(available or None)
        visible = visible_gpus(self.target.cuda_visible_devices, listed)
        if visible == []:
            raise ListenerError(f"CUDA_VISIBLE_DEVICES={self.target.cuda_visible_devices!r} names no GPU nvidia-smi lists")
        gpus, _ = parse_gpu_list(listed)
        self.uuids = {index: uuid for uuid, index in gpus.items()}
        self.visible = visible
        columns = list(KEYS) + list(self.fields.values())
        argv = [path, f"--query-gpu={','.join(columns)}", "--format=csv,noheader,nounits",
                "-lms", str(max(1, round(self.interval * 1000)))]
        ordinal = None
        if visible is not None:
            argv[1:1] = ["-i", ",".join(str(i) for i in visible)]
            ordinal = {physical: n for n, physical in enumerate(visible)}
        self.parser = RowParser(columns, self.fields, ordinal)
        self.stream = StreamingProcess(argv, self.parser)
        self.stream.start(wait_first=min(5.0, max(1.0, 3 * self.interval)))
        self.interval = max(self.interval, DRAIN_EVERY_S)  # the monitor drains; the tool keeps its -lms

    def sample(self) -> list[Reading]:
        return self.stream.drain()

    def close(self) -> None:
        stream = getattr(self, "stream", None)
        if stream is not None:
            # its lines after the last reading are not used: an nvidia-smi that takes its time to leave on
            # SIGTERM (up to a query interval) is killed after EXIT_GRACE_S, not waited for at the run's end
            stream.stop(timeout=EXIT_GRACE_S)

    def tags(self) -> dict[str, str]:
        out = {"smi.fields": ",".join(getattr(self, "fields", {}).values())}
        uuids = getattr(self, "uuids", {})
        order = self.visible if getattr(self, "visible", None) is not None else sorted(uuids)
        for n, physical in enumerate(order):
            if physical in uuids:
                out[f"smi.gpu{n}.uuid"] = uuids[physical]
        return out
