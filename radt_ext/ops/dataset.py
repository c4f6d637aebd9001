"""The per-operation dataset: many profiles as one flat table (one row per operation or network
phase), written compactly as CSV (gzip) and read back; built from profile folders or MLflow runs."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from radt_ext.errors import UsageError
from radt_ext.ops import host
from radt_ext.ops.gpus import SPECS
from radt_ext.ops.profiler import COLUMNS, Profile, read_table

KEYS = ["gpu", "model", "batch", "precision", "mode"]
FACTS = ["gpu_name", "driver", "power_limit_w", "sm_count", "sm_clock_max_mhz", "mem_bandwidth_gbs"]
# the machine's host (its benchmark, `host.COLUMNS`) and the GPU's power before the profile's first step
MACHINE = [*host.COLUMNS, "idle_power_w"]


def gpu_label(name: str) -> str:
    spec = SPECS.get(name)
    return spec.short if spec else name


def from_profiles(profiles: list[Profile]) -> pd.DataFrame:
    frames = []
    for p in profiles:
        t = p.table.copy()
        m = p.meta
        t.insert(0, "gpu", gpu_label(str(m.get("gpu_name", "cpu"))))
        for i, k in enumerate(KEYS[1:], start=1):
            t.insert(i, k, m.get(k))
        for k in FACTS:
            t[k] = m.get(k)
        for k, v in machine_columns(m).items():
            t[k] = v
        frames.append(t)
    if not frames:
        raise UsageError("no profiles to build a dataset from")
    df = pd.concat(frames, ignore_index=True)
    return df.sort_values(KEYS + ["order", "phase"], kind="stable").reset_index(drop=True)


def write(df: pd.DataFrame, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    gz = {"method": "gzip", "mtime": 0} if path.suffix == ".gz" else "infer"  # same data, same bytes
    df.to_csv(path, index=False, float_format="%.6g", compression=gz)
    return path


def load(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"no dataset at {path}; build one with radt-ext ops dataset")
    df = read_table(path)
    missing = [c for c in KEYS + COLUMNS if c not in df.columns]
    if missing:
        raise UsageError(f"{path} is not an ops dataset: columns {', '.join(missing)} are missing")
    return df


def profiles(df: pd.DataFrame):
    """(key tuple, rows of one profile) for every profile in the dataset."""
    return df.groupby(KEYS, sort=True)


def to_profile(rows: pd.DataFrame) -> Profile:
    """One profile's rows back as a Profile (its facts from the row columns)."""
    first = rows.iloc[0]
    meta = {k: first[k] for k in KEYS[1:] + FACTS + MACHINE if k in rows.columns}
    meta["gpu"] = first["gpu"]
    return Profile(rows[COLUMNS].reset_index(drop=True), meta)


def machine_columns(meta: dict) -> dict:
    """A profile's facts of its machine (`MACHINE` columns) from its meta, as `from_profiles` writes them."""
    out = host.columns(meta.get("host"))
    out["idle_power_w"] = (meta.get("state_before") or {}).get("power_w", meta.get("idle_power_w", math.nan))
    return out


def summed_vs_network(df: pd.DataFrame) -> pd.DataFrame:
    """Per profile: network and summed-operation time and energy per step, and their ratio."""
    out = []
    for key, rows in profiles(df):
        p = to_profile(rows)
        rec = dict(zip(KEYS, key))
        for col, name in (("time_ms", "time"), ("energy_mj", "energy")):
            net, ops = p.network(col), p.ops_sum(col)
            rec[f"network_{name}"] = net
            rec[f"ops_{name}"] = ops
            rec[f"{name}_ratio"] = ops / net if net else float("nan")
        out.append(rec)
    return pd.DataFrame(out)
