"""Why a network's measured rounds disagree: the same network measured round after round, three ways.

    python -m benchmarks.ops.ops_spread --rounds 6 --out results

The ops profiler measures each network in rounds spread over a profile (`radt_ext.ops.network`) and
records their `spread` (largest minus smallest round over the median). This measures the network's
rounds in one place, back to back, so what makes them disagree can be told apart:
- `metered`: each round a metered window as the profiler takes it (the energy counter polled
  between chunks);
- `timed`: each round a timed window without the meter (no counter read between chunks);
- `metered_gap`: metered, with `--gap` seconds of idle GPU before each round (as when other
  windows or the host's work come between rounds).
For each round it keeps the time per call, the power, and the GPU's SM clock just before it.
Configurations: `model:batch:precision:mode` (`--configs`). Needs the GPU for the meter; `--device cpu`
measures `timed` only.
"""
from __future__ import annotations

import argparse
import time

from benchmarks.common import fmt, table, write_results
from benchmarks.ops.ops_config import opened

CONFIGS = ("mlp:512:bf16:inference,mlp:512:bf16:training,dlrm:1024:fp32:inference,vit:32:bf16:inference,"
           "resnet50:32:bf16:training")
VARIANTS = ("metered", "timed", "metered_gap")


def sm_clock() -> float:
    try:
        from listeners.nvml_backend import nvml

        nv = nvml()
        return float(nv.nvmlDeviceGetClockInfo(nv.nvmlDeviceGetHandleByIndex(0), nv.NVML_CLOCK_SM))
    except Exception:
        return float("nan")


def measure_config(config: str, variants: list[str], rounds: int, gap: float, window_s: float, device) -> list[dict]:
    from radt_ext.ops.network import NetworkRounds, combined

    rows = []
    with opened(config, device) as c:
        for variant in variants:
            use = None if variant == "timed" else c.meter
            if variant != "timed" and c.meter is None:
                continue
            nr = NetworkRounds(c.model, c.inputs, c.mode, c.clock, use, window_s)
            clocks = []
            for _ in range(rounds):
                if variant == "metered_gap":
                    time.sleep(gap)
                clocks.append(sm_clock())
                nr.round()
            for phase, ws in nr.windows.items():
                times = [w.time_ms for w in ws]
                whole = combined(ws)  # the median round and spread as the profiler computes them
                rows.append({"config": config, "variant": variant, "phase": phase, "rounds": len(ws),
                             "times_ms": times, "power_w": [w.power_w for w in ws], "sm_clock_mhz": clocks,
                             "median_ms": whole["time_ms"], "spread": whole["spread"],
                             "spread_first3": combined(ws[:3])["spread"]})
                print(rows[-1], flush=True)
    return rows


def main(argv=None) -> int:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=CONFIGS, help="model:batch:precision:mode, comma-separated")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--gap", type=float, default=0.5, help="idle seconds before each metered_gap round")
    ap.add_argument("--window", type=float, default=0.3, help="seconds per round's window (the grid's network window)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--out", default="benchmark-results")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        ap.error(f"unknown variant(s) {', '.join(unknown)}; choose from {', '.join(VARIANTS)}")
    device = torch.device(args.device)
    rows = []
    for config in [c for c in args.configs.split(",") if c]:
        try:
            rows += measure_config(config, variants, args.rounds, args.gap, args.window, device)
        except Exception as exc:
            rows.append({"config": config, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})
            print(rows[-1], flush=True)
    text = (f"### A network's rounds back to back ({args.rounds} rounds, {args.window:g} s windows, "
            f"gap {args.gap:g} s)\n\n"
            + table(["config", "variant", "phase", "median ms", "spread, all rounds", "spread, first 3",
                     "SM clock MHz before rounds (min–max)", "error"],
                    [[r["config"], r.get("variant", "–"), r.get("phase", "–"), fmt(r.get("median_ms"), 3),
                      fmt(r.get("spread"), 3), fmt(r.get("spread_first3"), 3),
                      (f"{fmt(min(r['sm_clock_mhz']), 0)}–{fmt(max(r['sm_clock_mhz']), 0)}"
                       if r.get("sm_clock_mhz") else "–"), r.get("error", "")] for r in rows]))
    write_results(args.out, "ops_spread", {"rows": rows, "args": vars(args)}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
