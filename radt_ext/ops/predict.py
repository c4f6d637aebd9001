"""Predict a workload's whole-network time and energy on another GPU from its profile on one GPU.

Per operation type, two scikit-learn regressors fitted on every operation measured on two GPUs:
the log ratio of its time on GPU B to its time on GPU A, and the same for its mean power, on the
operation's FLOPs, bytes, arithmetic intensity, phase, precision, its measured time and power on A,
and the B/A ratios of the GPUs' specifications (peak TFLOPs, memory bandwidth, power limit, SM
count, clock, roofline time). A profile measured on GPU A moves to GPU B operation by
operation: each operation's measured time and energy on A is scaled by the predicted B/A ratio,
and the network by the count-weighted mean of its operations' ratios (so what the operations
do not explain — launch gaps, overlap — is carried over from A's measurement).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from radt_ext.errors import UsageError
from radt_ext.ops.dataset import KEYS
from radt_ext.ops.gpus import GpuSpec, lookup

PHASES = {"forward": 0, "backward": 1, "inference": 2}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
MIN_ROWS = 30  # an op type with fewer training rows uses the model of all types
METRICS = ("time", "energy", "edp")


PAIR_KEY = ["model", "batch", "precision", "mode", "order", "phase"]


def _roofline_ms(rows: pd.DataFrame, spec: GpuSpec) -> np.ndarray:
    flops = rows["flops"].astype(float).clip(lower=0).fillna(0).to_numpy() + 1.0
    nbytes = rows["bytes"].astype(float).clip(lower=1).to_numpy()
    peak = rows["precision"].map(lambda p: spec.peak_tflops(p)).astype(float).to_numpy()
    return np.maximum(flops / (peak * 1e12), nbytes / (spec.mem_bandwidth_gbs * 1e9)) * 1e3


def features(rows: pd.DataFrame, source: GpuSpec, target: GpuSpec) -> pd.DataFrame:
    """Features of operation rows measured on `source`, to be moved to `target`: the operation's FLOPs,
    bytes, arithmetic intensity, phase, precision and measured time and power on the source, and both
    GPUs' specifications as target/source ratios (peak TFLOPs, bandwidth, power limit, SMs, clock)."""
    flops = rows["flops"].astype(float).clip(lower=0).fillna(0) + 1.0
    nbytes = rows["bytes"].astype(float).clip(lower=1)
    peak_s = rows["precision"].map(lambda p: source.peak_tflops(p)).astype(float)
    peak_t = rows["precision"].map(lambda p: target.peak_tflops(p)).astype(float)
    power = (rows["energy_mj"] / rows["time_ms"]).astype(float)
    return pd.DataFrame({
        "log_flops": np.log10(flops), "log_bytes": np.log10(nbytes), "log_ai": np.log10(flops / nbytes),
        "phase": rows["phase"].map(PHASES).astype(float),
        "element_bytes": rows["precision"].map(ELEMENT_BYTES).astype(float),
        "log_time_ms": np.log10(rows["time_ms"].astype(float).clip(lower=1e-6)),
        "log_power_w": np.log10(power.clip(lower=1.0)).fillna(0.0),
        "peak_ratio": np.log10(peak_t / peak_s),
        "bandwidth_ratio": np.log10(target.mem_bandwidth_gbs / source.mem_bandwidth_gbs),
        "power_limit_ratio": np.log10(target.power_limit_w / source.power_limit_w),
        "sm_ratio": np.log10(target.sm_count / source.sm_count),
        "clock_ratio": np.log10(target.sm_clock_max_mhz / source.sm_clock_max_mhz),
        "roofline_ratio": np.log10(_roofline_ms(rows, target) / _roofline_ms(rows, source)),
    }, index=rows.index)


def _regressor():
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=150, max_depth=3, learning_rate=0.08, subsample=0.9,
                                     random_state=0)


@dataclass
class OpModels:
    """Per-op-type regressors of log(target/source) for time and for power, and a fallback for all types."""
    time: dict = field(default_factory=dict)
    power: dict = field(default_factory=dict)

    def _apply(self, table: dict, rows: pd.DataFrame, source: GpuSpec, target: GpuSpec) -> np.ndarray:
        x = features(rows, source, target)
        out = np.zeros(len(rows))
        if not table:
            return out
        for op, idx in _by_op(rows):
            out[idx] = table.get(op, table["*"]).predict(x.iloc[idx])
        return out

    def time_ratio(self, rows, source, target) -> np.ndarray:
        return 10 ** self._apply(self.time, rows, source, target)

    def power_ratio(self, rows, source, target) -> np.ndarray:
        return 10 ** self._apply(self.power, rows, source, target)


def _by_op(rows: pd.DataFrame):
    ops = rows["op"].to_numpy()
    for op in np.unique(ops):
        yield op, np.flatnonzero(ops == op)


def operation_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df.op != "network") & (df.time_ms > 0)]


def pairs(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray, np.ndarray]:
    """Every operation measured on two GPUs, both ways: (features, source rows, log time ratio, log power ratio)."""
    rows = operation_rows(df)
    gpus = sorted(rows.gpu.unique())
    xs, srcs, yt, yp = [], [], [], []
    for a in gpus:
        for b in gpus:
            if a == b:
                continue
            m = rows[rows.gpu == a].merge(rows[rows.gpu == b][PAIR_KEY + ["time_ms", "energy_mj"]],
                                          on=PAIR_KEY, suffixes=("", "_b"))
            if m.empty:
                continue
            xs.append(features(m, lookup(a), lookup(b)))
            srcs.append(m)
            with np.errstate(divide="ignore", invalid="ignore"):  # a zero energy reading: no power ratio
                yt.append(np.log10(m.time_ms_b / m.time_ms).to_numpy())
                yp.append(np.log10((m.energy_mj_b / m.time_ms_b) / (m.energy_mj / m.time_ms)).to_numpy())
    if not xs:
        raise UsageError("the dataset holds no operation measured on two GPUs; profile the same workloads on both")
    return (pd.concat(xs, ignore_index=True), pd.concat(srcs, ignore_index=True), np.concatenate(yt),
            np.concatenate(yp))


def fit(df: pd.DataFrame) -> OpModels:
    """Fit the per-op-type models on every pair of GPUs that measured the same operation."""
    x, src, y_time, y_power = pairs(df)
    models = OpModels()
    groups = [("*", np.arange(len(src)))] + [(op, idx) for op, idx in _by_op(src) if len(idx) >= MIN_ROWS]
    for op, idx in groups:
        models.time[op] = _regressor().fit(x.iloc[idx], y_time[idx])
        ok = idx[np.isfinite(y_power[idx])]
        if len(ok) >= (1 if op == "*" else MIN_ROWS):
            models.power[op] = _regressor().fit(x.iloc[ok], y_power[ok])
    return models


@dataclass
class Prediction:
    gpu: str
    time_ms: float  # per step (training: forward + backward)
    energy_mj: float
    measured: bool = False  # the source GPU's own measurement

    @property
    def edp(self) -> float:
        return self.time_ms * self.energy_mj

    def value(self, by: str) -> float:
        return {"time": self.time_ms, "energy": self.energy_mj, "edp": self.edp}[by]


def predict(models: OpModels, rows: pd.DataFrame, source: str, target: str) -> Prediction:
    """Move one profile's rows (measured on `source`) to GPU `target`."""
    src, tgt = lookup(source), lookup(target)
    net = rows[rows.op == "network"]
    if net.empty:
        raise UsageError("the profile has no whole-network rows to scale")
    if src == tgt:
        return Prediction(tgt.short, *_net(rows), measured=True)
    ops = operation_rows(rows)
    ratio_t = models.time_ratio(ops, src, tgt)
    ratio_p = models.power_ratio(ops, src, tgt)
    r_e = ratio_t * ratio_p
    t_src = (ops.time_ms * ops["count"]).to_numpy()
    e_src = (ops.energy_mj * ops["count"]).to_numpy()
    phases = ops.phase.to_numpy()
    time_ms = energy_mj = 0.0
    for _, row in net.iterrows():
        mine = phases == row.phase
        if not mine.any():
            continue
        time_ms += row.time_ms * (t_src[mine] * ratio_t[mine]).sum() / t_src[mine].sum()
        e = e_src[mine]
        energy_mj += row.energy_mj * (e * r_e[mine]).sum() / e.sum() if np.isfinite(e).all() and e.sum() > 0 \
            else math.nan
    return Prediction(tgt.short, float(time_ms), float(energy_mj))


def rank(predictions: list[Prediction], by: str, tolerance: float) -> list[tuple[int, Prediction, str]]:
    """(rank, prediction, note) best first; a GPU within `tolerance` (relative) of the one ranked above
    shares its rank and is marked "tie"."""
    if by not in METRICS:
        raise UsageError(f"unknown ranking {by!r}; choose time, energy or edp")
    ordered = sorted(predictions, key=lambda p: p.value(by))
    out, r = [], 0
    for i, p in enumerate(ordered):
        tie = i > 0 and _close(ordered[i - 1].value(by), p.value(by), tolerance)
        if not tie:
            r = i + 1
        out.append((r, p, "tie" if tie or (i + 1 < len(ordered) and _close(
            p.value(by), ordered[i + 1].value(by), tolerance)) else ""))
    return out


def _close(a: float, b: float, tolerance: float) -> bool:
    return abs(a - b) <= tolerance * max(abs(a), abs(b))


def validate(df: pd.DataFrame, progress=None) -> pd.DataFrame:
    """Leave one model out: fit without it, move each of its profiles from each GPU to every other one
    and compare with what that GPU measured. One row per (profile, source → target)."""
    gpus = sorted(df.gpu.unique())
    if len(gpus) < 2:
        raise UsageError("validation needs profiles from at least two GPUs")
    out = []
    for model in sorted(df.model.unique()):
        fitted = fit(df[df.model != model])
        held = df[df.model == model]
        for key, rows in held.groupby(KEYS[1:]):
            by_gpu = {g: rows[rows.gpu == g] for g in gpus if (rows.gpu == g).any()}
            for a in by_gpu:
                for b in by_gpu:
                    if a == b:
                        continue
                    pred = predict(fitted, by_gpu[a], a, b)
                    net_a, net_b = _net(by_gpu[a]), _net(by_gpu[b])
                    out.append({**dict(zip(KEYS[1:], key)), "source": a, "target": b,
                                "time_ms": net_b[0], "pred_time_ms": pred.time_ms, "source_time_ms": net_a[0],
                                "energy_mj": net_b[1], "pred_energy_mj": pred.energy_mj,
                                "source_energy_mj": net_a[1]})
        if progress:
            progress(model)
    res = pd.DataFrame(out)
    for m in ("time", "energy"):
        res[f"{m}_error"] = (res[f"pred_{m}_{_unit(m)}"] / res[f"{m}_{_unit(m)}"] - 1).abs()
        res[f"{m}_error_same"] = (res[f"source_{m}_{_unit(m)}"] / res[f"{m}_{_unit(m)}"] - 1).abs()
    return res


def _unit(metric: str) -> str:
    return "ms" if metric == "time" else "mj"


def _net(rows: pd.DataFrame) -> tuple[float, float]:
    net = rows[rows.op == "network"]
    return float(net.time_ms.sum(min_count=1)), float(net.energy_mj.sum(min_count=1))


def best_gpu_accuracy(res: pd.DataFrame, by: str, tolerance: float) -> dict:
    """How often the predicted best GPU is the measured one, per (profile, source GPU).

    Predicted: the source GPU's measurement against the target's prediction; a gap within
    `tolerance` is a "tie". A case is right when the measured gap is itself within the tolerance
    (either answer is as good), or when the prediction names a winner and it is the measured one.
    `strict_fraction` ignores ties: the predicted direction against the measured one."""
    def val(prefix, r):
        t, e = r[f"{prefix}time_ms"], r[f"{prefix}energy_mj"]
        return {"time": t, "energy": e, "edp": t * e}[by]

    right = strict = ties = 0
    for _, r in res.iterrows():
        src, tgt_pred, tgt_meas = val("source_", r), val("pred_", r), val("", r)
        pred_tie = _close(src, tgt_pred, tolerance)
        meas_tie = _close(src, tgt_meas, tolerance)
        same = (tgt_pred < src) == (tgt_meas < src)
        strict += same
        ties += pred_tie
        right += meas_tie or (not pred_tie and same)
    n = len(res)
    return {"cases": n, "right": right, "right_fraction": right / n if n else math.nan,
            "strict_fraction": strict / n if n else math.nan, "predicted_ties": ties}


def summary(res: pd.DataFrame) -> dict:
    out = {"cases": len(res)}
    for m in ("time", "energy"):
        err = res[f"{m}_error"].dropna()
        same = res[f"{m}_error_same"].dropna()
        out[m] = {"median_error": float(err.median()) if len(err) else math.nan,
                  "worst_error": float(err.max()) if len(err) else math.nan,
                  "worst_case": _worst(res, f"{m}_error"),
                  "median_error_if_unchanged": float(same.median()) if len(same) else math.nan}
    tol = {"time": out["time"]["median_error"], "energy": out["energy"]["median_error"]}
    tol["edp"] = tol["time"] + tol["energy"]
    out["tolerance"] = tol
    out["best_gpu"] = {by: best_gpu_accuracy(res, by, tol[by]) for by in METRICS}
    return out


def _worst(res: pd.DataFrame, column: str) -> str:
    col = res[column].dropna()
    if col.empty:
        return ""
    r = res.loc[col.idxmax()]
    return f"{r.model} b{r.batch} {r.precision} {r['mode']} {r.source}->{r.target}"
