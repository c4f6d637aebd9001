"""Predict a workload's whole-network time and energy on another GPU from its profile on one GPU.

A profile measured on GPU A moves to GPU B operation by operation, and the network by the
count-weighted mean of its operations' ratios per phase (so what the operations do not explain —
overlap — is carried over from A's measurement, and a network's time above its summed operations,
launch gaps, is carried over unchanged: the host does not get faster with the GPU).

Two ways to get an operation's B/A ratio (`fit(df, method=...)`):
- `roofline` (the default): from the operation's own measurement and the two GPUs' specifications. The
  share of its time on A that its bytes need at A's memory bandwidth moves at B's bandwidth (or, where
  its FLOPs at A's peak need the larger share, that share at B's peak), and the rest — launches,
  latency, what neither explains — carries over unchanged. Its mean power moves by one factor per pair
  of GPUs: the median power ratio (weighted by energy) over every operation the dataset measured on both
  (H200/H100 0.97: the GPUs share power limit and clocks). Nothing else is fitted, so no network's own
  operations shape its prediction.
- `fitted`: per operation type, two scikit-learn regressors fitted on every operation measured on two
  GPUs: the log ratio of its time on B to its time on A, and the same for its mean power, on the
  operation's FLOPs, bytes, arithmetic intensity, phase, precision, its measured time and power on A,
  and the B/A ratios of the GPUs' specifications. Within the catalog's families it errs a median
  2.3 %; on a family it was not fitted on, more (docs/ops.md).

The host: a step's time is at least what its host takes to issue it (the profile's `host_ms` per network
phase, measured on an idle GPU). A prediction moves that part by the two hosts' ratio (`host.ratio`, from
each machine's benchmark: the source's recorded with the profile, the target's named by the caller: a
machine of the dataset, or one measured with `radt-ext ops host`): a phase's time on B is the larger of its
GPU prediction (with the network's time beyond its operations, launch gaps, moved by the ratio as well) and
its host time times the ratio, and its energy changes by the GPU's waiting power (its idle power before the
profile) over the time the host adds or saves. Where the target's host is not known, the source's is assumed.

Every prediction carries an interval: the source profile's measured spread (how far its network rounds
disagreed), plus the predictor's own error (its 90th percentile with the network's family held out), plus
the host's share of the predicted step times `HOST_ERROR` (a measured target host) or `HOST_ASSUMED` (an
assumed one). Where the host sets the profile's pace (`pace`: its issue time near or above its step), the
prediction's point is no better than the target machine's host, which no benchmark here foretells: its
interval is then divided and multiplied by 1 + the spread measured between machines with the same GPU.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from radt_ext.errors import UsageError
from radt_ext.ops import host as hosts, pace
from radt_ext.ops.dataset import KEYS
from radt_ext.ops.gpus import GpuSpec, lookup

PHASES = {"forward": 0, "backward": 1, "inference": 2}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
MIN_ROWS = 30  # an op type with fewer training rows uses the model of all types
METRICS = ("time", "energy", "edp")
METHODS = ("roofline", "fitted")
HOST_ERROR = 0.10  # relative error allowed on a step's host part moved by two measured hosts' ratio
HOST_ASSUMED = 0.25  # ... where the target's host is not known and the source's stands for it


PAIR_KEY = ["model", "batch", "precision", "mode", "order", "phase"]
# the catalog's architecture families: a family is held out whole to stand for a network never seen
FAMILIES = {"resnet18": "resnet", "resnet50": "resnet"}


def family(model: str) -> str:
    return FAMILIES.get(model, model)


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


def roofline_ratio(rows: pd.DataFrame, source: GpuSpec, target: GpuSpec) -> np.ndarray:
    """Each operation's time on `target` over its time on `source`: the share of its measured time that
    its bytes need at the source's bandwidth (`memory`) or its FLOPs at the source's peak (`compute`),
    whichever is larger, moves at the target's figure; the rest carries over unchanged."""
    seconds = rows["time_ms"].astype(float).clip(lower=1e-9).to_numpy() * 1e-3
    nbytes = rows["bytes"].astype(float).clip(lower=0).fillna(0).to_numpy()
    flops = rows["flops"].astype(float).clip(lower=0).fillna(0).to_numpy()
    peak_s = rows["precision"].map(lambda p: source.peak_tflops(p)).astype(float).to_numpy() * 1e12
    peak_t = rows["precision"].map(lambda p: target.peak_tflops(p)).astype(float).to_numpy() * 1e12
    memory = np.minimum(1.0, nbytes / (source.mem_bandwidth_gbs * 1e9) / seconds)
    compute = np.minimum(1.0, flops / peak_s / seconds)
    bound = np.maximum(memory, compute)
    scale = np.where(memory >= compute, source.mem_bandwidth_gbs / target.mem_bandwidth_gbs, peak_s / peak_t)
    return 1.0 - bound + bound * scale


def _regressor():
    from sklearn.ensemble import GradientBoostingRegressor

    return GradientBoostingRegressor(n_estimators=150, max_depth=3, learning_rate=0.08, subsample=0.9,
                                     random_state=0)


@dataclass
class OpModels:
    """Per-op-type regressors of log(target/source) for time and for power, and a fallback for all types;
    or, with `method="roofline"`, none: the ratios come from the operations and the GPUs' specifications."""
    time: dict = field(default_factory=dict)
    power: dict = field(default_factory=dict)
    method: str = "fitted"

    def _apply(self, table: dict, rows: pd.DataFrame, source: GpuSpec, target: GpuSpec) -> np.ndarray:
        x = features(rows, source, target)
        out = np.zeros(len(rows))
        if not table:
            return out
        for op, idx in _by_op(rows):
            out[idx] = table.get(op, table["*"]).predict(x.iloc[idx])
        return out

    def time_ratio(self, rows, source, target) -> np.ndarray:
        if self.method == "roofline":
            return roofline_ratio(rows, source, target)
        return 10 ** self._apply(self.time, rows, source, target)

    def power_ratio(self, rows, source, target) -> np.ndarray:
        if self.method == "roofline":
            return np.full(len(rows), self.power.get((source.short, target.short), 1.0))
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
            m = rows[rows.gpu == a].merge(rows[rows.gpu == b][PAIR_KEY + ["gpu", "time_ms", "energy_mj"]],
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


def power_factors(src: pd.DataFrame, y_power: np.ndarray) -> dict:
    """{(source, target): the energy-weighted median of the operations' power ratios} (see `pairs`)."""
    out = {}
    ok = np.isfinite(y_power)
    for (a, b), idx in src[ok].groupby(["gpu", "gpu_b"]).indices.items():
        y = y_power[ok][idx]
        w = (src.energy_mj * src["count"]).to_numpy()[ok][idx].clip(min=0)
        order = np.argsort(y)
        cum = np.cumsum(w[order])
        if cum[-1] > 0:
            out[(lookup(a).short, lookup(b).short)] = float(10 ** y[order][np.searchsorted(cum, cum[-1] / 2)])
    return out


def fit(df: pd.DataFrame, method: str = "roofline") -> OpModels:
    """The per-operation models: fitted per op type on every pair of GPUs that measured the same
    operation (`fitted`), or only one power factor per pair of GPUs (`roofline`)."""
    if method not in METHODS:
        raise UsageError(f"unknown prediction method {method!r}; choose {' or '.join(METHODS)}")
    x, src, y_time, y_power = pairs(df)
    if method == "roofline":
        return OpModels(power=power_factors(src, y_power), method="roofline")
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
    spread: float = 0.0  # the source profile's network rounds: (largest - smallest) / median, time-weighted
    error: tuple[float, float] = (0.0, 0.0)  # the predictor's relative error allowed for (time, energy)
    energy_spread: float | None = None  # the same of the rounds' energy per call (None: `spread` stands for it)
    host_share: float = 0.0  # the host's issue time over the predicted step (0 where the profile has none)
    host_ratio: float = 1.0  # the target host's cost per operation over the source's, weighted by phase time
    host: str = ""  # the host assumed for the target
    host_error: float = 0.0  # added to the interval: host_share x HOST_ERROR or HOST_ASSUMED
    machine_spread: float = 0.0  # a host-bound step's spread between machines with one GPU (`pace`); else 0

    @property
    def edp(self) -> float:
        return self.time_ms * self.energy_mj

    def value(self, by: str) -> float:
        return {"time": self.time_ms, "energy": self.energy_mj, "edp": self.edp}[by]

    def interval(self, by: str, across_machines: bool = True) -> tuple[float, float]:
        """(low, high) of `by`: the value ± (the source's spread of time or of energy + the predictor's error +
        the host's), then, for a host-bound step (`across_machines`), ÷ and × (1 + `machine_spread`). Energy
        takes the same factor: the GPU's work is the same on another host, and the time a host adds or saves
        is spent waiting at lower power, so energy moves by no more than time does."""
        if by == "edp":
            (tl, th), (el, eh) = self.interval("time", across_machines), self.interval("energy", across_machines)
            return tl * el, th * eh
        measured = self.spread if by == "time" or self.energy_spread is None else self.energy_spread
        width = measured + self.error[0 if by == "time" else 1] + self.host_error
        v = self.value(by)
        low, high = max(0.0, v * (1 - width)), v * (1 + width)
        if across_machines and self.machine_spread:
            low, high = low / (1 + self.machine_spread), high * (1 + self.machine_spread)
        return low, high


def spread(rows: pd.DataFrame, column: str = "spread") -> float:
    """A profile's measured spread per step: its network phases' round spreads (`spread` of time, weighted by
    time; `energy_spread`, weighted by energy), 0 where the profile predates the column."""
    net = rows[rows.op == "network"]
    w = net["time_ms" if column == "spread" else "energy_mj"].astype(float)
    s = net[column].astype(float).fillna(0.0) if column in net else pd.Series(0.0, index=net.index)
    return float((s * w).sum() / w.sum()) if w.sum() > 0 else 0.0


def machine_host(df: pd.DataFrame, gpu: str) -> dict | None:
    """The host the dataset measured `gpu` on: the median of its profiles' host benchmarks (None: none)."""
    rows = df[df.gpu == gpu]
    if rows.empty or "host_dispatch_us" not in rows.columns:
        return None
    return hosts.median_host([hosts.from_rows(p) for _, p in rows.groupby(KEYS[1:])])


def _energy_spread(rows: pd.DataFrame) -> float | None:
    net = rows[rows.op == "network"]
    has = "energy_spread" in net and net.energy_spread.notna().any()
    return spread(rows, "energy_spread") if has else None


def _first(rows: pd.DataFrame, column: str) -> float:
    if column not in rows.columns or rows.empty:
        return math.nan
    try:
        return float(rows[column].iloc[0])
    except (TypeError, ValueError):
        return math.nan


def predict(models: OpModels, rows: pd.DataFrame, source: str, target: str,
            error: tuple[float, float] = (0.0, 0.0), target_host: dict | None = None,
            source_host: dict | None = None, use_host: bool = True) -> Prediction:
    """Move one profile's rows (measured on `source`) to GPU `target` on the host `target_host` (a
    `host.benchmark`; None: the source's host); its interval is the profile's measured spread plus `error`
    (the predictor's relative error for time and energy) plus the host's share times the host's error.
    `source_host` defaults to the benchmark the rows carry (`host_*` columns). `use_host=False` leaves the
    host out altogether (the host-blind predictor: launch gaps carried over unchanged, no host floor)."""
    src, tgt = lookup(source), lookup(target)
    net = rows[rows.op == "network"]
    if net.empty:
        raise UsageError("the profile has no whole-network rows to scale")
    if src == tgt:
        return Prediction(tgt.short, *_net(rows), measured=True, spread=spread(rows),
                          energy_spread=_energy_spread(rows), host="the profile's own (measured)")
    source_host = source_host if source_host is not None else hosts.from_rows(rows)
    if not use_host:
        source_host = target_host = None
    known = source_host is not None and target_host is not None
    waiting_w = _first(rows, "idle_power_w")
    waiting_w = waiting_w if math.isfinite(waiting_w) else 0.0
    ops = operation_rows(rows)
    ratio_t = models.time_ratio(ops, src, tgt)
    ratio_p = models.power_ratio(ops, src, tgt)
    r_e = ratio_t * ratio_p
    t_src = (ops.time_ms * ops["count"]).to_numpy()
    e_src = (ops.energy_mj * ops["count"]).to_numpy()
    phases = ops.phase.to_numpy()
    time_ms = energy_mj = host_ms = weighted_ratio = 0.0
    for _, row in net.iterrows():
        mine = phases == row.phase
        if not mine.any():
            continue
        rho = hosts.ratio(source_host, target_host, row.phase) if known else 1.0
        rho = rho if math.isfinite(rho) else 1.0
        issue = row.get("host_ms", math.nan) if use_host else math.nan
        issue = min(float(issue), float(row.time_ms)) if issue is not None and math.isfinite(issue) else 0.0
        gap = max(0.0, row.time_ms - t_src[mine].sum())  # the network's time beyond its operations: the host's
        gpu = (row.time_ms - gap) * (t_src[mine] * ratio_t[mine]).sum() / t_src[mine].sum()
        phase_ms = max(gpu + gap * rho, issue * rho)  # no faster than its host issues it
        time_ms += phase_ms
        host_ms += issue * rho
        weighted_ratio += rho * row.time_ms
        e = e_src[mine]
        energy_mj += row.energy_mj * (e * r_e[mine]).sum() / e.sum() + waiting_w * (phase_ms - gpu - gap) \
            if np.isfinite(e).all() and e.sum() > 0 else math.nan
    share = min(1.0, host_ms / time_ms) if time_ms > 0 else 0.0
    if known:
        label = hosts.label(target_host)
    elif target_host is not None:
        label = f"{hosts.label(target_host)} (the profile has no host record: its host part carried over)"
    elif source_host is not None:
        label = f"the source's ({hosts.label(source_host)}), assumed"
    elif use_host:
        label = "the source's, assumed (the profile has no host benchmark)"
    else:
        label = "left out"
    return Prediction(tgt.short, float(time_ms), float(energy_mj), spread=spread(rows), error=tuple(error),
                      energy_spread=_energy_spread(rows), host_share=share,
                      host_ratio=weighted_ratio / float(net.time_ms.sum()) if net.time_ms.sum() > 0 else 1.0,
                      host=label, host_error=share * (HOST_ERROR if known else HOST_ASSUMED),
                      machine_spread=pace.of(rows, src.short).machine_spread)


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


HOLD_OUT = {"model": lambda m: m, "family": family}


def validate(df: pd.DataFrame, progress=None, hold_out: str = "model", method: str = "roofline") -> pd.DataFrame:
    """Leave one model (or one family, `hold_out="family"`) out: fit without it, move each of its profiles
    from each GPU to every other one and compare with what that GPU measured. One row per (profile,
    source → target)."""
    gpus = sorted(df.gpu.unique())
    if len(gpus) < 2:
        raise UsageError("validation needs profiles from at least two GPUs")
    if hold_out not in HOLD_OUT:
        raise UsageError(f"unknown hold-out {hold_out!r}; choose model or family")
    group = df.model.map(HOLD_OUT[hold_out])
    out = []
    for model in sorted(group.unique()):
        fitted = fit(df[group != model], method=method)
        held = df[group == model]
        for key, rows in held.groupby(KEYS[1:]):
            by_gpu = {g: rows[rows.gpu == g] for g in gpus if (rows.gpu == g).any()}
            for a in by_gpu:
                for b in by_gpu:
                    if a == b:
                        continue
                    pred = predict(fitted, by_gpu[a], a, b, target_host=hosts.from_rows(by_gpu[b]))
                    net_a, net_b = _net(by_gpu[a]), _net(by_gpu[b])
                    out.append({**dict(zip(KEYS[1:], key)), "held_out": model, "source": a, "target": b,
                                "time_ms": net_b[0], "pred_time_ms": pred.time_ms, "source_time_ms": net_a[0],
                                "energy_mj": net_b[1], "pred_energy_mj": pred.energy_mj,
                                "source_energy_mj": net_a[1], "source_spread": spread(by_gpu[a]),
                                "target_spread": spread(by_gpu[b]),
                                "source_energy_spread": _energy_spread(by_gpu[a]),
                                "host_share": pred.host_share, "host_ratio": pred.host_ratio,
                                "host_error": pred.host_error})
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
