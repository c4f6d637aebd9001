"""A tiny stand-in for pynvml, used only to test the recorder on machines without a GPU.

It returns the same ctypes types pynvml does (device handles and GPM samples as ctypes
pointers, c_nvmlMemory_t, c_nvmlFieldValue_t arrays, a filled c_nvmlGpmMetricsGet_t), so
the recorder's encoding is exercised as on a real GPU. Its numbers are made up; the
committed fixtures under listeners/traces/ are real recordings, not this.
"""
from __future__ import annotations

import ctypes
import itertools

import pynvml


def _pointer(ptype, address: int):
    return ctypes.cast(ctypes.c_void_p(address), ptype)


class FakeNvml:
    def __init__(self, gpus: int = 1, mem_temp: bool = False, power_samples: bool = True):
        self.gpus = gpus
        self.mem_temp = mem_temp
        self.power_samples = power_samples
        self._buffer_calls = 0
        self._handles = [_pointer(pynvml.c_nvmlDevice_t, 0x1000 + 0x10 * i) for i in range(gpus)]
        self._samples = itertools.count(0x9000, 0x10)
        self._ticks = {}
        self.initialized = 0
        self.calls: list[str] = []

    def __getattr__(self, name):
        return getattr(pynvml, name)  # constants, errors, struct classes

    def _tick(self, what, handle) -> int:
        key = (what, ctypes.cast(handle, ctypes.c_void_p).value)
        self._ticks[key] = self._ticks.get(key, 0) + 1
        return self._ticks[key]

    def _index(self, handle) -> int:
        address = ctypes.cast(handle, ctypes.c_void_p).value
        return (address - 0x1000) // 0x10

    def nvmlInit(self):
        self.initialized += 1

    def nvmlShutdown(self):
        self.initialized -= 1

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < self.gpus:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self._handles[i]

    def nvmlDeviceGetName(self, h):
        return "Fake H100"

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-fake0000-0000-0000-0000-00000000000{self._index(h)}"

    def nvmlDeviceGetMigMode(self, h):
        return [0, 0]

    def nvmlSystemGetDriverVersion(self):
        return "999.1"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12080

    def nvmlDeviceGetComputeMode(self, h):
        return 0

    def nvmlDeviceGetPowerManagementLimit(self, h):
        return 700000

    def nvmlDeviceGetCudaComputeCapability(self, h):
        return (9, 0)

    def nvmlDeviceGetPowerUsage(self, h):
        return 100000 + 1000 * self._tick("power", h)

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return 5_000_000 + 10_000 * self._tick("energy", h)

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 40 + self._tick("temp", h) % 3

    def nvmlDeviceGetFieldValues(self, h, ids):
        values = (pynvml.c_nvmlFieldValue_t * len(ids))()
        for i, fid in enumerate(ids):
            values[i].fieldId = fid
            if self.mem_temp:
                values[i].valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                values[i].value.uiVal = 50
            else:
                values[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return values

    def nvmlDeviceGetSamples(self, h, sampling_type, last_seen):
        """A buffer of 20 ms power samples: 100 (2 s) there at the first call, 50 (1 s) more by each
        later call, the newest 120 kept (mW, µs stamps)."""
        if not self.power_samples or sampling_type != pynvml.NVML_TOTAL_POWER_SAMPLES:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        self._buffer_calls += 1
        newest = 100 + 50 * (self._buffer_calls - 1)
        out = []
        for k in range(max(0, newest - 120), newest):
            ts = 1_700_000_000_000_000 + 20_000 * k
            if ts > last_seen:
                s = pynvml.c_nvmlSample_t()
                s.timeStamp = ts
                s.sampleValue.uiVal = 100_000 + 1000 * (k % 7)
                out.append(s)
        if not out:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, out

    def nvmlDeviceGetClockInfo(self, h, clock):
        return 1980 if clock == pynvml.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetUtilizationRates(self, h):
        u = pynvml.c_nvmlUtilization_t()
        u.gpu, u.memory = 50, 20
        return u

    def nvmlDeviceGetMemoryInfo(self, h):
        m = pynvml.c_nvmlMemory_t()
        m.total, m.used = 80 * 1024**3, 1024**3
        m.free = m.total - m.used
        return m

    def nvmlDeviceGetPerformanceState(self, h):
        return 0

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return 0x1 | 0x4

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [pynvml.nvmlFriendlyObject({"pid": 4242, "usedGpuMemory": 1024**3,
                                           "gpuInstanceId": 0xFFFFFFFF, "computeInstanceId": 0xFFFFFFFF})]

    def nvmlDeviceGetProcessUtilization(self, h, since):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlGpmQueryDeviceSupport(self, h):
        s = pynvml.c_nvmlGpmSupport_t()
        s.isSupportedDevice = 1
        return s

    def nvmlGpmSampleAlloc(self):
        return _pointer(pynvml.c_nvmlGpmSample_t, next(self._samples))

    def nvmlGpmSampleFree(self, sample):
        return None

    def nvmlGpmSampleGet(self, h, sample):
        return sample

    def nvmlGpmMetricsGet(self, request):
        for j in range(request.numMetrics):
            request.metrics[j].value = 10.0 * (j + 1)
        return request

    # anything that changes the GPU: the recorder must refuse before this is reached
    def nvmlDeviceSetMigMode(self, h, mode):
        self.calls.append("nvmlDeviceSetMigMode")
        return [0]


# ---- helpers the NVML tests share -----------------------------------------------------

import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

TRACES = os.path.join(os.path.dirname(__file__), "..", "..", "listeners", "traces")


def record_fake(gpus: int = 1, samples: int = 6, mem_temp: bool = False, power_samples: bool = True) -> dict:
    """A trace of the listeners' real code against FakeNvml: fixed sample counts, no threads."""
    from listeners import nvml_backend
    from listeners.base import Target
    from listeners.gpm import GpmListener
    from listeners.nvml import NvmlListener
    from listeners.record_trace import RecordingNvml
    from listeners.replay import FORMAT

    rec = RecordingNvml(FakeNvml(gpus=gpus, mem_temp=mem_temp, power_samples=power_samples))
    with nvml_backend.use(rec):
        for cls in (NvmlListener, GpmListener):
            cls.probe(Target(cuda_visible_devices=None))
            listener = cls(Target(cuda_visible_devices=None))
            listener.open()
            for _ in range(samples):
                listener.sample()
            listener.closing_sample()
            listener.close()
    meta = {"derived": False, "fake": True, "cuda_visible_devices": None,
            "sample_counts": {"nvml": samples, "gpm": samples}}
    return {"format": FORMAT, "meta": meta, "calls": rec.calls}


def real_gpu_traces() -> list[str]:
    """Committed recordings made on one real GPU (not derived, with listener samples); these tests read
    GPU 0's calls, and the 2-GPU recording is tests/traces.py's."""
    out = []
    for path in sorted(glob.glob(os.path.join(TRACES, "*.json"))):
        meta = json.load(open(path))["meta"]
        gpus = sum(k.startswith("gpu.") and k.endswith(".name") for k in meta.get("tags", {}))
        if not meta.get("derived") and meta.get("sample_counts", {}).get("nvml") and gpus <= 1:
            out.append(os.path.abspath(path))
    return out


def answers(trace: dict, fn: str, *args) -> list:
    """The recorded results of one call key, decoded (errors as NVMLError objects)."""
    from listeners.replay import _label_of_ref, call_key, decode

    return [decode(r) for r in trace["calls"][fn][call_key(fn, args, _label_of_ref)]]


def gpu_label(trace: dict, index: int = 0):
    from listeners.replay import Ref

    return Ref(trace["calls"]["nvmlDeviceGetHandleByIndex"][f"[{index}]"][0]["ref"])


def replay_from(monkeypatch, path) -> dict:
    """Point RADT_EXT_NVML_REPLAY at `path` with a fresh replay; return the trace."""
    from listeners import nvml_backend

    monkeypatch.setenv(nvml_backend.REPLAY_ENV, str(path))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml_backend.reset()
    return json.load(open(path))


def source_path(param: str, tmp_path) -> str:
    """'fake' → a freshly recorded fake trace in tmp_path; else the committed trace itself."""
    if param != "fake":
        return param
    path = tmp_path / "fake.json"
    with open(path, "w") as fh:
        json.dump(record_fake(), fh)
    return str(path)
