"""CPU cost per call of every NVML call the GPU listeners make, idle and under a bf16 matmul load.

    python -m benchmarks.sampling.nvml_call_cost --calls 200 --out docs/benchmarks/gpu/power_sampling

Each call is made `--calls` times back to back on GPU 0 with the arguments its listener uses
(`nvml`, `gpm`, `gpu_procs`); per call: CPU time of the calling thread (`time.thread_time_ns`,
which is what the monitor process pays) and wall time. `smi` makes no NVML call of its own: its
`nvidia-smi --query-gpu … -lms 100` child is run for `--smi-seconds` with the fields the `smi`
listener asks for (and once without the energy field), and its CPU per line is reported.
Also printed: what the driver's power sample buffer holds (backlog, spacing, clock, units).
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

import psutil

from benchmarks.common import fmt, table, write_results
from benchmarks.load import gpu_load

SLOW_CALLS = 50  # PCIe throughput: NVML measures ~20 ms inside each call


def _calls(nv, gpu) -> list[tuple[str, str, Callable[[], Any], int | None]]:
    """(listener, call as the listener makes it, the call, count override)."""
    fi = lambda *names: [getattr(nv, n) for n in names]  # noqa: E731
    buffer = {"last": 0}

    def drain(back_us: int):
        def call():
            try:
                _, samples = nv.nvmlDeviceGetSamples(gpu, nv.NVML_TOTAL_POWER_SAMPLES, buffer["last"])
            except nv.NVMLError_NotFound:
                return
            if samples:  # next time ask for what came in the last `back_us` before the newest
                buffer["last"] = max(int(s.timeStamp) for s in samples) - back_us
        return call

    gpm: dict[str, Any] = {}

    def gpm_sample():
        if "a" not in gpm:
            gpm["a"], gpm["b"] = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(gpu, gpm["a"])
        nv.nvmlGpmSampleGet(gpu, gpm["b"])

    def gpm_metrics():
        from listeners.gpm import METRICS

        if "a" not in gpm:
            gpm_sample()
            time.sleep(0.05)
            nv.nvmlGpmSampleGet(gpu, gpm["b"])
        request = nv.c_nvmlGpmMetricsGet_t()
        request.version = nv.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(METRICS)
        request.sample1, request.sample2 = gpm["a"], gpm["b"]
        for j, const in enumerate(METRICS):
            request.metrics[j].metricId = getattr(nv, const)
        nv.nvmlGpmMetricsGet(request)

    procs = {"last": 0}

    def process_utilization():
        try:
            samples = nv.nvmlDeviceGetProcessUtilization(gpu, procs["last"])
        except nv.NVMLError_NotFound:
            return
        if samples:
            procs["last"] = max(int(s.timeStamp) for s in samples)

    return [
        ("nvml", "nvmlDeviceGetTotalEnergyConsumption", lambda: nv.nvmlDeviceGetTotalEnergyConsumption(gpu), None),
        ("nvml", "nvmlDeviceGetFieldValues [energy] (the listener's counter read)",
         lambda: nv.nvmlDeviceGetFieldValues(gpu, fi("NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION")), None),
        ("nvml", "nvmlDeviceGetFieldValues [power instant, power average, energy, memory temp] (the listener before)",
         lambda: nv.nvmlDeviceGetFieldValues(gpu, fi("NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE",
                                                     "NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "NVML_FI_DEV_MEMORY_TEMP")),
         None),
        ("nvml", "nvmlDeviceGetFieldValues [power average, memory temp] (the listener now, every interval)",
         lambda: nv.nvmlDeviceGetFieldValues(gpu, fi("NVML_FI_DEV_POWER_AVERAGE", "NVML_FI_DEV_MEMORY_TEMP")), None),
        ("nvml", "nvmlDeviceGetFieldValues [power instant] (point reads, where the buffer is not supported)",
         lambda: nv.nvmlDeviceGetFieldValues(gpu, fi("NVML_FI_DEV_POWER_INSTANT")), None),
        ("nvml", "nvmlDeviceGetFieldValues [power average]",
         lambda: nv.nvmlDeviceGetFieldValues(gpu, fi("NVML_FI_DEV_POWER_AVERAGE")), None),
        ("nvml", "nvmlDeviceGetFieldValues [memory temp]",
         lambda: nv.nvmlDeviceGetFieldValues(gpu, fi("NVML_FI_DEV_MEMORY_TEMP")), None),
        ("nvml", "nvmlDeviceGetPowerUsage", lambda: nv.nvmlDeviceGetPowerUsage(gpu), None),
        ("nvml", "nvmlDeviceGetSamples(TOTAL_POWER, last_seen = 0): the whole backlog",
         lambda: nv.nvmlDeviceGetSamples(gpu, nv.NVML_TOTAL_POWER_SAMPLES, 0), None),
        ("nvml", "nvmlDeviceGetSamples(TOTAL_POWER, last_seen): ~1 s of samples (the listener's drain)",
         drain(1_000_000), None),
        ("nvml", "nvmlDeviceGetSamples(TOTAL_POWER, last_seen): ~0.1 s of samples", drain(100_000), None),
        ("nvml", "nvmlDeviceGetTemperature(GPU)", lambda: nv.nvmlDeviceGetTemperature(gpu, nv.NVML_TEMPERATURE_GPU),
         None),
        ("nvml", "nvmlDeviceGetClockInfo(SM)", lambda: nv.nvmlDeviceGetClockInfo(gpu, nv.NVML_CLOCK_SM), None),
        ("nvml", "nvmlDeviceGetClockInfo(MEM)", lambda: nv.nvmlDeviceGetClockInfo(gpu, nv.NVML_CLOCK_MEM), None),
        ("nvml", "nvmlDeviceGetUtilizationRates", lambda: nv.nvmlDeviceGetUtilizationRates(gpu), None),
        ("nvml", "nvmlDeviceGetMemoryInfo", lambda: nv.nvmlDeviceGetMemoryInfo(gpu), None),
        ("nvml", "nvmlDeviceGetPerformanceState", lambda: nv.nvmlDeviceGetPerformanceState(gpu), None),
        ("nvml", "nvmlDeviceGetCurrentClocksEventReasons", lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(gpu),
         None),
        ("nvml", "nvmlDeviceGetPcieThroughput(TX) (at most once a second)",
         lambda: nv.nvmlDeviceGetPcieThroughput(gpu, nv.NVML_PCIE_UTIL_TX_BYTES), SLOW_CALLS),
        ("gpm", "nvmlGpmQueryDeviceSupport (open only)", lambda: nv.nvmlGpmQueryDeviceSupport(gpu), None),
        ("gpm", "nvmlGpmSampleGet", gpm_sample, None),
        ("gpm", "nvmlGpmMetricsGet (9 metrics between two samples)", gpm_metrics, None),
        ("gpu_procs", "nvmlDeviceGetComputeRunningProcesses", lambda: nv.nvmlDeviceGetComputeRunningProcesses(gpu),
         None),
        ("gpu_procs", "nvmlDeviceGetProcessUtilization(last seen)", process_utilization, None),
    ]


def measure_call(fn: Callable[[], Any], n: int) -> dict:
    cpu, wall = [], []
    try:
        fn()  # the first call can set things up (GPM buffers, the sample buffer's last-seen)
        for _ in range(n):
            c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
            fn()
            w1, c1 = time.perf_counter_ns(), time.thread_time_ns()
            cpu.append((c1 - c0) / 1e6)
            wall.append((w1 - w0) / 1e6)
    except Exception as exc:
        return {"calls": len(cpu), "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:200]}
    return {"calls": n, "cpu_ms_mean": statistics.fmean(cpu), "cpu_ms_median": statistics.median(cpu),
            "cpu_ms_max": max(cpu), "wall_ms_median": statistics.median(wall)}


def buffer_facts(nv, gpu) -> dict:
    """What the power sample buffer holds: backlog, spacing, clock and units against other readings."""
    try:
        value_type, samples = nv.nvmlDeviceGetSamples(gpu, nv.NVML_TOTAL_POWER_SAMPLES, 0)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    from listeners.power_samples import sample_value

    now = time.time()
    stamps = [int(s.timeStamp) for s in samples]
    values = [sample_value(value_type, s.sampleValue) for s in samples]
    gaps = sorted((b - a) / 1e3 for a, b in zip(stamps, stamps[1:]))
    out = {"value_type": int(value_type), "backlog_samples": len(samples),
           "backlog_span_s": (max(stamps) - min(stamps)) / 1e6 if stamps else None,
           "spacing_ms_median": statistics.median(gaps) if gaps else None,
           "spacing_ms_min": gaps[0] if gaps else None, "spacing_ms_max": gaps[-1] if gaps else None,
           "newest_minus_time_time_s": max(stamps) / 1e6 - now if stamps else None,
           "in_order": stamps == sorted(stamps),
           "last_values_mw": values[-5:]}
    for name, call in (("power_usage_mw", lambda: nv.nvmlDeviceGetPowerUsage(gpu)),
                       ("power_instant_field_mw", lambda: nv.nvmlDeviceGetFieldValues(
                           gpu, [nv.NVML_FI_DEV_POWER_INSTANT])[0].value.uiVal)):
        try:
            out[name] = float(call())
        except Exception as exc:
            out[name] = f"{type(exc).__name__}: {exc}"
    return out


def smi_cost(seconds: float, drop_energy: bool) -> dict:
    """CPU of the `smi` listener's nvidia-smi child at 10 Hz, per line it writes."""
    from listeners.smi import KEYS, TOOL, choose_fields, supported_fields

    path = shutil.which(TOOL)
    if path is None:
        return {"error": f"{TOOL} not found"}
    help_run = subprocess.run([path, "--help-query-gpu"], capture_output=True, text=True, timeout=15)
    fields = choose_fields(supported_fields(help_run.stdout) or None)
    if drop_energy:
        fields.pop("energy_j", None)
    argv = [path, "-i", "0", f"--query-gpu={','.join(list(KEYS) + list(fields.values()))}",
            "--format=csv,noheader,nounits", "-lms", "100"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines = []
    reader = __import__("threading").Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        ps = psutil.Process(proc.pid)
        time.sleep(1.0)  # nvidia-smi starts up (NVML init) before the window
        t0, n0 = ps.cpu_times(), len(lines)
        w0 = time.perf_counter()
        time.sleep(seconds)
        t1, n1 = ps.cpu_times(), len(lines)
        wall = time.perf_counter() - w0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    cpu = (t1.user + t1.system) - (t0.user + t0.system)
    n = n1 - n0
    return {"fields": list(fields.values()), "lines": n, "seconds": wall, "cpu_pct_of_core": 100.0 * cpu / wall,
            "cpu_ms_per_line": 1e3 * cpu / n if n else None}


def run_phase(label: str, calls: int, smi_seconds: float) -> dict:
    from listeners.devices import resolve
    from listeners.nvml_backend import nvml

    nv = nvml()
    nv.nvmlInit()
    try:
        device = resolve("0")[0]
        gpu = device.parent_handle if device.parent_handle is not None else device.handle
        facts = buffer_facts(nv, gpu)
        print(f"{label}: power sample buffer {facts}", flush=True)
        rows = []
        for listener, what, fn, n in _calls(nv, gpu):
            result = {"listener": listener, "call": what, **measure_call(fn, n or calls)}
            rows.append(result)
            print(f"{label}: {listener:9s} {what}: {fmt(result.get('cpu_ms_mean'), 4)} ms CPU"
                  f"{' ' + result['error'] if 'error' in result else ''}", flush=True)
    finally:
        nv.nvmlShutdown()
    smi = []
    if smi_seconds > 0:
        for drop in (False, True):
            try:
                smi.append({"without_energy": drop, **smi_cost(smi_seconds, drop)})
            except Exception as exc:
                smi.append({"without_energy": drop, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
            print(f"{label}: smi {smi[-1]}", flush=True)
    return {"phase": label, "buffer": facts, "calls": rows, "smi": smi}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200, help="calls of each NVML function per phase")
    ap.add_argument("--smi-seconds", type=float, default=3.0, help="seconds nvidia-smi runs per variant (0: skip)")
    ap.add_argument("--phases", default="idle,load", help="idle, load (a bf16 matmul child) or both")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)

    phases = []
    for phase in args.phases.split(","):
        if phase == "idle":
            phases.append(run_phase("idle", args.calls, args.smi_seconds))
        elif phase == "load":
            with gpu_load() as info:
                time.sleep(2.0)  # clocks and power settle under the load
                phases.append({**run_phase("load", args.calls, args.smi_seconds), "load": info})
        else:
            ap.error(f"--phases: unknown phase {phase!r}; use idle, load")

    by_call: dict[tuple[str, str], dict[str, dict]] = {}
    for p in phases:
        for row in p["calls"]:
            by_call.setdefault((row["listener"], row["call"]), {})[p["phase"]] = row
    names = [p["phase"] for p in phases]
    rows = []
    for (listener, what), per in by_call.items():
        cells = []
        for name in names:
            r = per.get(name, {})
            cells += [fmt(r.get("cpu_ms_mean"), 4) if "error" not in r else "error",
                      fmt(r.get("cpu_ms_median"), 4) if "error" not in r else "–",
                      fmt(r.get("wall_ms_median"), 4) if "error" not in r else "–"]
        errors = "; ".join(f"{n}: {per[n]['error']}" for n in names if "error" in per.get(n, {}))
        rows.append([listener, f"`{what}`", per[names[0]].get("calls", "–"), *cells, errors])
    headers = ["listener", "NVML call (as the listener makes it)", "calls"]
    for name in names:
        headers += [f"{name}: CPU ms/call (mean)", f"{name}: CPU ms (median)", f"{name}: wall ms (median)"]
    headers.append("error")
    smi_rows = [[p["phase"], "without the energy field" if s["without_energy"] else "the smi listener's fields",
                 s.get("lines", "–"), fmt(s.get("cpu_ms_per_line"), 2), fmt(s.get("cpu_pct_of_core"), 2),
                 s.get("error", "")] for p in phases for s in p["smi"]]
    md = "\n".join([
        f"### CPU per NVML call, GPU 0 ({args.calls} calls each; PCIe {SLOW_CALLS})", "",
        table(headers, rows), "",
        "### `smi`: its nvidia-smi child at 10 Hz (`-lms 100`)", "",
        table(["phase", "fields", "lines", "CPU ms per line", "CPU % of one core", "error"], smi_rows), "",
        *[f"- power sample buffer ({p['phase']}): {p['buffer']}" for p in phases], ""])
    write_results(args.out, "nvml_call_cost", {"phases": phases}, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
