"""Record an NVML trace on a real GPU for the replay backend (tests, machines without a GPU).

    python -m listeners.record_trace --out h100_matmul.json --seconds 20 --load

Wraps the real pynvml module, runs the `nvml` and `gpm` listeners' own code (plus the
per-process calls) for N seconds — idle for the first quarter, then (with --load, when torch
sees CUDA) a bf16 8192x8192 matmul for half the time in a child process that initialised
CUDA beforehand, then idle — and writes every pynvml call's key and
result to JSON (see listeners.replay). Then replays the file through the same listeners
and prints what they read, failing if the replay does not answer them.

Read-only by construction: the wrapper passes through only query calls (Get/Query, GPM
sampling, init/shutdown) and refuses every set/create/destroy/reset function, so
recording never changes the GPU (MIG mode, clocks, limits) it watches.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import subprocess
import sys
import threading
import time
from typing import Any

from listeners import nvml_backend
from listeners.replay import FORMAT, SAMPLES, Replay, call_key, encode, encode_samples

READ_ONLY = re.compile(
    r"^nvml(Init|InitWithFlags|Shutdown|ErrorString|DeviceGet\w+|SystemGet\w+|"
    r"GpmQueryDeviceSupport|GpmQueryIfStreamingEnabled|GpmSampleAlloc|GpmSampleFree|"
    r"GpmSampleGet|GpmMigSampleGet|GpmMetricsGet)$"
)

LOAD_CODE = r"""
import sys, time, torch
seconds = float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
c = a @ b
torch.cuda.synchronize()
print("ready", flush=True)  # CUDA is up (that takes seconds); wait for the recorder's go
sys.stdin.readline()
print("load-start", time.time(), flush=True)
end = time.time() + seconds
n = 0
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
    n += 20
print("load-end", time.time(), n, flush=True)
"""

class RecordingNvml:
    """pynvml with every query call recorded; anything that could change the GPU refused."""

    def __init__(self, real: Any):
        self._real = real
        self._lock = threading.Lock()
        self._labels: dict[tuple[str, int], str] = {}
        self.calls: dict[str, dict[str, list]] = {}

    def label_of(self, pointer: Any) -> str:
        kind = "gpm" if "Gpm" in type(pointer).__name__ or "Gpm" in str(type(pointer)._type_) else "dev"
        address = ctypes.cast(pointer, ctypes.c_void_p).value or 0
        with self._lock:
            n = sum(1 for k in self._labels if k[0] == kind)
            return self._labels.setdefault((kind, address), f"{kind}{n}")

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._real, name)
        if not (name.startswith("nvml") and callable(real) and not isinstance(real, type)):
            return real
        if not READ_ONLY.match(name):
            raise PermissionError(f"the NVML recorder only reads; it refuses {name}")

        def call(*args):
            key = call_key(name, args, self.label_of)  # before the call: GPM fills its struct in place
            try:
                result = real(*args)
            except self._real.NVMLError as exc:
                self._store(name, key, {"nvml_error": int(exc.value)})
                raise
            self._store(name, key, encode_samples(result) if name == SAMPLES else encode(result, self.label_of))
            return result

        call.__name__ = name
        return call

    def _store(self, name: str, key: str, value: Any) -> None:
        with self._lock:
            self.calls.setdefault(name, {}).setdefault(key, []).append(value)


def _run_listener(listener, seconds: float, stop: threading.Event, out: list, errors: list) -> None:
    """Sample like the monitor does; `out` gets one list of readings per sample() call."""
    try:
        listener.open()
        end = time.time() + seconds
        while time.time() < end and not stop.is_set():
            out.append(listener.sample())
            time.sleep(listener.interval)
        out.append(listener.sample())
        out.append(listener.closing_sample())
    except Exception as exc:  # recorded as a fact of this machine, not a crash of the recorder
        errors.append(f"{listener.name}: {type(exc).__name__}: {exc}")
    finally:
        try:
            listener.close()
        except Exception as exc:
            errors.append(f"{listener.name} close: {type(exc).__name__}: {exc}")


def _run_processes(nv, seconds: float, interval: float, stop: threading.Event) -> None:
    """The per-process calls (for attribution), sampled alongside the listeners."""
    from listeners.devices import resolve

    try:
        nv.nvmlInit()
    except nv.NVMLError:
        return
    try:
        devices = resolve(os.environ.get("CUDA_VISIBLE_DEVICES"))
        last = {d.index: 0 for d in devices}
        end = time.time() + seconds
        while time.time() < end and not stop.is_set():
            for d in devices:
                for fn, args in (("nvmlDeviceGetComputeRunningProcesses", (d.handle,)),
                                 ("nvmlDeviceGetProcessUtilization", (d.handle, last[d.index]))):
                    try:
                        result = getattr(nv, fn)(*args)
                    except nv.NVMLError:
                        continue
                    if fn == "nvmlDeviceGetProcessUtilization" and result:
                        last[d.index] = max(int(s.timeStamp) for s in result)
            time.sleep(interval)
    except Exception:
        pass
    finally:
        nv.nvmlShutdown()


def _start_load(seconds: float, gpu: str | None = None) -> subprocess.Popen | None:
    """A child ready to run the matmul when told (CUDA initialised first, so load starts on time), on
    `gpu` (an NVML index or UUID; default: the first GPU it sees)."""
    try:
        import torch  # noqa: F401

        if not torch.cuda.is_available():
            print("record_trace: torch sees no CUDA device; recording without load", file=sys.stderr)
            return None
    except ImportError:
        print("record_trace: torch not installed; recording without load", file=sys.stderr)
        return None
    return _spawn_load(LOAD_CODE, seconds, gpu)


def _spawn_load(code: str, seconds: float, gpu: str | None = None) -> subprocess.Popen | None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=gpu) if gpu is not None else None
    child = subprocess.Popen([sys.executable, "-c", code, str(seconds)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    if child.stdout.readline().strip() != "ready":
        child.kill()
        print("record_trace: the load process failed to start; recording without load", file=sys.stderr)
        return None
    return child


def record(seconds: float, interval: float, gpm_interval: float, load: bool, real: Any = None,
           load_gpu: str | None = None) -> dict:
    """Record `real` (the pynvml module unless a test hands in a stand-in)."""
    if real is None:
        import pynvml as real

    from listeners.base import Target
    from listeners.gpm import GpmListener
    from listeners.nvml import NvmlListener

    rec = RecordingNvml(real)
    meta: dict[str, Any] = {
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "recorder": "python -m listeners.record_trace " + " ".join(sys.argv[1:]),
        "pynvml_version": _pynvml_version(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "seconds": seconds, "interval_s": interval, "gpm_interval_s": gpm_interval,
        "derived": False,
    }
    with nvml_backend.use(rec):
        target = Target()
        meta["probe"] = {"nvml": NvmlListener.probe(target), "gpm": GpmListener.probe(target)}
        listeners = [NvmlListener(target, interval), GpmListener(target, gpm_interval)]
        samples: dict[str, list] = {lst.name: [] for lst in listeners}
        errors: list[str] = []
        stop = threading.Event()
        threads = [threading.Thread(target=_run_listener, args=(lst, seconds, stop, samples[lst.name], errors))
                   for lst in listeners]
        threads.append(threading.Thread(target=_run_processes, args=(rec, seconds, interval, stop)))
        child = (_start_load(seconds * 0.5, load_gpu) if load_gpu is not None else _start_load(seconds * 0.5)) \
            if load and meta["probe"]["nvml"] is None else None
        t0 = time.time()
        for t in threads:
            t.start()
        if child is not None:
            time.sleep(seconds * 0.25)
            out, _ = child.communicate("go\n", timeout=seconds * 2 + 120)
            meta["load"] = {"returncode": child.returncode, "pid": child.pid, "gpu": load_gpu,
                            "events": [dict(zip(("what", "t", "n"), line.split()))
                                       for line in out.splitlines() if line.startswith("load-")]}
            for event in meta["load"]["events"]:
                event["t_rel_s"] = round(float(event.pop("t")) - t0, 3)
        for t in threads:
            t.join(timeout=seconds + 60)
        stop.set()
        meta["listener_errors"] = errors
        meta["sample_counts"] = {name: max(0, len(s) - 1) for name, s in samples.items()}  # sample() calls
        meta["reading_counts"] = {name: sum(len(r) for r in s) for name, s in samples.items()}
        power = sorted(r.time for s in samples["nvml"] for r in s if any(k.endswith("_power_w") for k in r.values))
        meta["power_points"] = len(power)
        if len(power) > 1:
            gaps = sorted(b - a for a, b in zip(power, power[1:]))
            meta["power_point_spacing_s_median"] = round(gaps[len(gaps) // 2], 4)
        meta["tags"] = listeners[0].tags()
        meta["nvml_dropped"] = listeners[0].dropped
        meta["gpm_skipped"] = listeners[1].skipped
    return {"format": FORMAT, "meta": meta, "calls": rec.calls}


def _pynvml_version() -> str:
    try:
        from importlib.metadata import version

        return version("nvidia-ml-py")
    except Exception:
        return "unknown"


def self_check(path: str) -> list[str]:
    """Replay the file through the listeners; return lines describing what they read."""
    from listeners.base import Target
    from listeners.gpm import GpmListener
    from listeners.nvml import NvmlListener

    trace = json.load(open(path))
    meta = trace["meta"]
    lines = []
    cvd = meta.get("cuda_visible_devices")
    with nvml_backend.use(Replay(trace)):
        target = Target(cuda_visible_devices=cvd)
        lines.append(f"probe nvml: {NvmlListener.probe(target)}; gpm: {GpmListener.probe(target)}")
    for cls in (NvmlListener, GpmListener):
        n = meta.get("sample_counts", {}).get(cls.name, 0)
        if not n:
            continue
        with nvml_backend.use(Replay(trace)):
            cls.probe(Target(cuda_visible_devices=cvd))  # the recorder probed first too
            listener = cls(Target(cuda_visible_devices=cvd))
            listener.open()
            readings = [listener.sample() for _ in range(n)] + [listener.closing_sample()]
            listener.close()
        values: dict[str, list[float]] = {}
        for batch in readings:
            for r in batch:
                for k, v in r.values.items():
                    values.setdefault(k, []).append(v)
        if not values:
            raise SystemExit(f"self-check: replaying {cls.name} read nothing")
        for k in sorted(values):
            vs = values[k]
            lines.append(f"{k}: n={len(vs)} min={min(vs):g} max={max(vs):g} last={vs[-1]:g}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m listeners.record_trace", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="trace file to write (JSON)")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--interval", type=float, default=0.1, help="nvml listener interval (s)")
    parser.add_argument("--gpm-interval", type=float, default=0.2, help="gpm listener interval (s)")
    parser.add_argument("--load", action="store_true", help="run a bf16 matmul during the middle half")
    parser.add_argument("--load-gpu", default=None,
                        help="the GPU the load runs on (NVML index or UUID; default the first): on a multi-GPU "
                             "machine the others stay idle, so a replay tells the GPUs apart")
    parser.add_argument("--note", default="", help="free text kept in the trace's meta (the machine, the case)")
    args = parser.parse_args(argv)
    os.environ.pop(nvml_backend.REPLAY_ENV, None)  # record the real GPU, never a replay

    trace = record(args.seconds, args.interval, args.gpm_interval, args.load, load_gpu=args.load_gpu)
    trace["meta"]["note"] = args.note
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(trace, fh, separators=(",", ":"))
    size = os.path.getsize(args.out)
    print(f"wrote {args.out}: {size / 1024:.0f} KiB, meta: {json.dumps(trace['meta'])}")
    if size > 1024 * 1024:
        print("warning: trace is over 1 MB; record fewer seconds or a coarser interval", file=sys.stderr)
    for line in self_check(args.out):
        print("replay", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
