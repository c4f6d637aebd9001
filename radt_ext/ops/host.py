"""The host's side of a step: what this machine's CPU costs to launch work on the device, and keeping the
profiler's own threads out of the launching thread's way.

A small eager network is bound by its host: the GPU waits while the CPU parses arguments, dispatches
operations and launches kernels. Two machines with the same GPU but different CPUs then differ in step
time, and a prediction that carries the host's part over unchanged errs by the hosts' ratio. So every
profile records its host (`benchmark`, below) and how much of each step was the host's (the profiler's
`host_ms`: the time to issue one call on an idle device), and a prediction moves that part by the two hosts'
ratio (`ratio`).

`benchmark(device)` takes about 0.3 s: per call, the median over several batches of

- `launch_us`   a kernel launched with almost no framework work (`torch.cuda._sleep`); NaN on the CPU;
- `dispatch_us` a framework operation on one-element tensors (`torch.add`): argument parsing, dispatch, launch;
- `module_us`   an `nn.Linear(16, 16)` call without gradients: a module's Python call and a library launch;
- `autograd_us` a Linear + ReLU forward under autograd recording and its backward (`torch.autograd.grad`):
                a training step's host work per operation;
- `copy_us`     a 4-byte copy to the device and one back (`.item()`): a synchronising round trip;

with the CPU's model, clock and the CPUs this process may use. `cost(host, phase)` is what one operation
of a phase costs there: inference the geometric mean of launch, dispatch and module; a training phase
the autograd figure.

`pinned(device)` keeps the launching thread on one CPU and tells the energy counter's reading thread to
take another one, not its hyperthread sibling (a counter read is milliseconds of driver CPU); `quiet()`
holds Python's garbage collector off during a measurement window.
"""
from __future__ import annotations

import contextlib
import gc
import math
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Callable, Iterator

import torch

REPEATS = 7  # batches per figure
BATCH_S = 0.004  # host time per batch
FIGURES = ("launch_us", "dispatch_us", "module_us", "autograd_us", "copy_us")
INFERENCE = ("launch_us", "dispatch_us", "module_us")
TRAINING = ("autograd_us",)
COLUMNS = {  # dataset column <- benchmark key
    "host_cpu": "cpu_model", "host_cpus": "cpus", "host_mhz": "cpu_mhz", "host_launch_us": "launch_us",
    "host_dispatch_us": "dispatch_us", "host_module_us": "module_us", "host_autograd_us": "autograd_us",
    "host_copy_us": "copy_us", "host_spread": "spread",
}

_measured: dict[str, dict] = {}
_meter_cpu: int | None = None


def _sync(device: torch.device) -> Callable[[], None]:
    return (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)


def _per_call_us(fn: Callable[[], object], sync: Callable[[], None]) -> tuple[float, float]:
    """(median, spread) of the host time per call over REPEATS batches issued on an idle device."""
    for _ in range(3):
        fn()
    sync()
    n, spent = 1, 0.0
    while spent < BATCH_S / 4 and n < 1 << 14:  # calls per batch: a batch takes about BATCH_S
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        spent = time.perf_counter() - t0
        sync()
        if spent < BATCH_S / 4:
            n *= 4
    n = max(1, min(1 << 14, round(n * BATCH_S / max(spent, 1e-9))))
    per = []
    for _ in range(REPEATS):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n * 1e6)
    sync()
    mid = statistics.median(per)
    return mid, (max(per) - min(per)) / mid if mid > 0 else math.nan


def cpu_facts() -> dict:
    """The CPU's model and clock as the OS reports them, and how many CPUs this process may use."""
    out = {"cpu_model": platform.processor() or platform.machine(), "cpus": _allowed_count(),
           "cpus_total": os.cpu_count()}
    try:
        text = Path("/proc/cpuinfo").read_text()
        models = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")]
        mhz = [float(line.split(":", 1)[1]) for line in text.splitlines() if line.startswith("cpu MHz")]
        if models:
            out["cpu_model"] = models[0]
        if mhz:
            out["cpu_mhz"] = round(statistics.median(mhz), 1)
    except (OSError, ValueError):
        pass
    try:
        import psutil

        freq = psutil.cpu_freq()
        if freq is not None:
            out.setdefault("cpu_mhz", round(freq.current, 1))
            if freq.max:
                out["cpu_mhz_max"] = round(freq.max, 1)
    except (ImportError, RuntimeError, OSError):
        pass
    return out


def _allowed_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def benchmark(device: torch.device | str = "cpu") -> dict:
    """The host's launch cost on `device` (see the module's account), measured now."""
    device = torch.device(device)
    sync = _sync(device)
    out: dict = {"device": device.type, **cpu_facts(), "torch": torch.__version__,
                 "python": platform.python_version()}
    a, b = torch.ones(1, device=device), torch.ones(1, device=device)
    lin = torch.nn.Linear(16, 16).to(device)
    x = torch.randn(1, 16, device=device)
    params = list(lin.parameters())
    one = torch.ones(1)

    def autograd_step():
        with torch.enable_grad():
            y = torch.relu(lin(x)).sum()
            torch.autograd.grad(y, params)

    def module_call():
        with torch.no_grad():
            lin(x)

    def copy_round_trip():
        return a.copy_(one).item()

    figures = {"dispatch_us": lambda: torch.add(a, b), "module_us": module_call, "autograd_us": autograd_step,
               "copy_us": copy_round_trip}
    if device.type == "cuda":
        figures = {"launch_us": lambda: torch.cuda._sleep(0), **figures}
    spreads = []
    with quiet():
        for key, fn in figures.items():
            out[key], spread = _per_call_us(fn, sync)
            spreads.append(spread)
    out.setdefault("launch_us", math.nan)
    out["spread"] = max(s for s in spreads if math.isfinite(s)) if any(map(math.isfinite, spreads)) else math.nan
    out["measured_at"] = time.time()
    return out


_pace_inputs: dict[str, tuple] = {}


def pace_us(device: torch.device, calls: int = 100) -> float:
    """The host's dispatch pace right now, in about a millisecond: µs per `torch.add` of one-element tensors,
    the fastest of three batches issued on an idle device (a round's `before_dispatch_us`)."""
    key = str(device)
    if key not in _pace_inputs:
        _pace_inputs[key] = (torch.ones(1, device=device), torch.ones(1, device=device))
    a, b = _pace_inputs[key]
    sync = _sync(device)
    best = math.inf
    for _ in range(3):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            torch.add(a, b)
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    sync()
    return best


def measured(device: torch.device | str) -> dict:
    """This process's benchmark of `device`'s host, measured on first use (a profile's `host` fact)."""
    key = str(torch.device(device))
    if key not in _measured:
        _measured[key] = benchmark(device)
    return _measured[key]


def _has(host: dict | None, key: str) -> bool:
    return bool(host) and _finite(host.get(key)) and float(host[key]) > 0


def cost(host: dict | None, phase: str, keys: tuple[str, ...] | None = None) -> float:
    """One operation's host cost in a phase (µs): inference the geometric mean of the launch, dispatch and
    module figures the host has; a training phase (forward under autograd, backward) the autograd figure."""
    keys = [k for k in (keys or (INFERENCE if phase == "inference" else TRAINING)) if _has(host, k)]
    values = [float(host[k]) for k in keys]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else math.nan


def ratio(source: dict | None, target: dict | None, phase: str) -> float:
    """Target's host cost over the source's for one operation of `phase`, over the figures both hosts have
    (a host benchmarked without a GPU has no launch figure); NaN when they share none."""
    keys = tuple(k for k in (INFERENCE if phase == "inference" else TRAINING) if _has(source, k) and _has(target, k))
    if not keys:
        return math.nan
    return cost(target, phase, keys) / cost(source, phase, keys)


def _finite(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def columns(host: dict | None) -> dict:
    """A benchmark as the dataset's `host_*` columns (NaN or "" where it has no value)."""
    host = host or {}
    return {col: host.get(key, "" if col == "host_cpu" else math.nan) for col, key in COLUMNS.items()}


def from_rows(rows) -> dict | None:
    """The host benchmark a profile's dataset rows carry (`host_*` columns), None where they have none."""
    if "host_dispatch_us" not in rows.columns or rows.empty:
        return None
    first = rows.iloc[0]
    host = {key: first[col] for col, key in COLUMNS.items() if col in rows.columns}
    return host if any(_finite(host.get(k)) for k in FIGURES) else None


def label(host: dict | None) -> str:
    """One line naming a host: its CPU, how many CPUs, and its per-operation costs."""
    if not host:
        return "unknown"
    cpus = f", {int(float(host['cpus']))} CPUs" if _finite(host.get("cpus")) else ""
    return (f"{host.get('cpu_model') or 'CPU'}{cpus}: inference {cost(host, 'inference'):.1f} µs, "
            f"training {cost(host, 'training'):.1f} µs an operation")


def median_host(hosts: list[dict]) -> dict | None:
    """One host standing for several (the machines the dataset measured a GPU on): each figure's median."""
    hosts = [h for h in hosts if h]
    if not hosts:
        return None
    out = {k: statistics.median(float(h[k]) for h in hosts if _finite(h.get(k)))
           for k in (*FIGURES, "cpus", "cpu_mhz", "spread") if any(_finite(h.get(k)) for h in hosts)}
    models = sorted({str(h.get("cpu_model")) for h in hosts if h.get("cpu_model")})
    out["cpu_model"] = " / ".join(models)
    out["machines"] = len(hosts)
    return out


# ---- keeping the host steady while measuring ------------------------------------------------------------

def _siblings(cpu: int) -> set[int]:
    """CPUs sharing `cpu`'s core (hyperthreads), from sysfs; {cpu} where it does not say."""
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        return _cpulist(path.read_text()) or {cpu}
    except (OSError, ValueError):
        return {cpu}


def _cpulist(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    return out


def gpu_local_cpus(device: torch.device) -> set[int]:
    """The CPUs on the GPU's own NUMA node (its PCI device's `local_cpulist`); empty where unknown."""
    try:
        props = torch.cuda.get_device_properties(device.index or 0)
        bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        return _cpulist(Path(f"/sys/bus/pci/devices/{bus}/local_cpulist").read_text())
    except (AttributeError, OSError, RuntimeError, ValueError, AssertionError):
        return set()


def choose_cpus(allowed: set[int]) -> tuple[int, int] | None:
    """(launching CPU, meter CPU) among `allowed`: the launching thread on the last one (away from CPU 0,
    where interrupts tend to land), the meter's thread on the last one outside its core; None with fewer
    than two CPUs."""
    if len(allowed) < 2:
        return None
    ordered = sorted(allowed)
    launch = ordered[-1]
    others = [c for c in ordered if c not in _siblings(launch)] or [c for c in ordered if c != launch]
    return launch, others[-1]


@contextlib.contextmanager
def pinned(device: torch.device, enabled: bool = True) -> Iterator[dict]:
    """On a GPU: the calling (launching) thread on one CPU and the energy counter's reading threads on
    another (both on the GPU's NUMA node where the system says which it is) for the duration; yields where they are ({} where nothing was pinned: the CPU, a system without
    CPU affinity, a single CPU, or `enabled` off). The previous affinity is restored afterwards."""
    global _meter_cpu
    if not enabled or device.type != "cuda" or not hasattr(os, "sched_setaffinity"):
        yield {}
        return
    before = os.sched_getaffinity(0)
    local = before & gpu_local_cpus(device)  # launching from the GPU's own NUMA node where it has two CPUs
    chosen = choose_cpus(local if len(local) >= 2 else before)
    if chosen is None:
        yield {}
        return
    launch, meter = chosen
    try:
        os.sched_setaffinity(0, {launch})  # 0: the calling thread; threads it starts from now on inherit it
    except OSError as exc:  # a container that forbids it: measure unpinned, and say so
        yield {"not_pinned": f"{type(exc).__name__}: {exc}"}
        return
    _meter_cpu = meter
    try:
        yield {"launch_cpu": launch, "meter_cpu": meter, "cpus_allowed": len(before)}
    finally:
        _meter_cpu = None
        os.sched_setaffinity(0, before)


def pin_meter_thread() -> None:
    """Called first on a meter's reading thread: move it to the CPU `pinned` chose for it, if any."""
    if _meter_cpu is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {_meter_cpu})


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Python's cyclic garbage collector held off (a full collection takes milliseconds of the launching
    thread, more than a short window can absorb); restored afterwards."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def thread_state() -> dict:
    """The calling thread's CPU time, wall clock, context switches (waits, and preemptions by other work)
    and the CPU it is on: taken before and after a window, their differences say whether the host was busy
    elsewhere while the device waited."""
    out = {"cpu_s": time.thread_time(), "wall_s": time.perf_counter()}
    try:
        import resource

        use = resource.getrusage(resource.RUSAGE_THREAD)
        out["waits"], out["preempted"] = use.ru_nvcsw, use.ru_nivcsw
    except (ImportError, AttributeError, OSError):
        pass
    try:
        out["cpu"] = int(Path("/proc/thread-self/stat").read_text().rsplit(")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        pass
    return out


def thread_change(before: dict, after: dict) -> dict:
    """What happened to the launching thread between two `thread_state`s: its CPU share of the wall time,
    context switches, and the CPUs it was on."""
    wall = after["wall_s"] - before["wall_s"]
    out = {"host_cpu_share": (after["cpu_s"] - before["cpu_s"]) / wall if wall > 0 else math.nan}
    for k in ("waits", "preempted"):
        if k in before and k in after:
            out[f"host_{k}"] = after[k] - before[k]
    if "cpu" in after:
        out["host_cpu"] = after["cpu"]
        out["host_moved"] = int(before.get("cpu", after["cpu"]) != after["cpu"])
    return out
