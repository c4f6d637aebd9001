"""How the ops profiler's metered windows read: the metering before against the metering now.

    python -m benchmarks.ops.ops_metering --repeats 3 --out results

For each configuration (`model:batch:precision:mode`) the network's phases and its `--ops` busiest
operations (forward, or inference) are measured `--repeats` times under each metering of
`radt_ext.ops.measure` in turn:
- `polled`: the counter read on the launching thread between 4 ms chunks, two in flight (until 2026-11-25);
- `threaded`: the counter read on a thread of its own while 10 ms chunks stay 30 ms queued ahead, the
  span counted in whole update periods (the profiler's metering now).
Per window it keeps the power, the energy per call and `busy`, the share of the window's GPU timeline its
chunks covered (1 = never idle between chunks). Then `ramp`: after `--idle` seconds of idle GPU the
busiest operation runs for `--ramp-s` seconds and the power of each counter update period is kept, so
how long the GPU's power takes to settle is seen. Needs a GPU with an energy counter for the meter;
`--device cpu` times only (`busy` still shows).
"""
from __future__ import annotations

import argparse
import math
import time

from benchmarks.common import fmt, median, table, write_results
from benchmarks.ops.ops_config import opened

CONFIGS = "resnet50:256:bf16:inference,mlp:65536:bf16:training,dlrm:65536:fp32:inference"


def meterings():
    from radt_ext.ops.measure import METERING, POLLED

    return {"polled": POLLED, "threaded": METERING}


def busiest(calls, mode: str, clock, k: int) -> list:
    """The k operations with the most time per step (count x a quick unmetered time)."""
    from radt_ext.ops.measure import measure

    timed = []
    for call in calls:
        fn = op_forward(call, mode)
        timed.append((call.count * measure(fn, clock, None, 0.01).time_ms, call))
    return [c for _, c in sorted(timed, key=lambda tc: -tc[0])[:k]]


def op_forward(call, mode: str):
    import torch

    from radt_ext.ops.capture import out_of_place

    def fn():
        with out_of_place(call.module), torch.set_grad_enabled(mode == "training"):
            return call()
    return fn


def ramp(fn, clock, meter, idle_s: float, seconds: float) -> list[dict]:
    """Per counter period, its power and when it ended (ms after the work started), after an idle pause."""
    from radt_ext.ops.measure import Feeder, Ticks, measure

    feeder = Feeder(fn, clock, measure(fn, clock, None, 0.02).time_ms / 1e3)
    clock.sync()
    time.sleep(idle_s)
    ticks = Ticks(meter, 0.0, threaded=True)
    while time.perf_counter() - ticks.t0 < seconds:
        feeder.step()
    ticks.stop()
    clock.sync()
    seen = ticks.seen  # from the first update on: the period before it began while the GPU was idle
    return [{"end_ms": round((b[0] - ticks.t0) * 1e3, 1), "power_w": round((b[1] - a[1]) / (b[0] - a[0]), 1)}
            for a, b in zip(seen, seen[1:]) if b[0] > a[0]]


def measure_config(config: str, repeats: int, n_ops: int, window_s: float, net_window_s: float, idle_s: float,
                   ramp_s: float, device) -> tuple[list[dict], dict]:
    from radt_ext.ops.capture import capture
    from radt_ext.ops.measure import measure
    from radt_ext.ops.network import NetworkRounds

    rows, ramps = [], {}
    with opened(config, device) as c:
        ops = busiest(capture(c.model, c.inputs, grad=c.mode == "training"), c.mode, c.clock, n_ops)
        phase = "forward" if c.mode == "training" else "inference"
        samples: dict[tuple[str, str, str], list] = {}
        for _ in range(repeats):
            for variant, metering in meterings().items():  # alternating, so drift hits both alike
                rounds = NetworkRounds(c.model, c.inputs, c.mode, c.clock, c.meter, net_window_s, metering)
                rounds.round()
                for net_phase, ws in rounds.windows.items():
                    samples.setdefault(("network", net_phase, variant), []).extend(ws)
                for call in ops:
                    w = measure(op_forward(call, c.mode), c.clock, c.meter, window_s, metering=metering)
                    samples.setdefault((f"{call.op} {call.name}", phase, variant), []).append(w)
        for (what, ph, variant), ws in samples.items():
            energy = [w.energy_mj for w in ws]
            mid = median(energy)
            rows.append({"config": config, "what": what, "phase": ph, "variant": variant, "windows": len(ws),
                         "time_ms": median(w.time_ms for w in ws), "power_w": median(w.power_w for w in ws),
                         "energy_mj": mid, "energy_spread": (max(energy) - min(energy)) / mid if mid == mid and mid > 0
                         else math.nan, "busy": median(w.busy for w in ws),
                         "window_s": median(w.window_s for w in ws)})
            print(rows[-1], flush=True)
        if c.meter is not None and ops:
            ramps = {"config": config, "op": f"{ops[0].op} {ops[0].name}", "idle_s": idle_s,
                     "periods": ramp(op_forward(ops[0], c.mode), c.clock, c.meter, idle_s, ramp_s)}
            print(ramps, flush=True)
    return rows, ramps


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=CONFIGS, help="model:batch:precision:mode, comma-separated")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ops", type=int, default=3, help="busiest operations measured per configuration")
    ap.add_argument("--window", type=float, default=0.1, help="an operation's window, seconds")
    ap.add_argument("--net-window", type=float, default=0.3, help="a network round's window, seconds")
    ap.add_argument("--idle", type=float, default=0.5, help="idle seconds before the ramp")
    ap.add_argument("--ramp-s", type=float, default=0.8, help="seconds of the ramp")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)
    if args.repeats < 1 or args.ops < 0:
        ap.error("--repeats must be >= 1 and --ops >= 0")
    device = torch.device(args.device)
    rows, ramps = [], []
    for config in [c for c in args.configs.split(",") if c]:
        try:
            got, rmp = measure_config(config, args.repeats, args.ops, args.window, args.net_window, args.idle,
                                      args.ramp_s, device)
            rows += got
            if rmp:
                ramps.append(rmp)
        except Exception as exc:
            rows.append({"config": config, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
            print(rows[-1], flush=True)
    text = (f"### Metered windows, polled against threaded ({args.repeats} repeats, op windows {args.window:g} s, "
            f"network {args.net_window:g} s)\n\n"
            + table(["config", "what", "phase", "metering", "time ms", "power W", "energy mJ per call",
                     "energy spread", "busy", "span s", "error"],
                    [[r["config"], r.get("what", "–"), r.get("phase", "–"), r.get("variant", "–"),
                      fmt(r.get("time_ms"), 4), fmt(r.get("power_w"), 1), fmt(r.get("energy_mj"), 3),
                      fmt(r.get("energy_spread"), 3), fmt(r.get("busy"), 3), fmt(r.get("window_s"), 3),
                      r.get("error", "")] for r in rows]))
    for r in ramps:
        text += (f"\n\nRamp of {r['op']} ({r['config']}) after {r['idle_s']:g} s idle, power per counter period: "
                 + ", ".join(f"{p['power_w']:.0f} W to {p['end_ms']:.0f} ms" for p in r["periods"]))
    write_results(args.out, "ops_metering", {"rows": rows, "ramps": ramps, "args": vars(args)}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
