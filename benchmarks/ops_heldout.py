"""The held-out suite's GPU data, packed: profile folders → compact dataset files, and every network
round with the device's state around it (what may move a measurement).

    python -m benchmarks.ops_heldout grid-args                     # --models/--batches of the suite
    python -m benchmarks.ops_heldout pack --from suite=DIR --from repeat=DIR --out RESULTS

`pack` writes OUT/<label>.csv.gz (`radt-ext ops dataset` files, one per folder), OUT/rounds.csv.gz (one
row per network round: its time, energy, power and the SM/memory clocks, performance state, temperature,
power and throttle reasons before its window and inside it, with the profile's warm-up and library
settings) and prints each profile's network time, its rounds' spread and the clocks seen.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

# what each round row carries from its profile's facts
PROFILE_FACTS = ("gpu_name", "driver", "power_limit_w", "warmup_s", "warmup_steps", "net_rounds", "net_window_s",
                 "cudnn_benchmark", "cudnn_version", "tf32_matmul", "tf32_cudnn", "cublas_workspace_config",
                 "blas_library", "matmul_precision", "profile_s")


def grid_args(batches: dict[str, int] | None = None) -> str:
    if batches is None:
        from examples.heldout import BATCHES as batches
    return (f"--models {','.join(batches)} --extra= "
            f"--batches {','.join(f'{m}={b}' for m, b in batches.items())}")


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("grid-args", help="the suite's --models and --batches for radt_ext.ops.grid")
    p = sub.add_parser("pack", help="profile folders -> OUT/<label>.csv.gz and OUT/rounds.csv.gz")
    p.add_argument("--from", dest="folders", action="append", required=True, help="LABEL=folder; repeatable")
    p.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.cmd == "grid-args":
        print(grid_args())
        return 0
    folders = [(f.partition("=")[0], Path(f.partition("=")[2])) for f in args.folders]
    for f in pack(folders, Path(args.out)):
        print("wrote", f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
