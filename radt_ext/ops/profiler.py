"""Profile one network at one batch size, precision and mode: every distinct operation and the
whole network, each timed and metered over its own window.

Training measures each operation's forward (with autograd recording) and backward (gradients of
its inputs and parameters over independent copies, see `backward`); inference measures the forward
in eval mode without gradients. The whole network is measured the same way, in rounds before,
between and after the operations (see `network`). The result is one table: a row per (operation,
phase) and a row per network phase (`op == "network"`).
"""
from __future__ import annotations

import contextlib
import math
import os
import platform
import time
from dataclasses import asdict, dataclass, field, replace

import pandas as pd
import torch

from radt_ext.errors import UsageError
from radt_ext.ops import NET_WINDOW_S, WINDOW_S, backward, cost, host
from radt_ext.ops.capture import OpCall, capture, out_of_place, tensors
from radt_ext.ops.catalog import Network
from radt_ext.ops.measure import METERING, Clock, Meter, Window, measure
from radt_ext.ops.network import NEAR, ROUNDS, WARMUP_STEPS, NetworkRounds

CUDNN_BENCHMARK = False

MODES = ("training", "inference")
COLUMNS = ["order", "op", "name", "count", "input_shapes", "params", "phase", "flops", "bytes",
           "time_ms", "energy_mj", "power_w", "reps", "window_s", "spread", "busy", "timeline_w",
           "energy_spread", "host_ms"]
# columns newer than the first dataset: NaN when a file lacks them
ADDED = ("spread", "busy", "timeline_w", "energy_spread", "host_ms")


TEXT = ("op", "name", "input_shapes", "params", "phase")


def read_table(path) -> pd.DataFrame:
    """A profile table (or a dataset) from CSV; empty text stays "" rather than NaN."""
    df = pd.read_csv(path)
    for c in ADDED:
        if c not in df.columns:
            df[c] = math.nan
    for c in TEXT:
        if c in df.columns:
            df[c] = df[c].fillna("").astype(str)
    return df


@dataclass
class Profile:
    table: pd.DataFrame
    meta: dict = field(default_factory=dict)

    def network(self, column: str = "time_ms") -> float:
        """Whole-network value per step (training: forward + backward)."""
        net = self.table[self.table.op == "network"]
        return float(net[column].sum(min_count=1))

    def ops_sum(self, column: str = "time_ms") -> float:
        """Sum over operations, each weighted by how often the network calls it."""
        ops = self.table[self.table.op != "network"]
        return float((ops[column] * ops["count"]).sum(min_count=1))


def _measure_call(call: OpCall, mode: str, clock: Clock, meter: Meter | None, window_s: float) -> list[dict]:
    with out_of_place(call.module):
        with torch.set_grad_enabled(mode == "training"):
            out = tensors(call())
            flops = cost.forward_flops(call, out)
            if math.isnan(flops):
                flops = cost.counted_flops(call)
            rows = [_row(call, "forward" if mode == "training" else "inference", flops,
                         cost.forward_bytes(call, out), measure(call, clock, meter, window_s))]
            del out
        if mode == "training" and call.needs_grad:
            with torch.enable_grad():
                found = backward.amortised(call, clock.sync)
                if found is not None:
                    bwd, k, outs = found
                    w = measure(bwd, clock, meter, window_s)
                    rows.append(_row(call, "backward", cost.backward_flops(call, flops),
                                     cost.backward_bytes(call, outs), per_copy(w, k)))
                del found
    return rows


def per_copy(w: Window, k: int) -> Window:
    """A window of calls that each ran k copies of an operation, per copy."""
    return replace(w, time_ms=w.time_ms / k, energy_mj=w.energy_mj / k, reps=w.reps * k, host_ms=w.host_ms / k,
                   time_fast_ms=w.time_fast_ms / k)


def _row(call: OpCall, phase: str, flops: float, nbytes: int, w) -> dict:
    return {"order": call.order, "op": call.op, "name": call.name, "count": call.count,
            "input_shapes": call.input_shapes, "params": call.params, "phase": phase, "flops": flops,
            "bytes": nbytes, "time_ms": w.time_ms, "energy_mj": w.energy_mj, "power_w": w.power_w,
            "reps": w.reps, "window_s": w.window_s, "spread": math.nan, "busy": w.busy,
            "timeline_w": w.timeline_w, "energy_spread": math.nan, "host_ms": w.host_ms}


def libraries() -> dict:
    """What picks a GPU's kernels, where torch shows it: cuDNN's version and autotuning, TF32, determinism,
    the BLAS library and cuBLAS's workspace setting (the environment's CUBLAS_WORKSPACE_CONFIG)."""
    out = {"tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_cudnn": torch.backends.cudnn.allow_tf32,
           "cudnn_version": torch.backends.cudnn.version(), "cudnn_deterministic": torch.backends.cudnn.deterministic,
           "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
           "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG", ""),
           "matmul_precision": torch.get_float32_matmul_precision()}
    try:
        out["blas_library"] = str(torch.backends.cuda.preferred_blas_library()).rpartition(".")[2]
    except (AttributeError, RuntimeError):
        pass
    return out


@contextlib.contextmanager
def cudnn_pinned():
    """cuDNN's heuristic algorithm choice (no autotuning) for the whole profile, restored afterwards:
    autotuning per shape would cost seconds per profile and may pick differently for network and op."""
    was = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = CUDNN_BENCHMARK
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = was


def profile(net: Network, mode: str, device: torch.device, meter: Meter | None, window_s: float = WINDOW_S,
            net_window_s: float = NET_WINDOW_S, net_rounds: int = ROUNDS, pin: bool = True) -> Profile:
    """Profile `net` in `mode`; raises UsageError with one line when the network cannot run. On a GPU the
    host is benchmarked first (once per process, `host.measured`), and with `pin` the launching thread and
    the meter's reading thread are kept on CPUs of their own for the profile (`host.pinned`)."""
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}; choose training or inference")
    if net_rounds < 2:
        raise UsageError(f"{net_rounds} network rounds: give at least 2 (one before the operations, one after)")
    started = time.perf_counter()
    clock = Clock(device)
    model = net.module.train(mode == "training")
    try:
        calls = capture(model, net.inputs, grad=mode == "training", kwargs=net.kwargs)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:
        raise UsageError(f"{net.name} does not run on these inputs: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if not calls:
        raise UsageError(f"{net.name} has no operation the profiler can measure (no leaf modules)")
    machine = host.measured(device)
    with cudnn_pinned(), host.pinned(device, pin) as placement:  # the same convolution algorithms for network and ops
        state = getattr(meter, "state", None)
        idle_state = state() if state else None  # before the first step
        rounds = NetworkRounds(model, net.inputs, mode, clock, meter, net_window_s, kwargs=net.kwargs)
        at = {round(i * len(calls) / (net_rounds - 1)) for i in range(net_rounds - 1)}  # before and between the ops
        rows = []
        for i, call in enumerate(calls):
            if i in at:
                rounds.round()
            rows += _measure_call(call, mode, clock, meter, window_s)
        rounds.round()  # and after them
    rows = rounds.rows() + rows
    table = pd.DataFrame(rows, columns=COLUMNS)
    ops = table[table.op != "network"]
    for phase in table[table.op == "network"].phase:  # the network's FLOPs and bytes: its operations'
        mine = ops[ops.phase == phase]
        at = (table.op == "network") & (table.phase == phase)
        table.loc[at, "flops"] = float((mine.flops * mine["count"]).sum())
        table.loc[at, "bytes"] = float((mine["bytes"] * mine["count"]).sum())
    meta = {"model": net.name, "mode": mode, "device": str(device), "ops_distinct": len(calls),
            "ops_total": sum(c.count for c in calls), "window_s": window_s, "net_window_s": net_window_s,
            "net_rounds": net_rounds, "cudnn_benchmark": CUDNN_BENCHMARK, "metering": asdict(METERING),
            "torch": torch.__version__, "python": platform.python_version(),
            "warmup_steps": WARMUP_STEPS, "warmup_s": round(rounds.warmup_s, 4),
            "net_time": "fastest tenth of the rounds' chunks",
            "net_energy": f"median of the rounds within {NEAR:.0%} of the fastest",
            "host": machine, "placement": placement, "round_details": rounds.details,
            "profile_s": round(time.perf_counter() - started, 3)}
    if idle_state:
        meta["state_before"] = idle_state
    if device.type == "cuda":
        meta.update(libraries())
    return Profile(table, meta)
