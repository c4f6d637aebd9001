"""Turn the GPU profile folders into the committed ops dataset, its checks and figures.

    python -m benchmarks.ops.ops_dataset --profiles H100=<h100>/profiles --profiles H200=<h200>/profiles --out docs/ops

Writes OUT/dataset.csv.gz (every profile, one row per operation or network phase), OUT/summed_vs_network.csv,
OUT/validation.json and .csv (leave-one-model-out), OUT/*.png figures, and a test slice
(tests/radt_ext/ops/data/slice.csv.gz) of a few profiles from each GPU.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from radt_ext.ops import dataset as ds, predict, store

SLICE = {"model": ["mlp", "small_cnn", "dlrm", "vit"], "batch_index": 1}


def build(folders: list[str]) -> pd.DataFrame:
    profiles = [p for f in folders for p in store.read_dir(f)]
    return ds.from_profiles(profiles)


def test_slice(df: pd.DataFrame) -> pd.DataFrame:
    """The middle batch size of a few quick models, both precisions and modes, every GPU."""
    parts = []
    for model in SLICE["model"]:
        rows = df[df.model == model]
        if rows.empty:
            continue
        batches = sorted(rows.batch.unique())
        parts.append(rows[rows.batch == batches[min(SLICE["batch_index"], len(batches) - 1)]])
    return pd.concat(parts, ignore_index=True)


def figures(df: pd.DataFrame, res: pd.DataFrame, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    ops = df[df.op != "network"]
    gpus = sorted(df.gpu.unique())
    if len(gpus) >= 2:
        a, b = gpus[:2]
        key = ["model", "batch", "precision", "mode", "order", "phase"]
        pair = ops[ops.gpu == a].merge(ops[ops.gpu == b], on=key, suffixes=(f"_{a}", f"_{b}"))
        fig, axes = plt.subplots(1, 2, figsize=(12, 5))
        for ax, col, unit in ((axes[0], "time_ms", "ms"), (axes[1], "energy_mj", "mJ")):
            colors = plt.get_cmap("tab20")
            for i, (op, g) in enumerate(pair.groupby(f"op_{a}")):
                ax.scatter(g[f"{col}_{a}"], g[f"{col}_{b}"], s=8, label=op, alpha=0.7, color=colors(i % 20))
            v = pair[[f"{col}_{a}", f"{col}_{b}"]].to_numpy()
            lo = np.nanmin(v[v > 0])
            hi = np.nanmax(pair[[f"{col}_{a}", f"{col}_{b}"]].to_numpy())
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
            ax.set(xscale="log", yscale="log", xlabel=f"{a} {col.split('_')[0]} per call ({unit})",
                   ylabel=f"{b} ({unit})", title=f"per-operation {col.split('_')[0]}, {b} against {a}")
        axes[0].legend(fontsize=7, ncol=2)
        fig.tight_layout()
        written.append(_save(fig, out / "per_op_h100_vs_h200.png"))
    # share of step time and energy by op type, per GPU and mode
    share = ops.assign(t=ops.time_ms * ops["count"], e=ops.energy_mj * ops["count"]) \
        .groupby(["gpu", "mode", "op"])[["t", "e"]].sum().reset_index()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, col, title in ((axes[0], "t", "time"), (axes[1], "e", "energy")):
        piv = share.pivot_table(index=["gpu", "mode"], columns="op", values=col, fill_value=0)
        piv = piv.div(piv.sum(axis=1), axis=0)
        piv.plot.barh(stacked=True, ax=ax, legend=ax is axes[1], width=0.8, colormap="tab20")
        ax.set(xlabel=f"share of summed operation {title}", ylabel="", title=f"{title} by operation type")
    axes[1].legend(fontsize=7, bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    written.append(_save(fig, out / "op_type_share.png"))
    if not res.empty:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for ax, m, unit in ((axes[0], "time", "ms"), (axes[1], "energy", "mj")):
            for model, g in res.groupby("model"):
                ax.scatter(g[f"{m}_{unit}"], g[f"pred_{m}_{unit}"], s=14, label=model)
            v = res[[f"{m}_{unit}", f"pred_{m}_{unit}"]].to_numpy()
            lo, hi = np.nanmin(v), np.nanmax(v)
            ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
            med = res[f"{m}_error"].median()
            ax.set(xscale="log", yscale="log", xlabel=f"measured network {m} per step on the target GPU",
                   ylabel="predicted from the other GPU", title=f"{m}: median error {med:.1%} (held-out models)")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        written.append(_save(fig, out / "prediction_errors.png"))
    return written


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profiles", action="append", required=True, help="LABEL=folder of profiles; repeatable")
    p.add_argument("--out", default="docs/ops")
    p.add_argument("--slice", default="tests/radt_ext/ops/data/slice.csv.gz")
    p.add_argument("--reuse-validation", action="store_true", help="redraw with OUT/validation.csv as it is")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df = build([f.partition("=")[2] or f for f in args.profiles])
    ds.write(df, out / "dataset.csv.gz")
    check = ds.summed_vs_network(df)
    check.to_csv(out / "summed_vs_network.csv", index=False, float_format="%.4g")
    ds.write(test_slice(df), args.slice)
    res = pd.DataFrame()
    if args.reuse_validation:
        res = pd.read_csv(out / "validation.csv")
    elif df.gpu.nunique() >= 2:
        res = predict.validate(df, progress=lambda m: print(f"held out {m}", flush=True))
        summ = predict.summary(res)
        (out / "validation.json").write_text(json.dumps(summ, indent=1) + "\n")
        res.to_csv(out / "validation.csv", index=False, float_format="%.6g")
        print(json.dumps(summ, indent=1))
    for f in figures(df, res, out):
        print("wrote", f)
    agg = check.groupby(["gpu", "model", "mode"])[["time_ratio", "energy_ratio"]].median().round(2)
    print(agg.to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
