"""Profile one network at one batch size, precision and mode: every distinct operation and the
whole network, each timed and metered over its own window.

Training measures each operation's forward (with autograd recording) and backward (gradients of
its inputs and parameters, the graph kept and replayed); inference measures the forward in eval
mode without gradients. The whole network is measured the same way. The result is one table:
a row per (operation, phase) and a row per network phase (`op == "network"`).
"""
from __future__ import annotations

import math
import platform
import time
from dataclasses import dataclass, field

import pandas as pd
import torch

from radt_ext.errors import UsageError
from radt_ext.ops import backward, cost
from radt_ext.ops.capture import OpCall, capture, out_of_place, tensors
from radt_ext.ops.catalog import Network
from radt_ext.ops.measure import Clock, Meter, Window, measure

MODES = ("training", "inference")
COLUMNS = ["order", "op", "name", "count", "input_shapes", "params", "phase", "flops", "bytes",
           "time_ms", "energy_mj", "power_w", "reps", "window_s"]


TEXT = ("op", "name", "input_shapes", "params", "phase")


def read_table(path) -> pd.DataFrame:
    """A profile table (or a dataset) from CSV; empty text stays "" rather than NaN."""
    df = pd.read_csv(path)
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


def _backward(outs: list[torch.Tensor], wrt: list[torch.Tensor]):
    grads = [torch.randn_like(t) for t in outs]
    return lambda: torch.autograd.grad(outs, wrt, grads, retain_graph=True, allow_unused=True)


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
    return Window(time_ms=w.time_ms / k, energy_mj=w.energy_mj / k, power_w=w.power_w, reps=w.reps * k,
                  window_s=w.window_s)


def _row(call: OpCall, phase: str, flops: float, nbytes: int, w) -> dict:
    return {"order": call.order, "op": call.op, "name": call.name, "count": call.count,
            "input_shapes": call.input_shapes, "params": call.params, "phase": phase, "flops": flops,
            "bytes": nbytes, "time_ms": w.time_ms, "energy_mj": w.energy_mj, "power_w": w.power_w,
            "reps": w.reps, "window_s": w.window_s}


def profile(net: Network, mode: str, device: torch.device, meter: Meter | None, window_s: float = 0.1,
            net_window_s: float | None = None) -> Profile:
    """Profile `net` in `mode`; raises UsageError with one line when the network cannot run."""
    if mode not in MODES:
        raise UsageError(f"unknown mode {mode!r}; choose training or inference")
    started = time.perf_counter()
    clock = Clock(device)
    model = net.module.train(mode == "training")
    try:
        calls = capture(model, net.inputs, grad=mode == "training")
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:
        raise UsageError(f"{net.name} does not run on these inputs: {type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    if not calls:
        raise UsageError(f"{net.name} has no operation the profiler can measure (no leaf modules)")
    net_window_s = net_window_s or 2 * window_s
    rows = _network_rows(model, net.inputs, mode, clock, meter, net_window_s)
    for call in calls:
        rows += _measure_call(call, mode, clock, meter, window_s)
    table = pd.DataFrame(rows, columns=COLUMNS)
    ops = table[table.op != "network"]
    for phase in table[table.op == "network"].phase:  # the network's FLOPs and bytes: its operations'
        mine = ops[ops.phase == phase]
        at = (table.op == "network") & (table.phase == phase)
        table.loc[at, "flops"] = float((mine.flops * mine["count"]).sum())
        table.loc[at, "bytes"] = float((mine["bytes"] * mine["count"]).sum())
    meta = {"model": net.name, "mode": mode, "device": str(device), "ops_distinct": len(calls),
            "ops_total": sum(c.count for c in calls), "window_s": window_s, "net_window_s": net_window_s,
            "torch": torch.__version__, "python": platform.python_version(),
            "profile_s": round(time.perf_counter() - started, 3)}
    if device.type == "cuda":
        meta["tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
        meta["tf32_cudnn"] = torch.backends.cudnn.allow_tf32
    return Profile(table, meta)


def _network_rows(model, inputs, mode, clock, meter, window_s) -> list[dict]:
    fwd = (lambda: model(*inputs))
    base = {"order": -1, "op": "network", "name": "", "count": 1, "input_shapes": ";".join(
        "x".join(map(str, t.shape)) for t in inputs), "params": ""}
    rows = []
    with torch.set_grad_enabled(mode == "training"):
        w = measure(fwd, clock, meter, window_s)
        rows.append({**base, "phase": "forward" if mode == "training" else "inference", "flops": math.nan,
                     "bytes": math.nan, **_w(w)})
    if mode == "training":
        with torch.enable_grad():
            outs = [t for t in tensors(fwd()) if t.requires_grad]
            wrt = [p for p in model.parameters() if p.requires_grad]
            w = measure(_backward(outs, wrt), clock, meter, window_s)
            del outs
        rows.append({**base, "phase": "backward", "flops": math.nan, "bytes": math.nan, **_w(w)})
    return rows


def _w(w) -> dict:
    return {"time_ms": w.time_ms, "energy_mj": w.energy_mj, "power_w": w.power_w, "reps": w.reps,
            "window_s": w.window_s}
