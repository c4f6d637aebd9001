"""The host-aware per-operation predictor on networks it has never seen, and how well a measurement repeats,
from two GPU machines' results of `benchmarks/ops/ops_host.sh` (one H100 machine, one H200 machine).

    python -m benchmarks.ops.ops_host grid-args        # --models/--batches of the second suite (examples/unseen)
    python -m benchmarks.ops.ops_host report [--h100 DIR] [--h200 DIR] [--out docs/ops]

`report` reads each machine's folder (default `docs/ops/host/h100` and `docs/ops/host/h200`: host.json,
suite2.csv.gz, repeat1.csv.gz, repeat2.csv.gz, rounds.csv.gz) and OUT (the dataset the predictor is fitted on,
`heldout/lofo.json` for the interval's error, `heldout/h100|h200` for the first suite) and prints:

1. the two hosts: each one's benchmark and their ratio per phase;
2. the second suite moved each way between the machines by the host-aware predictor (both hosts as
   `radt-ext ops host` measured them on each machine: the ratio of section 1), by the same with both hosts as
   their profiles recorded them, by the same with the target's host unknown (the source's assumed), and by
   the host-blind predictor before it: median, 90th percentile and
   largest |error| of time and energy per step, how often the measured value fell inside the interval, and
   every case where the prediction ranked the two GPUs against what both measured beyond its interval;
3. the first held-out suite (examples/heldout) the same way, from its committed profiles (measured before
   profiles recorded their host: host-blind) and both suites together, against the goals;
4. how well the repeat set repeats on each machine (two fresh processes), and what the rounds' host record
   says about rounds that ran slower than their profile's fastest.

A folder whose profiles came from the CPU (a dry run, `DRY=1`) stands for the machine its option names.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from benchmarks.ops.ops_heldout import CONFIG, KEYS, MACHINES, _errors, _inside, _pct, fastest_round, moved, suite_errors
from benchmarks.ops.ops_heldout import grid_args as heldout_grid_args, suite_parser

GOALS = {"time": (0.03, 0.08), "energy": (0.04, 0.10)}  # median, 90th percentile of |error|
SLOW = 0.05  # a round this much slower than its profile's fastest


def grid_args() -> str:
    """The second suite's --models and --batches for radt_ext.ops.grid (examples/unseen)."""
    from examples.unseen import BATCHES

    return heldout_grid_args(BATCHES)


def load_machine(folder: Path, gpu: str) -> dict:
    """One machine's results: its host benchmark and datasets, relabelled to `gpu` where a dry run made them."""
    from radt_ext.ops import dataset as ds

    out = {"host": json.loads((folder / "host.json").read_text()), "folder": folder, "dry": False}
    for label in ("suite2", "repeat1", "repeat2"):
        path = folder / f"{label}.csv.gz"
        if path.is_file():
            df = ds.load(path)
            if set(df.gpu) == {"cpu"}:
                df["gpu"], out["dry"] = gpu, True
            out[label] = df
    rounds = folder / "rounds.csv.gz"
    out["rounds"] = pd.read_csv(rounds) if rounds.is_file() else pd.DataFrame()
    return out


def move(models, both: pd.DataFrame, error: tuple[float, float], hosts: dict[str, dict],
         records: dict[str, dict] | None = None) -> pd.DataFrame:
    """Every configuration measured on both machines moved each way by host-aware predictors and the host-blind
    one (`blind`). Host-aware: `aware`, both machines' hosts as `radt-ext ops host` measured them (`hosts`: the
    ratio section 1 prints); `records`, both as their profiles recorded them (`records`: each machine's median
    profile record, as `best-gpu --host GPU` takes it from a dataset; left out where None); `assumed`, the
    target's host unknown (the source's stands for it). The two hosts of a ratio always come from the same
    kind of measurement: a profile's record is taken in a warm profiling process and the command's in a fresh
    one, and on one machine the two differed by up to 1.5x, so a ratio of one kind over the other is neither
    machine's."""
    def predictors(a: str, b: str) -> list[tuple[str, dict]]:
        out = [("aware", {"target_host": hosts[b], "source_host": hosts[a]}), ("assumed", {}),
               ("blind", {"use_host": False})]
        if records is not None:
            out.insert(1, ("records", {"target_host": records[b], "source_host": records[a]}))
        return out

    return moved(models, both, error, predictors)


def print_errors(res: pd.DataFrame, error: tuple[float, float], label: str) -> dict:
    """The errors per direction and both, the interval's hits and the misrankings; returns `_errors(res)`."""
    errs = _errors(res)
    for d, e in errs.items():
        print(f"{label}: {d} ({e['cases']} cases): time median {_pct(e['time']['median'])}, p90 "
              f"{_pct(e['time']['p90'])}, max {_pct(e['time']['max'])}; energy median {_pct(e['energy']['median'])}, "
              f"p90 {_pct(e['energy']['p90'])}, max {_pct(e['energy']['max'])}")
    inside = _inside(res, {"time": error[0], "energy": error[1]})
    print(f"{label}: measured inside the interval: time {inside['time']}, energy {inside['energy']}; ranked the two "
          f"GPUs against what both measured, beyond the interval: time {inside['time_misranked']}, energy "
          f"{inside['energy_misranked']}")
    return {**errs, "inside": inside}


def goals(errs: dict) -> str:
    """One line: each direction's medians and 90th percentiles against the goals."""
    out = []
    for d in ("H100->H200", "H200->H100"):
        if d not in errs:
            continue
        for m, (med, p90) in GOALS.items():
            e = errs[d][m]
            ok = e["median"] <= med and e["p90"] <= p90
            out.append(f"{d} {m} {_pct(e['median'])}/{_pct(e['p90'])} {'met' if ok else 'MISSED'}")
    misranked = [v for k, v in errs["inside"].items() if k.endswith("misranked") and v != "none"]
    out.append("no ranking beyond the interval" if not misranked else "ranked beyond the interval: " + "; ".join(misranked))
    return "; ".join(out)


def repeatability(m: dict, gpu: str) -> dict:
    """Network time and energy per step of the repeat set, one fresh process against the other."""
    out = {}
    if "repeat1" not in m or "repeat2" not in m:
        print(f"{gpu}: the repeat set was not measured twice")
        return out
    net = [m[k][m[k].op == "network"].groupby(KEYS).agg(time_ms=("time_ms", "sum"), energy_mj=("energy_mj", "sum"))
           for k in ("repeat1", "repeat2")]
    both = net[0].merge(net[1], left_index=True, right_index=True, suffixes=("_1", "_2"))
    for metric in ("time_ms", "energy_mj"):
        d = (both[f"{metric}_1"] / both[f"{metric}_2"] - 1).abs()
        out[metric] = {"median": float(d.median()), "max": float(d.max())}
        print(f"{gpu}: repeat set, {metric.split('_')[0]} per step, two fresh processes: |difference| median "
              f"{_pct(d.median())}, max {_pct(d.max())} over {len(d)} configurations; "
              + ", ".join(f"{k[1].rpartition(':')[2]} {k[3]} {k[4]} {_pct(v)}" for k, v in d.items()))
    return out


STATISTICS = {  # a network phase's time per step from its rounds, as the profiler might take it
    "fastest tenth of the chunks (as profiled)": lambda g: g.time_fast_ms.min(),
    "fastest round (until 2026-11-26)": lambda g: g.time_ms.min(),
    "median round (until 2026-11-25)": lambda g: g.time_ms.median(),
}


def statistics_repeat(m: dict, gpu: str) -> None:
    """How well each way of taking a step's time from its rounds repeats across the two processes."""
    r = m["rounds"]
    if r.empty or "time_fast_ms" not in r.columns:
        return
    r = r[r.set.isin(["repeat1", "repeat2"])]
    for name, stat in STATISTICS.items():
        per = r.groupby(["set", *CONFIG, "phase"]).apply(stat, include_groups=False).groupby(["set", *CONFIG]).sum()
        wide = per.unstack("set").dropna()
        if wide.empty or wide.shape[1] < 2:
            continue
        d = (wide["repeat1"] / wide["repeat2"] - 1).abs()
        print(f"{gpu}: repeat set, time per step by the {name}: |difference| median {_pct(d.median())}, "
              f"max {_pct(d.max())}")


def round_account(m: dict, gpu: str) -> None:
    """What the rounds' host record says about the rounds that ran slower than their profile's fastest."""
    r = m["rounds"]
    if r.empty or "host_ms" not in r.columns:
        print(f"{gpu}: no host record in the rounds")
        return
    group = ["set", "profile", "phase"]
    r = r.assign(slower=r.time_ms / r.groupby(group).time_ms.transform("min") - 1,
                 pace=r.before_dispatch_us / r.groupby(group).before_dispatch_us.transform("median") - 1,
                 issue_share=(r.host_ms / r.time_ms).clip(upper=1))
    slow, steady = r[r.slower > SLOW], r[r.slower <= SLOW]

    def describe(x: pd.DataFrame) -> str:
        if x.empty:
            return "none"
        parts = [f"{len(x)} rounds", f"host dispatch pace before the window {_pct(x.pace.median())} against the "
                 f"profile's median", f"issue time {_pct(x.issue_share.median())} of the step"]
        for col, what in (("host_cpu_share", "launching thread on its CPU"), ("host_preempted", "preemptions"),
                          ("host_moved", "moved CPU"), ("meter_reads", "meter reads")):
            if col in x.columns:
                parts.append(f"{what} {x[col].median():.3g}")
        return ", ".join(parts)
    print(f"{gpu}: rounds {SLOW:.0%} or more slower than their profile's fastest: {len(slow)} of {len(r)} "
          f"({(slow.precision == 'bf16').sum()} bf16); median of those: {describe(slow)}")
    print(f"{gpu}: the other rounds, median: {describe(steady)}")
    if "during_sm_clock_mhz" in r.columns:
        held = r[r.during_throttle.fillna("none") != "none"]
        print(f"{gpu}: rounds with a throttle reason inside the window: {len(held)} of {len(r)}, a median "
              f"{_pct(held.slower.median()) if len(held) else 'n/a'} slower than their profile's fastest")


def report(out: Path, folders: dict[str, Path]) -> dict:
    from radt_ext.ops import dataset as ds, host as hosts, predict

    pd.set_option("display.width", 200)
    machines = {g: load_machine(f, g) for g, f in folders.items()}
    summary: dict = {}
    print("== 1. The hosts ==")
    for g, m in machines.items():
        h = m["host"]
        print(f"{g} machine{' (a dry run on the CPU)' if m['dry'] else ''}: {hosts.label(h)}; "
              + ", ".join(f"{k} {h[k]:.2f}" for k in hosts.FIGURES if math.isfinite(h.get(k, math.nan)))
              + f"; CPU clock {h.get('cpu_mhz', 'n/a')} MHz, batches within {_pct(h.get('spread', math.nan))}")
    ratio = {p: hosts.ratio(machines["H100"]["host"], machines["H200"]["host"], p) for p in ("inference", "training")}
    print("H200 machine's host over the H100 machine's, per operation: "
          + ", ".join(f"{p} {v:.3f}" for p, v in ratio.items()))
    summary["host_ratio"] = ratio
    records = {g: predict.machine_host(m["suite2"], g) for g, m in machines.items() if "suite2" in m}
    if len(records) == len(machines) and all(records.values()):
        for g, r in records.items():
            print(f"{g} machine, its second-suite profiles' own records (median): {hosts.label(r)}; "
                  + ", ".join(f"{k} {r[k]:.2f}" for k in hosts.FIGURES if math.isfinite(r.get(k, math.nan))))
        rec_ratio = {p: hosts.ratio(records["H100"], records["H200"], p) for p in ("inference", "training")}
        print("H200 machine's host over the H100 machine's, by the profiles' records: "
              + ", ".join(f"{p} {v:.3f}" for p, v in rec_ratio.items()))
        summary["host_ratio_records"] = rec_ratio
    else:
        records = None

    models = predict.fit(ds.load(out / "dataset.csv.gz"))
    error = tuple(json.loads((out / "heldout" / "lofo.json").read_text())["interval"][m] for m in ("time", "energy"))
    print("\n== 2. The second suite (examples/unseen, written after the predictor was chosen), both machines ==")
    suite2 = pd.concat([m["suite2"] for m in machines.values() if "suite2" in m], ignore_index=True)
    res = move(models, suite2, error, {g: m["host"] for g, m in machines.items()}, records)
    if res.empty:
        print("no configuration of the second suite measured on both machines")
        return summary
    for name, what in (("blind", "host-blind (before)"), ("assumed", "host-aware, target's host unknown"),
                       ("records", "host-aware, both hosts by their profiles' records"),
                       ("aware", "host-aware, target's host measured")):
        if (res.predictor == name).any():
            summary[f"suite2_{name}"] = print_errors(res[res.predictor == name], error, what)
    aware = res[res.predictor == "aware"].copy()
    blind = res[res.predictor == "blind"][CONFIG + ["source", "target", "pred_time_ms", "time_error"]]
    aware = aware.merge(blind, on=CONFIG + ["source", "target"], suffixes=("", "_blind"))
    aware["model"] = aware.model.map(lambda m: m.rpartition(":")[2])
    aware["measured_change"] = aware.time_ms / aware.source_time_ms - 1
    aware["predicted_change"] = aware.pred_time_ms / aware.source_time_ms - 1
    aware["blind_change"] = aware.pred_time_ms_blind / aware.source_time_ms - 1
    print(aware[["model", "precision", "mode", "source", "host_share", "host_ratio", "measured_change",
                 "predicted_change", "blind_change", "time_error", "energy_error"]].round(3).to_string(index=False))

    print("\n== 3. Both suites against the goals (time median <= 3 %, p90 <= 8 %; energy median <= 4 %, p90 <= 10 %) ==")
    first = None
    heldout = out / "heldout"
    if (heldout / "h200" / "suite.csv.gz").is_file():
        rounds = pd.read_csv(heldout / "h100" / "rounds.csv.gz")
        h100 = fastest_round(ds.load(heldout / "h100" / "suite.csv.gz"), rounds, "suite")
        first = suite_errors(out, h100, rounds, title="the first suite (examples/heldout), host-blind:")
    print(f"second suite, host-aware: {goals(summary['suite2_aware'])}")
    if first is not None and not first.empty:
        summary["suite1"] = _errors(first) | {"inside": _inside(first, {"time": error[0], "energy": error[1]})}
        print(f"first suite (its profiles predate the host record: host-blind): {goals(summary['suite1'])}")
        together = pd.concat([first, res[res.predictor == "aware"][first.columns.intersection(res.columns)]],
                             ignore_index=True)
        summary["both_suites"] = _errors(together) | {"inside": _inside(together, {"time": error[0], "energy": error[1]})}
        print(f"both suites together: {goals(summary['both_suites'])}")

    print("\n== 4. Repeatability: the repeat set in two fresh processes on each machine ==")
    for g, m in machines.items():
        summary[f"repeat_{g}"] = repeatability(m, g)
        statistics_repeat(m, g)
        round_account(m, g)
    return summary


def main(argv=None) -> int:
    ap, sub = suite_parser(__doc__, "second suite")
    q = sub.add_parser("report", help="print every figure from the two machines' results (seconds)")
    q.add_argument("--h100", default="docs/ops/host/h100", help="the H100 machine's results of ops_host.sh")
    q.add_argument("--h200", default="docs/ops/host/h200", help="the H200 machine's results of ops_host.sh")
    q.add_argument("--out", default="docs/ops", help="folder with dataset.csv.gz and heldout/")
    q.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    if args.cmd == "grid-args":
        print(grid_args())
        return 0
    folders = {"H100": Path(args.h100), "H200": Path(args.h200)}
    for g, f in folders.items():
        if not (f / "host.json").is_file():
            ap.error(f"--{g.lower()} {f}: no host.json there; copy the results of benchmarks/ops/ops_host.sh from the "
                     f"{g} machine into it")
    summary = report(Path(args.out), folders)
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
