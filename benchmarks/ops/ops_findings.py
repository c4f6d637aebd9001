"""The figures docs/ops.md quotes about the committed ops dataset, beyond `radt-ext ops check|validate`.

    python -m benchmarks.ops.ops_findings [--out docs/ops]

Prints: per-operation H200/H100 ratios; the windows' busy share and power against the power limit; the
share of profiles whose summed operations are within 10 % of the network and the profiles that miss;
summed/network per phase, with the operations' and the network's mean power where energy misses; the
functional operations' share; the network rounds' spread; the measured H200-vs-H100 network gaps against
the two profiles' spreads and the largest prediction errors (from validation.csv).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from radt_ext.ops import dataset as ds

KEYS = ["gpu", "model", "batch", "precision", "mode"]
FUNCTIONAL = {"add", "cat", "stack", "bmm", "getitem", "adaptive_avg_pool2d"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="docs/ops", help="folder with dataset.csv.gz and validation.csv")
    out = Path(p.parse_args(argv).out)
    df = ds.load(out / "dataset.csv.gz")
    net, ops = df[df.op == "network"], df[df.op != "network"].copy()
    print(f"rows {len(df)}; profiles per GPU {df.drop_duplicates(KEYS).groupby('gpu').size().to_dict()}")

    key = ["model", "batch", "precision", "mode", "order", "phase"]
    pair = ops[ops.gpu == "H100"].merge(ops[ops.gpu == "H200"], on=key, suffixes=("_a", "_b"))
    for col in ("time_ms", "energy_mj"):
        r = pair[f"{col}_b"] / pair[f"{col}_a"]
        print(f"per operation H200/H100 {col}: median {r.median():.3f}, IQR {r.quantile(.25):.2f}-{r.quantile(.75):.2f}"
              f" ({len(pair)} operations measured on both)")
    r = (pair.time_ms_b / pair.time_ms_a).groupby(pair.op_a).median().sort_values()
    print("  time by type:", ", ".join(f"{k} {v:.2f}" for k, v in r.items()))
    print(f"operation rows reading 0 mJ: {(ops.energy_mj <= 0).sum()}; above the power limit: "
          f"{(ops.power_w > ops.power_limit_w).sum()}; windows over 0.15 s: {(ops.window_s > 0.15).mean():.0%}")

    if df.busy.notna().any():
        print(f"busy share of windows: median {df.busy.median():.4f}, lowest {df.busy.min():.3f}")
    over = ops[ops.power_w > ops.power_limit_w]
    print(f"operation power: {ops.power_w.min():.0f}-{ops.power_w.max():.0f} W, median {ops.power_w.median():.0f} W; "
          f"above the limit {len(over)} rows, {(over.time_ms * over['count']).sum() / (ops.time_ms * ops['count']).sum():.1%} "
          f"of summed operation time, by type {over.op.value_counts().to_dict()}")
    hot = net[net.power_w > net.power_limit_w]
    print(f"network rows above the limit: {len(hot)} of {len(net)} (max {net.power_w.max():.0f} W), by model "
          f"{hot.model.value_counts().to_dict()}")

    check = ds.summed_vs_network(df)
    for m in ("time", "energy"):
        w = (check[f"{m}_ratio"] - 1).abs() <= 0.10
        print(f"summed within 10 % on {m}: {w.sum()}/{len(check)} = {w.mean():.0%}")
        print(check[~w][KEYS + ["network_time", "time_ratio", "energy_ratio"]].to_string(index=False))

    ops["t"], ops["e"] = ops.time_ms * ops["count"], ops.energy_mj * ops["count"]
    per = ops.groupby(KEYS + ["phase"])[["t", "e"]].sum().reset_index().merge(
        net[KEYS + ["phase", "time_ms", "energy_mj", "spread"]], on=KEYS + ["phase"])
    per["time_ratio"], per["energy_ratio"] = per.t / per.time_ms, per.e / per.energy_mj
    print("summed/network per phase, median over batch sizes and precisions:")
    print(per.groupby(["mode", "phase", "model", "gpu"]).time_ratio.median().unstack().round(2).to_string())
    per["ops_w"], per["net_w"] = per.e / per.t, per.energy_mj / per.time_ms
    emiss = per[(per.energy_ratio - 1).abs() > 0.10]
    print("phases whose summed energy misses 10 %, with the operations' and the network's mean power (W):")
    print(emiss[KEYS + ["phase", "time_ratio", "energy_ratio", "ops_w", "net_w"]].round(3).to_string(index=False))
    miss = (per.time_ratio - 1).abs() > 0.10
    print(f"network spread, median: phases within 10 % {per.spread[~miss].median():.3f}, missing {per.spread[miss].median():.3f}")
    print("network spread by gpu and mode:", net.groupby(["gpu", "mode"]).spread.median().round(3).to_dict())
    f = ops.assign(func=ops.op.isin(FUNCTIONAL)).groupby(["model", "mode", "func"]).t.sum().unstack(fill_value=0)
    print("functional operations' share of summed time:", (f[True] / f.sum(axis=1)).round(3).to_dict())

    v = pd.read_csv(out / "validation.csv")
    sp = net.groupby(KEYS).spread.max().reset_index()
    on = ["model", "batch", "precision", "mode"]
    v = v.merge(sp.rename(columns={"gpu": "source", "spread": "s_a"}), on=on + ["source"]) \
         .merge(sp.rename(columns={"gpu": "target", "spread": "s_b"}), on=on + ["target"])
    gap, noise = (v.time_ms / v.source_time_ms - 1).abs(), np.maximum(v.s_a, v.s_b)
    print(f"measured network time gap between the GPUs: median {gap.median():.3f}; within the larger of the two "
          f"profiles' spreads in {(gap < noise).mean():.0%} of {len(v)} cases (median larger spread {noise.median():.3f})")
    print(f"median time error where both spreads < 5 %: {v.time_error[noise < .05].median():.3f} ({(noise < .05).sum()} cases); "
          f"otherwise {v.time_error[noise >= .05].median():.3f}")
    worst = v.sort_values("time_error", ascending=False).head(8)
    print("largest time errors (predicted and measured change from the source GPU):")
    for _, r in worst.iterrows():
        print(f"  {r.model} b{r.batch} {r.precision} {r['mode']} {r.source}->{r.target}: error {r.time_error:.3f}, "
              f"predicted {r.pred_time_ms / r.source_time_ms - 1:+.1%}, measured {r.time_ms / r.source_time_ms - 1:+.1%}, "
              f"spreads {r.s_a:.3f} / {r.s_b:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
