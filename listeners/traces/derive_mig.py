"""Build a DERIVED MIG trace from a real recording (no MIG hardware was used).

    python listeners/traces/derive_mig.py listeners/traces/h100_matmul.json listeners/traces/h100_mig_derived.json

MIG could not be recorded (MIG is off on the GPU we can use, and must stay off), so this
takes a real single-GPU trace and edits its answers so that GPU 0 looks as if MIG were on
with two GPU instances (ids 1 and 2, "3g.40gb"-like):
- nvmlDeviceGetMigMode(gpu0) answers [1, 1]; nvmlDeviceGetMaxMigDeviceCount 7; slots 0 and
  1 hold MIG devices `devmig0`/`devmig1`, slots 2..6 answer NotFound.
- each MIG device has a made-up `MIG-...` UUID, a name, its GPU-instance id, half the
  GPU's memory (the recorded memory readings, halved), and NotSupported for utilization
  (as NVML answers on MIG devices).
- GPM: instance 1 answers the GPU's recorded GPM metrics; instance 2 answers them scaled by
  0.25. Both go through nvmlGpmMigSampleGet keys.
Device-wide readings (power, energy, clocks, temperature) stay the real recorded ones.
Every number here that is not in the source trace is invented; the trace's meta says
`"derived": true` and names its source. It tests MIG naming and code paths, not MIG values.
"""
from __future__ import annotations

import copy
import json
import sys

from listeners.replay import Ref, _label_of_ref, call_key, write_derived

NOT_FOUND = 6
NOT_SUPPORTED = 3
INSTANCES = ((0, "devmig0", 1, 1.0), (1, "devmig1", 2, 0.25))  # slot, label, GPU-instance id, GPM scale


def _key(fn: str, *args) -> str:
    return call_key(fn, args, _label_of_ref)


def derive(trace: dict) -> dict:
    out = copy.deepcopy(trace)
    calls = out["calls"]
    gpu = calls["nvmlDeviceGetHandleByIndex"][_key("nvmlDeviceGetHandleByIndex", 0)][0]["ref"]
    g = Ref(gpu)
    uuid = calls["nvmlDeviceGetUUID"][_key("nvmlDeviceGetUUID", g)][0]
    name = calls["nvmlDeviceGetName"][_key("nvmlDeviceGetName", g)][0]

    def put(fn: str, key: str, results: list) -> None:
        calls.setdefault(fn, {})[key] = results

    put("nvmlDeviceGetMigMode", _key("nvmlDeviceGetMigMode", g), [[1, 1]])
    put("nvmlDeviceGetMaxMigDeviceCount", _key("nvmlDeviceGetMaxMigDeviceCount", g), [7])
    for slot in range(7):
        put("nvmlDeviceGetMigDeviceHandleByIndex", _key("nvmlDeviceGetMigDeviceHandleByIndex", g, slot),
            [{"nvml_error": NOT_FOUND}])

    memory = calls.get("nvmlDeviceGetMemoryInfo", {}).get(_key("nvmlDeviceGetMemoryInfo", g), [])
    gpm_alloc = calls.setdefault("nvmlGpmSampleAlloc", {}).setdefault("[]", [])
    recorded_gpm_labels = sorted({s["ref"] for s in gpm_alloc})
    metrics = calls.get("nvmlGpmMetricsGet", {})

    for slot, label, gi, scale in INSTANCES:
        m = Ref(label)
        put("nvmlDeviceGetMigDeviceHandleByIndex", _key("nvmlDeviceGetMigDeviceHandleByIndex", g, slot),
            [{"ref": label}])
        put("nvmlDeviceGetGpuInstanceId", _key("nvmlDeviceGetGpuInstanceId", m), [gi])
        put("nvmlDeviceGetUUID", _key("nvmlDeviceGetUUID", m),
            [f"MIG-{uuid[4:-4]}{gi:04d}"])  # invented, shaped like a MIG UUID
        put("nvmlDeviceGetName", _key("nvmlDeviceGetName", m), [f"{name} MIG 3g.40gb"])
        put("nvmlDeviceGetMemoryInfo", _key("nvmlDeviceGetMemoryInfo", m), [_halve(r) for r in memory])
        put("nvmlDeviceGetUtilizationRates", _key("nvmlDeviceGetUtilizationRates", m),
            [{"nvml_error": NOT_SUPPORTED}])

    # GPM: the MIG-mode listener allocates two samples per instance, in instance order.
    labels = [f"gpm{n}" for n in range(2 * len(INSTANCES))]
    gpm_alloc[:] = [{"ref": lab} for lab in labels]
    if len(recorded_gpm_labels) >= 2:
        a, b = recorded_gpm_labels[:2]  # the recorded GPU's two sample buffers
        for key, results in list(metrics.items()):
            (request,) = json.loads(key)
            pair = (request["sample1"]["ref"], request["sample2"]["ref"])
            if pair not in ((a, b), (b, a)):
                continue
            for i, (_slot, _label, _gi, scale) in enumerate(INSTANCES):
                s1, s2 = labels[2 * i], labels[2 * i + 1]
                new = (s1, s2) if pair == (a, b) else (s2, s1)
                new_key = json.dumps([dict(request, sample1={"ref": new[0]}, sample2={"ref": new[1]})],
                                     sort_keys=True, separators=(",", ":"))
                metrics[new_key] = [_scaled(r, new[0], new[1], scale) for r in results]
        # any buffer may sample any instance (a visible MIG device gets buffers gpm0/gpm1)
        for _slot, _label, gi, _scale in INSTANCES:
            for s in labels:
                put("nvmlGpmMigSampleGet", _key("nvmlGpmMigSampleGet", g, gi, Ref(s)), [{"ref": s}])
        for s in labels:
            put("nvmlGpmSampleFree", _key("nvmlGpmSampleFree", Ref(s)), [None])
    out["meta"] = dict(trace.get("meta", {}), derived=True, derived_from=trace.get("meta", {}).get("recorded_at"),
                       derived_by="python listeners/traces/derive_mig.py", note=__doc__.split("\n\n")[2])
    return out


def _scaled(result: dict, s1: str, s2: str, scale: float) -> dict:
    if "fields" not in result:
        return result  # a recorded error stays an error
    r = copy.deepcopy(result)
    r["fields"]["sample1"], r["fields"]["sample2"] = {"ref": s1}, {"ref": s2}
    for metric in r["fields"]["metrics"]:
        metric["fields"]["value"] *= scale
    return r


def _halve(result: dict) -> dict:
    if "fields" not in result:
        return result
    r = copy.deepcopy(result)
    f = r["fields"]
    f["total"], f["used"] = f["total"] // 2, f["used"] // 2
    f["free"] = f["total"] - f["used"]
    return r


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return write_derived(argv[0], argv[1], derive)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
