"""A queue's rates as measured on the GPU, for the packing simulator: each job's phases alone (start-up,
active phase, wind-down), its rate of work, peak memory and GPU activity, and every pair the store measured
side by side (the parent tag `collocation.pairs`; in stores written before it, the members' active-phase
slowdowns of each two-job group), and every start-up measured beside an active phase (`boots`, newest first).

    python -m benchmarks.packing.queue_rates --store sqlite:///mlflow.db --experiment pack-bound-b \
        --card "NVIDIA H200" --out tests/radt_ext/packing/fixtures/queue_b_rates.json

tests/radt_ext/packing/test_queue_replay.py plans each committed queue and plays the plan through
radt_ext/packing/chains.simulate with the measured pairs.
"""
from __future__ import annotations

import argparse
import json

from mlflow.tracking import MlflowClient

from radt_ext.collocation import pairs as pair_tags
from radt_ext.packing import chains, profiles

FIELDS = ("throughput", "mem_mib", "sm_pct", "dram_pct", "busy_pct", "cpu_pct", "power_w")


def extract(uri: str, experiment: str, finished_only: bool = False) -> dict:
    """finished_only: pairs of FINISHED groups only (a group stopped at a call's limit measured a shorter span)."""
    client = MlflowClient(uri)
    known = profiles.read(client, experiment)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], "", max_results=50000)
    name_of = {}
    for r in runs:
        h = r.data.tags.get("sweep.workload_hash")
        if h and r.data.tags.get("collocation.mode") == "exclusive":
            name_of[h] = r.data.tags.get("collocation.workload", h[:8]).rsplit("-", 1)[0]
    jobs = {}
    for key, p in known.profiles.items():
        ph = chains.phases(p)
        jobs[name_of.get(key, key[:8])] = {"startup": round(ph.startup, 3), "active": round(ph.active, 3),
                                           "tail": round(ph.tail, 3),
                                           **{f: (round(getattr(p, f), 4) if getattr(p, f) is not None else None)
                                              for f in FIELDS}}
    by_parent: dict[str, list] = {}
    for r in runs:
        parent = r.data.tags.get("mlflow.parentRunId")
        if parent:
            by_parent.setdefault(parent, []).append(r)
    measured = []
    for r in runs:
        mode = r.data.tags.get("collocation.mode")
        kids = by_parent.get(r.info.run_id, [])
        if mode not in ("naive", "mps") or len(kids) < 2 or (finished_only and r.info.status != "FINISHED"):
            continue
        names = {k.data.tags.get("collocation.workload"): name_of.get(k.data.tags.get("sweep.workload_hash"))
                 for k in kids}
        found = pair_tags.read(r.data.tags.get(pair_tags.TAG))
        if not found and len(kids) == 2:  # before pairs were tagged: the members' active-phase slowdowns
            x = [k.data.metrics.get("summary/active_slowdown_ratio", k.data.metrics.get("summary/slowdown_ratio"))
                 for k in kids]
            if None not in x:
                found = [{"a": kids[0].data.tags.get("collocation.workload"),
                          "b": kids[1].data.tags.get("collocation.workload"), "slowdowns": x}]
        for p in found:
            a, b = names.get(p["a"]), names.get(p["b"])
            if a and b:
                measured.append({"a": a, "b": b, "mode": mode, "slowdowns": [round(v, 4) for v in p["slowdowns"]]})
    # what a job's start-up cost the active phase beside it (the parent tag `collocation.startup_pairs`)
    boots = [{"active": name_of[b.active_key], "starting": name_of[b.starting_key], "mode": b.mode,
              "slowdown": round(b.slowdown, 4)}
             for b in known.boots if b.active_key in name_of and b.starting_key in name_of]
    return {"experiment": experiment, "jobs": jobs, "pairs": measured, "boots": boots}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--experiment", required=True)
    ap.add_argument("--card", default="")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    data = {"card": args.card, **extract(args.store, args.experiment)}
    with open(args.out, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    print(f"{len(data['jobs'])} jobs, {len(data['pairs'])} measured pairs, {len(data['boots'])} measured start-ups "
          f"-> {args.out}")


if __name__ == "__main__":
    main()
