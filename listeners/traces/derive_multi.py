"""Build a DERIVED multi-GPU trace from a real single-GPU recording (no multi-GPU machine was used).

    python listeners/traces/derive_multi.py listeners/traces/h200_idle.json listeners/traces/h200x2_derived.json [GPUS]

Multi-GPU machines could not be recorded, so this takes a real one-GPU trace and makes NVML list
GPUS (default 2) GPUs: nvmlDeviceGetCount answers GPUS, index i gives handle `dev{i}`, and every
call recorded for `dev0` answers the same recorded readings for each `dev{i}`. Each copy has an
invented UUID (the recorded one with its last digits replaced by the index). GPM: the trace's
sample buffers are multiplied so every GPU can allocate two, any buffer samples any GPU, and a
metrics request over any two buffers (one twice, once the allocations run past the trace) answers
the recorded metrics. Every reading of GPUs 1.. is a
copy of GPU 0's; the trace's meta says `"derived": true` and names its source. It tests lane and
device code paths (which GPU a variant runs on), not per-GPU values.
"""
from __future__ import annotations

import copy
import json
import sys

from listeners.replay import write_derived


def _uuid(uuid: str, i: int) -> str:
    return uuid if i == 0 else f"{uuid[:-4]}{i:04d}"


def derive(trace: dict, gpus: int = 2) -> dict:
    out = copy.deepcopy(trace)
    calls = out["calls"]
    calls["nvmlDeviceGetCount"] = {"[]": [gpus]}
    handles = calls["nvmlDeviceGetHandleByIndex"]
    dev0 = handles["[0]"][0]["ref"]
    for i in range(1, gpus):
        handles[f"[{i}]"] = [{"ref": f"dev{i}"}]
    for fn, answers in calls.items():
        if fn.startswith("nvmlGpm") or fn == "nvmlDeviceGetHandleByIndex":
            continue
        for key in [k for k in answers if f'{{"ref":"{dev0}"}}' in k]:
            for i in range(1, gpus):
                results = answers[key]
                if fn == "nvmlDeviceGetUUID":
                    results = [_uuid(r, i) for r in results]
                answers[key.replace(f'{{"ref":"{dev0}"}}', f'{{"ref":"dev{i}"}}')] = copy.deepcopy(results)
    _gpm(calls, dev0, gpus)
    out["meta"] = dict(trace.get("meta", {}), derived=True, derived_from=trace.get("meta", {}).get("recorded_at"),
                       derived_by="python listeners/traces/derive_multi.py", gpus=gpus,
                       note=__doc__.split("\n\n")[2])
    return out


def _gpm(calls: dict, dev0: str, gpus: int) -> None:
    alloc = calls.get("nvmlGpmSampleAlloc", {}).get("[]")
    metrics = calls.get("nvmlGpmMetricsGet", {})
    recorded = sorted({s["ref"] for s in alloc or []})
    if len(recorded) < 2:
        return
    a, b = recorded[:2]
    forward = backward = None
    for key, results in metrics.items():
        (request,) = json.loads(key)
        pair = (request["sample1"]["ref"], request["sample2"]["ref"])
        if pair == (a, b):
            forward = (request, results)
        elif pair == (b, a):
            backward = (request, results)
    labels = [f"gpm{n}" for n in range(2 * gpus)]
    alloc[:] = [{"ref": s} for s in labels]
    for i in range(gpus):
        for s in labels:
            key = json.dumps([{"ref": f"dev{i}"}, {"ref": s}], sort_keys=True, separators=(",", ":"))
            calls.setdefault("nvmlGpmSampleGet", {})[key] = [{"ref": s}]
        calls.setdefault("nvmlGpmQueryDeviceSupport", {}).setdefault(
            json.dumps([{"ref": f"dev{i}"}], separators=(",", ":")),
            calls["nvmlGpmQueryDeviceSupport"][json.dumps([{"ref": dev0}], separators=(",", ":"))])
    for s in labels:
        calls.setdefault("nvmlGpmSampleFree", {})[json.dumps([{"ref": s}], separators=(",", ":"))] = [None]
    for x in labels:
        for y in labels:
            source = forward if labels.index(x) <= labels.index(y) else backward  # x == y: past the last
            if source is None:
                continue
            request, results = source
            key = json.dumps([dict(request, sample1={"ref": x}, sample2={"ref": y})], sort_keys=True,
                             separators=(",", ":"))
            metrics[key] = [_relabel(r, x, y) for r in results]


def _relabel(result: dict, s1: str, s2: str) -> dict:
    if "fields" not in result:
        return result  # a recorded error stays an error
    r = copy.deepcopy(result)
    r["fields"]["sample1"], r["fields"]["sample2"] = {"ref": s1}, {"ref": s2}
    return r


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    gpus = int(argv[2]) if len(argv) == 3 else 2
    return write_derived(argv[0], argv[1], lambda trace: derive(trace, gpus))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
