"""Build a DERIVED trace for GPU settings (power limit, locked clocks, near CPUs) from a real recording.

    python listeners/traces/derive_settings.py listeners/traces/h200_matmul.json /tmp/h200_settings.json

The GPUs we record on must keep their settings as they are, so no setter call was recorded. This takes
a real single-GPU trace and adds, for GPU 0:
- the power limit's range 200..700 W (nvmlDeviceGetPowerManagementLimitConstraints) and the enforced limit
  (the recorded limit), the highest graphics clock 1980 MHz (the recorded clock under load);
- the CPUs near it (nvmlDeviceGetCpuAffinity, one 64-bit word): `near_cpus`, default CPU 1;
- an answer for each setter (nvmlDeviceSetPowerManagementLimit, nvmlDeviceSetGpuLockedClocks,
  nvmlDeviceResetGpuLockedClocks): permitted (None), or NVML_ERROR_NO_PERMISSION with `permitted=False`.
The range and the near CPUs are invented; the trace's meta says `"derived": true` and names its source.
It tests the settings' code paths and their restore, not an H200's values.
"""
from __future__ import annotations

import copy
import json
import sys

from listeners.replay import Ref, _label_of_ref, call_key, read_recorded

NO_PERMISSION = 4
CLOCK_GRAPHICS = 0


def derive(trace: dict, permitted: bool = True, near_cpus: tuple[int, ...] = (1,)) -> dict:
    out = copy.deepcopy(trace)
    calls = out["calls"]
    handles = calls["nvmlDeviceGetHandleByIndex"]
    gpu = Ref(handles[call_key("nvmlDeviceGetHandleByIndex", (0,), _label_of_ref)][0]["ref"])
    limit = calls["nvmlDeviceGetPowerManagementLimit"][call_key("nvmlDeviceGetPowerManagementLimit", (gpu,),
                                                                _label_of_ref)][0]

    def put(fn: str, args: tuple, results: list) -> None:
        calls.setdefault(fn, {})[call_key(fn, args, _label_of_ref)] = results

    put("nvmlDeviceGetPowerManagementLimitConstraints", (gpu,), [[200_000, 700_000]])
    put("nvmlDeviceGetEnforcedPowerLimit", (gpu,), [limit])
    put("nvmlDeviceGetMaxClockInfo", (gpu, CLOCK_GRAPHICS), [1980])
    put("nvmlDeviceGetCpuAffinity", (gpu, 1), [[sum(1 << c for c in near_cpus)]])
    answer = None if permitted else {"nvml_error": NO_PERMISSION}
    put("nvmlDeviceSetPowerManagementLimit", (gpu, 0), [answer])
    put("nvmlDeviceSetGpuLockedClocks", (gpu, 0, 0), [answer])
    put("nvmlDeviceResetGpuLockedClocks", (gpu,), [answer])
    out["meta"] = {**out.get("meta", {}), "derived": True, "derived_from": out.get("meta", {}).get("recorded_at"),
                   "derived_by": "listeners/traces/derive_settings.py", "permitted": permitted,
                   "near_cpus": list(near_cpus)}
    return out


def main(argv: list[str]) -> int:
    source, target = argv[1], argv[2]
    trace = read_recorded(source)
    if trace is None:
        raise SystemExit(f"{source}: not a recorded trace")
    with open(target, "w") as fh:
        json.dump(derive(trace), fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
