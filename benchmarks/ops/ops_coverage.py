"""How often the predicted interval holds what the other GPU measured, on both held-out suites, before and after
a host-bound step's interval carries the spread between machines with the same GPU; and which held-out networks
are host-bound.

    python -m benchmarks.ops.ops_coverage [--out docs/ops] > docs/ops/coverage.txt

Reads OUT/dataset.csv.gz (the predictor's fit), OUT/heldout/lofo.json (the predictor's error), the first suite
(OUT/heldout/h100|h200: suite, repeat and rounds), the second suite and the repeat set measured again
(OUT/host/h100|h200: host.json, suite2, repeat1, repeat2) and the rule's data (radt_ext/ops/host_spread.json), and
prints:

1. the rule: the issue share from which a step is host-bound and the spread between machines with one GPU,
   with the measurements they come from;
2. every held-out profile with a host record, its issue share and whether it is host-bound, on each machine;
   the repeat set on two machines of one kind (H100 and H100, H200 and H200);
3. coverage: per suite, predictor, direction and metric, the cases whose measured value on the other GPU lies
   inside the predicted interval, before (the interval until 2026-11-27) and after; both suites together;
4. the point errors: of GPU-bound and host-bound cases apart (the interval moves, the point does not).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from benchmarks.ops.ops_heldout import CONFIG, MACHINES, _errors, _pct, fastest_round, inside, moved

METRICS = ("time", "energy")


def _short(model: str) -> str:
    return str(model).rpartition(":")[2]


def first_suite(heldout: Path) -> pd.DataFrame:
    """The first suite on both GPUs, each network row as the profiler now takes it (`fastest_round`)."""
    from radt_ext.ops import dataset as ds

    return pd.concat([fastest_round(ds.load(heldout / g / "suite.csv.gz"), pd.read_csv(heldout / g / "rounds.csv.gz"),
                                    "suite") for g in ("h100", "h200")], ignore_index=True)


def rule() -> dict:
    from radt_ext.ops import pace

    f = pace.figures()
    print("== 1. The rule (radt_ext/ops/host_spread.json) ==")
    print(f"host-bound: the host's issue time at least {f['host_bound_share']:.0%} of the step; "
          f"{pace.expectation()} (a host-bound step's predicted interval divided and multiplied by "
          f"{1 + f['machine_spread']:.2f})")
    widest = 0.0
    for m in f["measurements"]:
        if "step_ms" in m:
            a, b = m["step_ms"]
            ratio = max(a / b, b / a)
            what = f"{a} and {b} ms, ratio {ratio:.3f}"
        else:
            lo, hi = m["change"]
            ratio = max(1 + hi, 1 / (1 + lo))
            what = f"{lo:+.0%} to {hi:+.0%}, widest ratio {ratio:.3f}"
        if m["bound"] == "host":
            widest = max(widest, ratio)
        print(f"  {m['gpu']}, hosts of {' and '.join(m['hosts'])}: {m['network']} ({m['bound']}-bound): {what}")
    print(f"widest ratio between two machines for a host-bound step: {widest:.3f}; machine_spread "
          f"{f['machine_spread']:.2f}")
    return {"host_bound_share": f["host_bound_share"], "machine_spread": f["machine_spread"], "widest": widest}


def host_bound_table(folders: dict[str, Path]) -> pd.DataFrame:
    """Every profile with a host record on each machine: its step, issue time and share, and the rule's verdict."""
    from radt_ext.ops import dataset as ds, pace

    rows = []
    for gpu, folder in folders.items():
        for label in ("suite2", "repeat1", "repeat2"):
            df = ds.load(folder / f"{label}.csv.gz")
            for key, p in df.groupby(CONFIG):
                told = pace.of(p, gpu)
                rows.append({"set": label, "gpu": gpu, **dict(zip(CONFIG, key)), "step_ms": told.step_ms,
                             "issue_ms": told.issue_ms, "share": told.share, "host_bound": told.host_bound})
    return pd.DataFrame(rows)


def which(folders: dict[str, Path], heldout: Path) -> None:
    print("\n== 2. Which held-out networks are host-bound ==")
    t = host_bound_table(folders)
    t["model"] = t.model.map(_short)
    shown = t.pivot_table(index=["set", "model", "precision", "mode"], columns="gpu", values="share", aggfunc="first")
    bound = t.groupby(["set", "model", "precision", "mode"]).host_bound.agg(lambda b: "yes" if b.all() else
                                                                            "no" if not b.any() else "on one machine")
    print("issue time over the step (second suite: suite2; the first suite's Decoder and Encoder measured again: "
          "repeat1, repeat2), and host-bound on both machines:")
    print(shown.round(3).assign(host_bound=bound).to_string())
    groups = t.groupby("host_bound").share.agg(["min", "max", "count"])
    print("issue shares: " + "; ".join(f"{'host-bound' if b else 'GPU-bound'} {r['min']:.3f}-{r['max']:.3f} "
                                       f"({int(r['count'])} profiles)" for b, r in groups.iterrows()))
    print("the first suite's own profiles predate the host record: the rule does not apply to them, and their "
          "intervals are as before")
    same_kind(folders, heldout)


def same_kind(folders: dict[str, Path], heldout: Path) -> None:
    """The repeat set on two machines of one kind: the first suite's machine and the second suite's."""
    from radt_ext.ops import dataset as ds, predict

    def steps(frames: list[pd.DataFrame]) -> pd.Series:
        net = pd.concat(frames)
        net = net[net.op == "network"]
        per = net.groupby(CONFIG + ["gpu"]).apply(lambda p: predict._net(p)[0], include_groups=False)
        return per.groupby(level=list(range(len(CONFIG)))).min()

    for gpu, folder in folders.items():
        first = heldout / gpu.lower()
        rounds = pd.read_csv(first / "rounds.csv.gz")
        a = steps([fastest_round(ds.load(first / f"{label}.csv.gz"), rounds, label) for label in ("suite", "repeat")])
        b = steps([ds.load(folder / f"{label}.csv.gz") for label in ("repeat1", "repeat2")])
        both = pd.concat({"a": a, "b": b}, axis=1).dropna()
        d = both.b / both.a - 1
        print(f"{gpu} and another {gpu} machine, the repeat set (the fastest of each machine's processes; the first "
              f"machine's by its fastest round, the other's by the fastest tenth of its chunks): "
              + ", ".join(f"{_short(k[0])} {k[3]} {v:+.1%}" for k, v in d.items())
              + f"; largest {_pct(d.abs().max())}")


def coverage(models, error, suites: dict[str, tuple[pd.DataFrame, object]]) -> dict:
    print("\n== 3. Coverage: the measured value on the other GPU inside the predicted interval ==")
    results, lines = {}, []
    for suite, (both, predictors) in suites.items():
        res = moved(models, both, error, predictors)
        results[suite] = res
        for (name, src, tgt), g in res.groupby(["predictor", "source", "target"], sort=False):
            for m in METRICS:
                before, after = inside(g, m, "_before").sum(), inside(g, m).sum()
                lines.append({"suite": suite, "predictor": name, "direction": f"{src}->{tgt}", "metric": m,
                              "cases": len(g), "host-bound": int(g.host_bound.sum()), "before": int(before),
                              "after": int(after)})
    table = pd.DataFrame(lines)
    print(table.to_string(index=False))
    summary = {}
    first = results.pop(next(iter(suites)))
    for suite, res in results.items():
        for name, g in res.groupby("predictor", sort=False):
            together = pd.concat([first, g], ignore_index=True)
            parts = []
            for m in METRICS:
                before, after = inside(together, m, "_before").sum(), inside(together, m).sum()
                summary[f"{name}_{m}"] = {"before": int(before), "after": int(after), "cases": len(together)}
                parts.append(f"{m} {before} of {len(together)} ({before / len(together):.1%}) before, {after} "
                             f"({after / len(together):.1%}) after")
            print(f"both suites, both directions, the second suite's predictor {name}: " + "; ".join(parts))
            outside = g[~inside(g, "time") | ~inside(g, "energy")]
            for r in outside.itertuples():
                print(f"  still outside ({name}): {_short(r.model)} {r.precision} {r.mode} {r.source}->{r.target}, "
                      f"{'host' if r.host_bound else 'GPU'}-bound: time {r.pred_time_ms:.3g} ms "
                      f"({r.time_low_ms:.3g}-{r.time_high_ms:.3g}) against {r.time_ms:.3g}, energy "
                      f"{r.pred_energy_mj:.3g} mJ ({r.energy_low_mj:.3g}-{r.energy_high_mj:.3g}) against "
                      f"{r.energy_mj:.3g}")
    return {"table": lines, "both_suites": summary, "results": {"first": first, **results}}


def accuracy(results: dict[str, pd.DataFrame]) -> None:
    print("\n== 4. Point errors, GPU-bound and host-bound apart (|error| median / 90th percentile; the rule moves "
          "the interval, not the point) ==")
    for suite, res in results.items():
        bound = res.host_bound.map({True: "host-bound", False: "GPU-bound"}).where(res.issue_share.notna(), "")
        for (name, bound), g in res.groupby(["predictor", bound], sort=False):
            for d, e in _errors(g).items():
                if d == "both" and len(g.source.unique()) > 1:
                    continue
                print(f"{suite} suite, {name}{', ' + bound if bound else ''}: {d} ({e['cases']} cases): time {_pct(e['time']['median'])} / "
                      f"{_pct(e['time']['p90'])}, energy {_pct(e['energy']['median'])} / {_pct(e['energy']['p90'])}")


def report(out: Path) -> dict:
    from benchmarks.ops.ops_host import load_machine
    from radt_ext.ops import dataset as ds, predict

    pd.set_option("display.width", 200)
    folders = {g: out / "host" / g.lower() for g in MACHINES}
    summary = {"rule": rule()}
    which(folders, out / "heldout")
    models = predict.fit(ds.load(out / "dataset.csv.gz"))
    error = tuple(json.loads((out / "heldout" / "lofo.json").read_text())["interval"][m] for m in METRICS)
    hosts = {g: load_machine(f, g)["host"] for g, f in folders.items()}
    second = pd.concat([ds.load(f / "suite2.csv.gz") for f in folders.values()], ignore_index=True)
    suites = {
        "first": (first_suite(out / "heldout"), lambda a, b: [("profiles without a host record", {})]),
        "second": (second, lambda a, b: [
            ("target's host measured", {"target_host": hosts[b], "source_host": hosts[a]}),
            ("target's host unknown", {})]),
    }
    cov = coverage(models, error, suites)
    accuracy(cov.pop("results"))
    summary["coverage"] = cov
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/ops", help="folder with dataset.csv.gz, heldout/ and host/")
    ap.add_argument("--json", default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    summary = report(Path(args.out))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
