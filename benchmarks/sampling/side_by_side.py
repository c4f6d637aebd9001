"""radt-ext's cost against the plain run, each pair at the same time: on a host of two GPUs the same unmodified
script runs plain on one GPU and under radt-ext on the other, started together, the GPUs swapped every round.
Whatever moves the host's speed between runs (its CPUs' clocks, its other tenants) moves both jobs of a pair
alike, so each pair's difference holds radt-ext's cost with far less of the spread that rounds run one after
another carry (benchmarks/sampling/overhead_plain.py `jobs`: one plain round to the next differs by 10-40 %).
What one job's listeners cost its neighbour on the other GPU counts against radt-ext here (it slows the plain
job too), so this measures the cost to the job radt-ext watches, not to the host.

    python -m benchmarks.sampling.side_by_side pairs --out DIR --kinds decoder,gru --configs run,sweep --repeats 8
    python -m benchmarks.sampling.side_by_side analyse --out DIR [--also DIR ...] [--json FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from pathlib import Path

from benchmarks.common import fmt, table
from benchmarks.sampling.overhead_plain import (DEFAULT_KINDS, KINDS, command, config_env, known_config,
                                                run_one, script_cmd, shuffled_rounds, sized)
from radt_ext.figures.repeats import estimate


def pairs(args) -> None:
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    kinds, configs = args.kinds.split(","), args.configs.split(",")
    for c in configs:
        if c == "plain" or not known_config(c):
            raise SystemExit(f"{c!r}: give radt-ext's configurations (run, sweep, LISTENER:RATE, ...); plain runs "
                             "beside each of them")
    gpus = args.gpus.split(",")
    if len(gpus) != 2:
        raise SystemExit("--gpus: two GPUs, e.g. 0,1")
    deadline = time.time() + args.budget_s
    amounts = sized(out, kinds, args.seconds, args.dry, config_env("plain", gpus[0]))
    (out / "amounts.json").write_text(json.dumps({"seconds": args.seconds, "amounts": amounts, "gpus": gpus}))
    for r, order in shuffled_rounds(kinds, configs, args.repeats, deadline, args.seed):
        plain_gpu, radt_gpu = (gpus[0], gpus[1]) if r % 2 == 0 else (gpus[1], gpus[0])
        for kind, config in order:
            recs = {}

            def one(how: str, cfg: str, gpu: str) -> None:
                name = f"{kind}-{cfg.replace(':', '_').replace('/', '-')}-{r}-{how}"
                stamp = out / "logs" / f"{name}.json"
                env = {**config_env(cfg, gpu), "RADT_EXT_TIMINGS": str(out / "logs" / f"{name}.timings.json")}
                job = script_cmd(kind, amounts[kind], args.dry)
                recs[how] = {**run_one(command(cfg, job, stamp, name, out, gpu), stamp, stamp.with_suffix(".log"),
                                       env), "gpu": gpu}

            threads = [threading.Thread(target=one, args=("plain", "plain", plain_gpu)),
                       threading.Thread(target=one, args=("radt", config, radt_gpu))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            rec = {"kind": kind, "config": config, "round": r, "amount": amounts[kind], **recs}
            with open(out / "pairs.jsonl", "a") as fh:
                fh.write(json.dumps(rec) + "\n")
            p, q = recs["plain"], recs["radt"]
            print(f"round {r} {kind:8s} {config:10s} plain own {fmt(p.get('own_s'), 3)} s (GPU {plain_gpu}), "
                  f"{config} own {fmt(q.get('own_s'), 3)} s (GPU {radt_gpu}), rc {p['rc']}/{q['rc']}", flush=True)


def _ci(xs: list[float]) -> tuple[float, float, float]:
    """Mean and its 95 % t-interval (nan bounds below two values)."""
    e = estimate(xs)
    return e.mean, (e.low if e.low is not None else float("nan")), (e.high if e.high is not None else float("nan"))


def summarise(folders: list[Path]) -> dict:
    """{kind: {config: {...}}}: each pair's cost in % of its plain job's own compute (and wall) time."""
    by: dict[tuple[str, str], list[dict]] = {}
    for f in folders:
        for line in (f / "pairs.jsonl").read_text().splitlines():
            rec = json.loads(line)
            p, q = rec["plain"], rec["radt"]
            if p.get("own_s") and q.get("own_s") and not p["rc"] and not q["rc"]:
                by.setdefault((rec["kind"], rec["config"]), []).append(rec)
    out: dict = {}
    for (kind, config), recs in sorted(by.items()):
        own = [100.0 * (r["radt"]["own_s"] / r["plain"]["own_s"] - 1) for r in recs]
        wall = [100.0 * (r["radt"]["job_wall_s"] / r["plain"]["job_wall_s"] - 1) for r in recs]
        extra = [r["radt"]["before_s"] + r["radt"]["after_s"] - r["plain"]["before_s"] - r["plain"]["after_s"]
                 for r in recs]
        m, lo, hi = _ci(own)
        wm, wlo, whi = _ci(wall)
        out.setdefault(kind, {})[config] = {
            "bound": KINDS[kind].bound, "pairs": len(recs), "own_cost_pct": m, "own_cost_ci95": [lo, hi],
            "own_cost_median_pct": statistics.median(own), "wall_cost_pct": wm, "wall_cost_ci95": [wlo, whi],
            "plain_own_s": [r["plain"]["own_s"] for r in recs], "radt_own_s": [r["radt"]["own_s"] for r in recs],
            "extra_s": [round(x, 3) for x in extra]}
    return out


def analyse(args) -> None:
    folders = [Path(args.out), *(Path(a) for a in args.also or ())]
    res = summarise(folders)
    rows = []
    for kind, by in res.items():
        for config, s in by.items():
            rows.append([kind, s["bound"], config, s["pairs"], fmt(statistics.median(s["plain_own_s"]), 2),
                         f"{s['own_cost_pct']:+.2f} ({s['own_cost_ci95'][0]:+.2f} .. {s['own_cost_ci95'][1]:+.2f})",
                         f"{s['own_cost_median_pct']:+.2f}",
                         f"{s['wall_cost_pct']:+.2f} ({s['wall_cost_ci95'][0]:+.2f} .. {s['wall_cost_ci95'][1]:+.2f})",
                         f"{min(s['extra_s']):.2f} .. {max(s['extra_s']):.2f} ({sum(x <= 0.5 for x in s['extra_s'])})"])
    print("Each pair: the same script plain on one GPU and under radt-ext on the other, started together, the GPUs "
          "swapped every round. Cost: radt-ext's job against the plain one beside it, mean over the pairs with its "
          "95 % t-interval, and the median; extra s: radt-ext's own time around its job beyond plain's (range; "
          "pairs within 0.5 s).\n")
    print(table(["kind", "bound", "config", "pairs", "plain own s (median)", "own cost % (95 % CI)", "median %",
                 "wall cost % (95 % CI)", "extra s"], rows))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="side_by_side", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pairs")
    p.add_argument("--out", required=True)
    p.add_argument("--kinds", default=",".join(DEFAULT_KINDS), help=f"of {', '.join(KINDS)}")
    p.add_argument("--configs", default="run,sweep")
    p.add_argument("--seconds", type=float, default=6.0, help="each job's own compute time, about")
    p.add_argument("--repeats", type=int, default=6)
    p.add_argument("--gpus", default="0,1")
    p.add_argument("--budget-s", type=float, default=3600.0, help="no round begun that would end past it")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dry", action="store_true", help="the scripts' CPU versions: plumbing only")
    a = sub.add_parser("analyse")
    a.add_argument("--out", required=True)
    a.add_argument("--also", action="append", help="another call's results folder")
    a.add_argument("--json", help="write the figures here too")
    args = ap.parse_args(argv)
    {"pairs": pairs, "analyse": analyse}[args.cmd](args)


if __name__ == "__main__":
    main()
