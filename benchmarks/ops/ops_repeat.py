"""The same profile grid measured twice: summed operations against the network, and run against run.

    python -m benchmarks.ops.ops_repeat --a docs/ops/runs/h100_gpu_bound/run1/profiles.csv.gz \
        --b docs/ops/runs/h100_gpu_bound/run2/profiles.csv.gz --out docs/ops/runs/h100_gpu_bound
    python -m benchmarks.ops.ops_repeat --a docs/ops/dataset.csv.gz --b docs/ops/runs/h100_repeat/profiles.csv.gz \
        --gpu H100 --out docs/ops/runs/h100_repeat

Two datasets (`radt-ext ops dataset` files) of the same models, batch sizes, precisions and modes:
per profile, Σ operations / network for time and energy in each (the 10 % goal of
`radt-ext ops check`), and how far the second run's network time and energy per step lie from
the first's. Measured twice on one GPU, that gap is what any prediction between GPUs must beat: a
difference between two GPUs smaller than it cannot be told from a repeat. Only the profiles both hold
are compared (`--gpu` picks one GPU's from datasets of several). Where run B's windows also averaged the
driver's power samples (`timeline_w`), how far that lies from the counter's power is reported too.
"""
from __future__ import annotations

import argparse

from benchmarks.common import fmt, spread, table, write_results

GOAL = 0.10


def compare(a_path: str, b_path: str, gpu: str | None = None) -> dict:
    from radt_ext.ops import dataset as ds

    keys = ["model", "batch", "precision", "mode"]
    a_data, b_data = ds.load(a_path), ds.load(b_path)
    if gpu:
        a_data, b_data = a_data[a_data.gpu == gpu], b_data[b_data.gpu == gpu]
    if a_data.empty or b_data.empty:
        return {"rows": [], "summary": {"profiles": 0}}
    a, b = ds.summed_vs_network(a_data), ds.summed_vs_network(b_data)
    m = a.merge(b, on=keys, suffixes=("_a", "_b"))
    rows = []
    for _, r in m.iterrows():
        rows.append({**{k: r[k] for k in keys},
                     "time_ratio_a": r.time_ratio_a, "time_ratio_b": r.time_ratio_b,
                     "energy_ratio_a": r.energy_ratio_a, "energy_ratio_b": r.energy_ratio_b,
                     "network_time_change_pct": 100 * (r.network_time_b / r.network_time_a - 1),
                     "network_energy_change_pct": 100 * (r.network_energy_b / r.network_energy_a - 1)})
    within = lambda col: sum(abs(x[col] - 1) <= GOAL for x in rows)  # noqa: E731
    summary = {"profiles": len(rows),
               "time_within_goal": [within("time_ratio_a"), within("time_ratio_b")],
               "energy_within_goal": [within("energy_ratio_a"), within("energy_ratio_b")],
               "time_ratio": spread([x[c] for x in rows for c in ("time_ratio_a", "time_ratio_b")]),
               "energy_ratio": spread([x[c] for x in rows for c in ("energy_ratio_a", "energy_ratio_b")]),
               "network_time_change_abs_pct": spread([abs(x["network_time_change_pct"]) for x in rows]),
               "network_energy_change_abs_pct": spread([abs(x["network_energy_change_pct"]) for x in rows])}
    seen = b_data[b_data.timeline_w.notna() & (b_data.power_w > 0)]
    if len(seen):
        off = (100 * (seen.timeline_w / seen.power_w - 1)).abs()
        summary["timeline_vs_counter_abs_pct"] = {**spread(list(off)), "within_5": int((off <= 5).sum()),
                                                  "within_10": int((off <= 10).sum())}
    return {"rows": rows, "summary": summary}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="dataset of the first run")
    ap.add_argument("--b", required=True, help="dataset of the second run (same grid)")
    ap.add_argument("--gpu", default=None, help="compare this GPU's profiles only (e.g. H100)")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)
    res = compare(args.a, args.b, args.gpu)
    if not res["rows"]:
        ap.error("the two datasets share no profile (model, batch, precision, mode); check --gpu")
    s, n = res["summary"], res["summary"]["profiles"]
    text = (f"### Σ operations / network, and run B against run A ({n} profiles in both)\n\n"
            + table(["model", "batch", "precision", "mode", "time A", "time B", "energy A", "energy B",
                     "network time B/A − 1", "network energy B/A − 1"],
                    [[r["model"], r["batch"], r["precision"], r["mode"], fmt(r["time_ratio_a"], 3),
                      fmt(r["time_ratio_b"], 3), fmt(r["energy_ratio_a"], 3), fmt(r["energy_ratio_b"], 3),
                      f"{fmt(r['network_time_change_pct'])} %", f"{fmt(r['network_energy_change_pct'])} %"]
                     for r in res["rows"]])
            + f"\n\nWithin {GOAL:.0%} of the network: time {s['time_within_goal'][0]} / {s['time_within_goal'][1]} of {n}, "
            f"energy {s['energy_within_goal'][0]} / {s['energy_within_goal'][1]} of {n} (run A / run B); "
            f"median ratio time {fmt(s['time_ratio']['median'], 3)}, energy {fmt(s['energy_ratio']['median'], 3)}. "
            f"Run against run: network time |B/A − 1| median {fmt(s['network_time_change_abs_pct']['median'])} %, "
            f"max {fmt(s['network_time_change_abs_pct']['max'])} %; energy median "
            f"{fmt(s['network_energy_change_abs_pct']['median'])} %, max {fmt(s['network_energy_change_abs_pct']['max'])} %.")
    if "timeline_vs_counter_abs_pct" in s:
        t = s["timeline_vs_counter_abs_pct"]
        text += (f" Run B's windows, the driver's power samples against the counter's power: |timeline / counter − 1| "
                 f"median {fmt(t['median'])} %, max {fmt(t['max'])} %, within 5 % in {t['within_5']} of {t['n']} windows.")
    write_results(args.out, "ops_repeat", {**res, "args": vars(args)}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
