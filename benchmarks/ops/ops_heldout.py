"""The held-out suite: its GPU data packed, the predictor evaluated on networks it has not seen, and
every figure docs/ops.md quotes about it.

    python -m benchmarks.ops.ops_heldout grid-args                     # --models/--batches of the suite
    python -m benchmarks.ops.ops_heldout pack --from suite=DIR --from repeat=DIR --out RESULTS
    python -m benchmarks.ops.ops_heldout evaluate [--out docs/ops]     # minutes: the predictor, before and after
    python -m benchmarks.ops.ops_heldout report [--out docs/ops]       # seconds: every figure, from committed files

`evaluate` validates both prediction methods with each family of the dataset held out
(OUT/heldout/lofo_<method>.csv, OUT/heldout/lofo.json with the intervals' errors), the default method with
each model held out (OUT/validation.json|csv and the figure), and predicts the suite, measured on an H100,
on the H200 with intervals (OUT/heldout/suite_predictions.csv). `report` reads those and OUT/heldout/h100/
(the suite's, the repeat's and the dataset configurations' profiles and rounds) and prints: how far a
measurement repeats (in one machine, across machines) and what moved it; summed operations against the
network on the suite; the held-out errors per direction; the suite's predictions.

`pack` writes OUT/<label>.csv.gz (`radt-ext ops dataset` files, one per folder), OUT/rounds.csv.gz (one
row per network round: its time, energy, power and the SM/memory clocks, performance state, temperature,
power and throttle reasons before its window and inside it, with the profile's warm-up and library
settings) and prints each profile's network time, its rounds' spread and the clocks seen.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

KEYS = ["gpu", "model", "batch", "precision", "mode"]
CONFIG = KEYS[1:]
FULL_CLOCK_MHZ = 1950  # an SM clock at or above this inside a window: not held back by power or heat

# what each round row carries from its profile's facts
PROFILE_FACTS = ("gpu_name", "driver", "power_limit_w", "warmup_s", "warmup_steps", "net_rounds", "net_window_s",
                 "cudnn_benchmark", "cudnn_version", "tf32_matmul", "tf32_cudnn", "cublas_workspace_config",
                 "blas_library", "matmul_precision", "profile_s")


def grid_args(batches: dict[str, int] | None = None) -> str:
    """A suite's --models and --batches for radt_ext.ops.grid; by default the held-out suite's (examples/heldout)."""
    if batches is None:
        from examples.heldout import BATCHES as batches
    return (f"--models {','.join(batches)} --extra= "
            f"--batches {','.join(f'{m}={b}' for m, b in batches.items())}")


def suite_parser(doc: str, suite: str):
    """A suite script's command line, (parser, its subcommands): `grid-args` prints the suite's grid arguments."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("grid-args", help=f"the {suite}'s --models and --batches for radt_ext.ops.grid")
    return ap, sub


def rounds(label: str, folder: Path) -> list[dict]:
    out = []
    for meta_path in sorted(folder.glob("*.json")):
        meta = json.loads(meta_path.read_text())
        base = {"set": label, "profile": meta_path.stem, "model": meta.get("model"), "batch": meta.get("batch"),
                "precision": meta.get("precision"), "mode": meta.get("mode"),
                **{k: meta.get(k) for k in PROFILE_FACTS},
                **{f"idle_{k}": v for k, v in (meta.get("state_before") or {}).items()}}
        out += [{**base, **r} for r in meta.get("round_details", [])]
    return out


def pack(folders: list[tuple[str, Path]], out: Path) -> list[Path]:
    from radt_ext.ops import dataset as ds, store

    out.mkdir(parents=True, exist_ok=True)
    written, rows = [], []
    for label, folder in folders:
        if not any(folder.glob("*.json")):
            print(f"{label}: no profiles in {folder}")
            continue
        df = ds.from_profiles(store.read_dir(folder))
        written.append(ds.write(df, out / f"{label}.csv.gz"))
        rows += rounds(label, folder)
        net = df[df.op == "network"].groupby(ds.KEYS, sort=False).agg(
            time_ms=("time_ms", "sum"), energy_mj=("energy_mj", lambda e: e.sum(min_count=1)),
            spread=("spread", "max"))
        print(f"{label}: {net.shape[0]} profiles")
        print(net.round(4).to_string())
    if rows:
        r = pd.DataFrame(rows)
        written.append(ds.write(r, out / "rounds.csv.gz"))
        cols = [c for c in ("before_sm_clock_mhz", "during_sm_clock_mhz", "before_temp_c", "during_temp_c",
                            "during_power_w", "during_throttle") if c in r.columns]
        if cols:
            print(r.groupby(["set", "profile"], sort=False)[cols].agg(lambda s: "/".join(map(str, s.unique()[:3])))
                  .to_string())
    return written


def fastest_round(df: pd.DataFrame, rounds: pd.DataFrame, label: str) -> pd.DataFrame:
    """`df` with every network row restated as its fastest round (time, energy and power) and with its
    rounds' energy spread, as the profiler now combines rounds; rows of profiles without recorded rounds
    stay as they are."""
    from radt_ext.ops.network import at_pace

    r = rounds[rounds.set == label]
    best = r.loc[r.groupby(CONFIG + ["phase"]).time_ms.idxmin(), CONFIG + ["phase", "time_ms"]]
    energy = r.groupby(CONFIG + ["phase"]).energy_mj
    pace = r.groupby(CONFIG + ["phase"]).apply(lambda g: at_pace(list(g.time_ms), list(g.energy_mj)),
                                               include_groups=False).rename("energy_mj").reset_index()
    best = best.merge(pace, on=CONFIG + ["phase"]).assign(power_w=lambda b: b.energy_mj / b.time_ms)
    best = best.merge(((energy.max() - energy.min()) / energy.median()).rename("energy_spread").reset_index(),
                      on=CONFIG + ["phase"])
    out = df.copy()
    net = out.op == "network"
    m = out[net].reset_index().merge(best, on=CONFIG + ["phase"], suffixes=("", "_fast")).set_index("index")
    for c in ("time_ms", "energy_mj", "power_w", "energy_spread"):
        out.loc[m.index, c] = m[f"{c}_fast"]
    return out


def _network(df: pd.DataFrame) -> pd.DataFrame:
    return df[df.op == "network"].groupby(KEYS, sort=False).agg(
        time_ms=("time_ms", "sum"), energy_mj=("energy_mj", "sum"), spread=("spread", "max")).reset_index()


def _pct(x: float) -> str:
    return f"{x:.1%}" if math.isfinite(x) else "n/a"


def _errors(res: pd.DataFrame) -> dict:
    """median and 90th percentile |error| of time and energy, per direction and over both."""
    out = {}
    for (src, tgt), g in [(("all", "all"), res), *res.groupby(["source", "target"])]:
        out[f"{src}->{tgt}" if src != "all" else "both"] = {
            m: {"median": float(g[f"{m}_error"].median()), "p90": float(g[f"{m}_error"].quantile(0.9)),
                "max": float(g[f"{m}_error"].max())} for m in ("time", "energy")} | {"cases": len(g)}
    return out


def _suite_profiles(heldout: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    from radt_ext.ops import dataset as ds

    rounds = pd.read_csv(heldout / "h100" / "rounds.csv.gz")
    return fastest_round(ds.load(heldout / "h100" / "suite.csv.gz"), rounds, "suite"), rounds


def evaluate(out: Path) -> None:
    from benchmarks.ops.ops_dataset import figures
    from radt_ext.ops import dataset as ds, predict

    df = ds.load(out / "dataset.csv.gz")
    heldout = out / "heldout"
    summary = {}
    for method in predict.METHODS:
        res = predict.validate(df, hold_out="family", method=method,
                               progress=lambda m: print(f"{method}: held out {m}", flush=True))
        res.to_csv(heldout / f"lofo_{method}.csv", index=False, float_format="%.6g")
        summary[method] = _errors(res)
    # the interval's error: the default method's 90th percentile with the family held out, both directions
    both = summary[predict.METHODS[0]]["both"]
    summary["interval"] = {m: round(both[m]["p90"], 4) for m in ("time", "energy")}
    (heldout / "lofo.json").write_text(json.dumps(summary, indent=1) + "\n")
    res = predict.validate(df, progress=lambda m: print(f"model held out: {m}", flush=True))
    (out / "validation.json").write_text(json.dumps(predict.summary(res), indent=1) + "\n")
    res.to_csv(out / "validation.csv", index=False, float_format="%.6g")
    for f in figures(df, res, out):
        print("wrote", f)
    suite, _ = _suite_profiles(heldout)
    models = predict.fit(df)
    error = (summary["interval"]["time"], summary["interval"]["energy"])
    rows = []
    for key, p in suite.groupby(KEYS):
        pred = predict.predict(models, p, key[0], "H200", error=error)
        t_lo, t_hi = pred.interval("time")
        e_lo, e_hi = pred.interval("energy")
        measured = predict._net(p)
        rows.append({**dict(zip(KEYS, key)), "target": "H200", "source_time_ms": measured[0],
                     "source_energy_mj": measured[1], "spread": pred.spread, "energy_spread": pred.energy_spread,
                     "pred_time_ms": pred.time_ms,
                     "time_low_ms": t_lo, "time_high_ms": t_hi, "pred_energy_mj": pred.energy_mj,
                     "energy_low_mj": e_lo, "energy_high_mj": e_hi})
    pd.DataFrame(rows).to_csv(heldout / "suite_predictions.csv", index=False, float_format="%.6g")
    print(json.dumps(summary, indent=1))


def repeatability(folder: Path, gpu: str, data: pd.DataFrame) -> None:
    """Section 1 for one GPU's run: suite against repeat, dataset configurations against the dataset, and
    what the rounds' recorded state says about the slow ones."""
    from radt_ext.ops import dataset as ds

    rounds = pd.read_csv(folder / "rounds.csv.gz")
    recorded, repeat, again = (ds.load(folder / f"{f}.csv.gz") for f in ("suite", "repeat", "dataset"))
    short = lambda m: m.rpartition(":")[2]  # noqa: E731
    print(f"== 1. Repeatability ({gpu}: suite against its repeat in a fresh process; four dataset configurations "
          f"against another {gpu} machine) ==")
    for name, a, b in (("one machine", (recorded, "suite"), (repeat, "repeat")),
                       ("two machines", (again, "dataset"), (data[data.gpu == gpu], None))):
        na, nb = _network(a[0]), _network(b[0])
        fa = _network(fastest_round(a[0], rounds, a[1]))
        fb = _network(fastest_round(b[0], rounds, b[1])) if b[1] else nb
        m = na.merge(nb, on=KEYS, suffixes=("_a", "_b")).merge(fa, on=KEYS).merge(fb, on=KEYS, suffixes=("_fa", "_fb"))
        for c, x, y in (("time, median round", "time_ms_a", "time_ms_b"), ("time, fastest round", "time_ms_fa", "time_ms_fb"),
                        ("energy, as recorded", "energy_mj_a", "energy_mj_b"),
                        ("energy, fastest round", "energy_mj_fa", "energy_mj_fb")):
            d = (m[x] / m[y] - 1).abs()
            print(f"{name}: {c}: |difference| median {_pct(d.median())}, max {_pct(d.max())} over {len(m)} configurations; "
                  + ", ".join(f"{short(r.model)} {r['mode']} {_pct(v)}" for (_, r), v in zip(m.iterrows(), d)))
    s = _network(recorded)
    print("suite network spread (largest - smallest round over the median), by precision: "
          + "; ".join(f"{p} median {_pct(g.spread.median())}, max {_pct(g.spread.max())}, over 5 % in {(g.spread > .05).sum()} of {len(g)}"
                      for p, g in s.groupby("precision")))
    e = fastest_round(recorded, rounds, "suite")
    e = e[e.op == "network"].groupby(KEYS).energy_spread.max().reset_index()
    print("suite rounds' energy spread (the same of their energy per call): "
          + "; ".join(f"{p} median {_pct(g.energy_spread.median())}, max {_pct(g.energy_spread.max())}"
                      for p, g in e.groupby("precision"))
          + " (a round's power moves with the GPU's state after the operations' windows where its time does not)")
    fastest = rounds.groupby(["set", "profile", "phase"]).time_ms.transform("min")
    power_at_fastest = rounds.loc[rounds.groupby(["set", "profile", "phase"]).time_ms.idxmin()].set_index(
        ["set", "profile", "phase"]).power_w
    r = rounds.assign(slower=rounds.time_ms / fastest - 1,
                      power_vs_fastest=rounds.power_w / power_at_fastest.reindex(
                          pd.MultiIndex.from_frame(rounds[["set", "profile", "phase"]])).to_numpy() - 1)
    slow = r[r.slower > 0.05]
    full = (slow.during_sm_clock_mhz >= FULL_CLOCK_MHZ) & (slow.during_throttle == "none")
    print(f"rounds 5 % or more slower than their profile's fastest: {len(slow)} of {len(r)} "
          f"({(slow.precision == 'bf16').sum()} bf16); of those, at full SM clock with no throttle reason inside the "
          f"window: {full.sum()}, drawing a median {_pct(slow[full].power_vs_fastest.median())} power against the "
          f"fastest round while taking a median {_pct(slow[full].slower.median())} longer (the GPU waiting on the host); "
          f"with the clock held back: {(~full).sum()}, {_pct(slow[~full].slower.median())} longer")
    held = r[(r.during_sm_clock_mhz < FULL_CLOCK_MHZ) | (r.during_throttle != "none")]
    print(f"rounds with the SM clock below {FULL_CLOCK_MHZ} MHz or a throttle reason inside the window: {len(held)} of "
          f"{len(r)} (reasons {held.during_throttle.value_counts().to_dict()}); they took a median "
          f"{_pct(held.slower.median())} longer than their profile's fastest round (the others {_pct(r.drop(held.index).slower.median())})")
    print(f"the first round of a profile against the fastest: median {_pct(r[r['round'] == 0].slower.median())} slower; "
          f"the warm-up took {rounds.drop_duplicates(['set', 'profile']).warmup_s.median():.3f} s (median)")



def report(out: Path) -> None:
    from radt_ext.ops import dataset as ds

    heldout = out / "heldout"
    pd.set_option("display.width", 200)
    suite, rounds = _suite_profiles(heldout)
    recorded = ds.load(heldout / "h100" / "suite.csv.gz")
    data = ds.load(out / "dataset.csv.gz")
    short = lambda m: m.rpartition(":")[2]  # noqa: E731
    for gpu in ("H100", "H200"):
        folder = heldout / gpu.lower()
        if all((folder / f"{f}.csv.gz").is_file() for f in ("suite", "repeat", "dataset", "rounds")):
            repeatability(folder, gpu, data)

    print("\n== 2. Summed operations against the network on the suite (H100, per profile) ==")
    for label, df in (("as recorded (median round)", recorded), ("fastest round", suite)):
        c = ds.summed_vs_network(df)
        for m in ("time", "energy"):
            d = (c[f"{m}_ratio"] - 1).abs()
            print(f"{label}: {m}: within 10 % in {(d <= .1).sum()} of {len(c)}; |ratio - 1| median {_pct(d.median())}, "
                  f"90th percentile {_pct(d.quantile(.9))}; fp32 median {_pct(d[c.precision == 'fp32'].median())}, "
                  f"bf16 {_pct(d[c.precision == 'bf16'].median())}")
    c = ds.summed_vs_network(suite)
    c["model"] = c.model.map(short)
    print(c[["model", "precision", "mode", "network_time", "time_ratio", "energy_ratio"]].round(3).to_string(index=False))

    print("\n== 3. The predictor on networks of a family it was not fitted on (dataset, H100 <-> H200) ==")
    lofo = json.loads((heldout / "lofo.json").read_text())
    for method, label in (("fitted", "before (fitted regressors)"), ("roofline", "after (roofline ratios)")):
        for d, e in lofo[method].items():
            print(f"{label}: {d} ({e['cases']} cases): time median {_pct(e['time']['median'])}, p90 "
                  f"{_pct(e['time']['p90'])}, max {_pct(e['time']['max'])}; energy median {_pct(e['energy']['median'])}, "
                  f"p90 {_pct(e['energy']['p90'])}, max {_pct(e['energy']['max'])}")
    for method in ("fitted", "roofline"):
        res = pd.read_csv(heldout / f"lofo_{method}.csv")
        per = res.groupby("held_out")[["time_error", "energy_error"]].median()
        print(f"{method}: median error by family held out: "
              + ", ".join(f"{f} {_pct(r.time_error)} / {_pct(r.energy_error)}" for f, r in per.iterrows()))
        inside = _inside(res, lofo["interval"])
        print(f"{method}: measured value inside the prediction's interval (spread + {_pct(lofo['interval']['time'])} "
              f"time, + {_pct(lofo['interval']['energy'])} energy): time {inside['time']}, energy {inside['energy']}; "
              f"ranked the two GPUs against what both measured, beyond the interval: time {inside['time_misranked']}, "
              f"energy {inside['energy_misranked']}")
    v = json.loads((out / "validation.json").read_text())
    print(f"model held out (within its family), roofline: time median {_pct(v['time']['median_error'])}, energy "
          f"{_pct(v['energy']['median_error'])}; best GPU by time right in {v['best_gpu']['time']['right']} of "
          f"{v['best_gpu']['time']['cases']}")

    print("\n== 4. The suite moved from the H100 to the H200 (predicted before the H200 measured it; errors in section 5) ==")
    p = pd.read_csv(heldout / "suite_predictions.csv")
    p["model"] = p.model.map(short)
    p["change"] = p.pred_time_ms / p.source_time_ms - 1
    print(p[["model", "precision", "mode", "source_time_ms", "pred_time_ms", "time_low_ms", "time_high_ms",
             "pred_energy_mj", "energy_low_mj", "energy_high_mj", "spread", "energy_spread", "change"]]
          .round(3).to_string(index=False))
    print(f"predicted H200 time against the H100's: median {_pct(p.change.median())}, from {_pct(p.change.min())} "
          f"to {_pct(p.change.max())}")
    if (heldout / "h200" / "suite.csv.gz").is_file():
        suite_errors(out, suite, rounds)
    else:
        print("the suite on an H200: not measured (RESULTS=<dir> BUDGET_S=540 bash benchmarks/ops/ops_heldout.sh on an "
              "H200, then its suite, repeat, dataset and rounds .csv.gz into docs/ops/heldout/h200/)")


def suite_errors(out: Path, h100: pd.DataFrame, h100_rounds: pd.DataFrame,
                 title: str = "== 5. The suite measured on both GPUs: the held-out errors ==") -> pd.DataFrame:
    """The held-out errors proper: the suite measured on both GPUs, moved each way by the predictor."""
    from radt_ext.ops import dataset as ds, predict

    folder = out / "heldout" / "h200"
    h200 = ds.load(folder / "suite.csv.gz")
    if (folder / "rounds.csv.gz").is_file():
        h200 = fastest_round(h200, pd.read_csv(folder / "rounds.csv.gz"), "suite")
    both = pd.concat([h100, h200], ignore_index=True)
    models = predict.fit(ds.load(out / "dataset.csv.gz"))
    error = tuple(json.loads((out / "heldout" / "lofo.json").read_text())["interval"][m] for m in ("time", "energy"))
    res = moved(models, both, error)
    if res.empty:
        print("the suite on an H200: no configuration measured on both GPUs")
        return res
    print("\n" + title)
    for d, e in _errors(res).items():
        print(f"{d} ({e['cases']} cases): time median {_pct(e['time']['median'])}, p90 {_pct(e['time']['p90'])}, "
              f"max {_pct(e['time']['max'])}; energy median {_pct(e['energy']['median'])}, p90 "
              f"{_pct(e['energy']['p90'])}, max {_pct(e['energy']['max'])}")
    hits = _inside(res, {"time": error[0], "energy": error[1]})
    print(f"measured inside the interval: time {hits['time']}, energy {hits['energy']}; ranked against what "
          f"both measured beyond the interval: time {hits['time_misranked']}, energy {hits['energy_misranked']}")
    there = res[(res.source == "H100") & (res.target == "H200")]
    power = (there.energy_mj / there.time_ms) / (there.source_energy_mj / there.source_time_ms)
    signed = there.pred_energy_mj / there.energy_mj - 1
    print(f"the H200 machine's network power over the H100 machine's, measured: median {power.median():.3f} (the "
          f"predictor's factor, from the dataset's machines: {models.power.get(('H100', 'H200'), math.nan):.3f}); "
          f"H100->H200 energy predicted a median {_pct(signed.median())} high")
    return res


MACHINES = ("H100", "H200")


def moved(models, both: pd.DataFrame, error: tuple[float, float], predictors=None) -> pd.DataFrame:
    """Every configuration measured on both GPUs moved each way: one row per configuration, direction and
    predictor (`predictors(source, target)` lists (name, `predict.predict`'s keyword arguments); by default
    the predictor as it runs on the rows alone) with what the target measured, the prediction, its interval
    (`<metric>_low|high_<unit>`), the interval without the spread between machines a host-bound step carries
    (the same with `_before`: the interval until 2026-11-27), and the source's issue share (`pace`)."""
    from radt_ext.ops import pace, predict

    rows = []
    for key, p in both.groupby(CONFIG):
        by_gpu = {g: p[p.gpu == g] for g in MACHINES if (p.gpu == g).any()}
        for a, b in (MACHINES, MACHINES[::-1]):
            if a not in by_gpu or b not in by_gpu:
                continue
            t, e = predict._net(by_gpu[b])
            src_t, src_e = predict._net(by_gpu[a])
            told = pace.of(by_gpu[a], a)
            base = {**dict(zip(CONFIG, key)), "source": a, "target": b, "time_ms": t, "energy_mj": e,
                    "source_time_ms": src_t, "source_energy_mj": src_e, "issue_share": told.share,
                    "host_bound": told.host_bound}
            for name, kwargs in (predictors(a, b) if predictors else [("", {})]):
                pred = predict.predict(models, by_gpu[a], a, b, error=error, **kwargs)
                row = {**base, "predictor": name, "pred_time_ms": pred.time_ms, "pred_energy_mj": pred.energy_mj,
                       "source_spread": pred.spread + pred.host_error,
                       "source_energy_spread": (pred.energy_spread if pred.energy_spread is not None
                                                else pred.spread) + pred.host_error,
                       "host_share": pred.host_share, "host_ratio": pred.host_ratio,
                       "time_error": abs(pred.time_ms / t - 1), "energy_error": abs(pred.energy_mj / e - 1)}
                for m, unit in (("time", "ms"), ("energy", "mj")):
                    for suffix, across in (("", True), ("_before", False)):
                        row[f"{m}_low_{unit}{suffix}"], row[f"{m}_high_{unit}{suffix}"] = pred.interval(m, across)
                rows.append(row)
    return pd.DataFrame(rows)


def inside(res: pd.DataFrame, metric: str, suffix: str = "") -> pd.Series:
    """Whether each case's measured value lies inside its predicted interval (`moved`'s columns)."""
    unit = "ms" if metric == "time" else "mj"
    meas = res[f"{metric}_{unit}"]
    return (meas >= res[f"{metric}_low_{unit}{suffix}"]) & (meas <= res[f"{metric}_high_{unit}{suffix}"])


def _inside(res: pd.DataFrame, error: dict) -> dict:
    out = {}
    for m, unit in (("time", "ms"), ("energy", "mj")):
        pred, meas = res[f"pred_{m}_{unit}"], res[f"{m}_{unit}"]
        if f"{m}_low_{unit}" in res:  # the predictor's own interval
            ok = inside(res, m)
        else:  # a validation's cases: the profile's spread and the predictor's error
            spread = res.source_spread if m == "time" or "source_energy_spread" not in res else \
                res.source_energy_spread.fillna(res.source_spread)
            width = spread.fillna(0) + error[m]
            ok = (meas >= pred * (1 - width)) & (meas <= pred * (1 + width))
        out[m] = f"{int(ok.sum())} of {len(res)}"
        source = res[f"source_{m}_{unit}"]
        misranked = ((pred < source) != (meas < source)) & ~ok
        out[f"{m}_misranked"] = ", ".join(f"{r.model} b{r.batch} {r.precision} {r['mode']} {r.source}->{r.target}"
                                          for _, r in res[misranked].iterrows()) or "none"
    return out


def main(argv=None) -> int:
    ap, sub = suite_parser(__doc__, "suite")
    p = sub.add_parser("pack", help="profile folders -> OUT/<label>.csv.gz and OUT/rounds.csv.gz")
    p.add_argument("--from", dest="folders", action="append", required=True, help="LABEL=folder; repeatable")
    p.add_argument("--out", required=True)
    for name, what in (("evaluate", "validate both methods, predict the suite (minutes)"),
                       ("report", "print every figure from the committed files (seconds)")):
        q = sub.add_parser(name, help=what)
        q.add_argument("--out", default="docs/ops", help="folder with dataset.csv.gz and heldout/")
    args = ap.parse_args(argv)
    if args.cmd == "grid-args":
        print(grid_args())
        return 0
    if args.cmd in ("evaluate", "report"):
        (evaluate if args.cmd == "evaluate" else report)(Path(args.out))
        return 0
    folders = [(f.partition("=")[0], Path(f.partition("=")[2])) for f in args.folders]
    for f in pack(folders, Path(args.out)):
        print("wrote", f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
