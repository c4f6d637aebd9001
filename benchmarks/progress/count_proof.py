"""The count proof's table (benchmarks/progress/count_proof.sh): each run of the experiment `count-proof`,
the script's own count (the last line of its output that says `N samples` or `N tokens`) against what
radt-ext counted in it: `summary/e2e_samples` (the whole run), `summary/samples` (its active phase, from
the first counted step: the first step's samples are left out with it), samples/s and J/sample over the
active phase, the progress source and its note (which names the unit).

    python3 benchmarks/progress/count_proof.py --store sqlite:///<dir>/mlflow.db --logs <dir> --out <dir> \
        [--radt-ext-file <radt_ext.__file__ the runs used> --repo <the checkout>]

Writes summary.json (every figure) and count_proof.md (the table); prints the table. Imports MLflow's
client only (no radt_ext): run it by its path.
"""
from __future__ import annotations

import argparse
import json
import os
import re

EXPERIMENT = "count-proof"
OWN = re.compile(r"\b(\d+) (samples|tokens)\b")


def own_count(log: str) -> tuple[int | None, str | None]:
    """(count, unit): the first stated on the last line of a script's output that states one (`layer_decode:
    25600 tokens (50 sequences x 128 tokens x batch 4)`: 25600); (None, None) if none does."""
    try:
        with open(log, errors="replace") as fh:
            found = [m for m in (OWN.search(line) for line in fh) if m]
    except OSError:
        return None, None
    return (int(found[-1].group(1)), found[-1].group(2)) if found else (None, None)


def rows(store: str, logs: str, experiment: str = EXPERIMENT) -> list[dict]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(store)
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    out = []
    for run in client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"]):
        name, m, tags = run.info.run_name, run.data.metrics, run.data.tags
        own, unit = own_count(os.path.join(logs, f"{name}.log"))
        counted = m.get("summary/e2e_samples")
        out.append({
            "script": name, "status": run.info.status, "own_count": own, "own_unit": unit,
            "e2e_samples": counted, "active_samples": m.get("summary/samples"),
            "equal": own is not None and counted is not None and counted == own,
            "relative_difference": None if not own or counted is None else (counted - own) / own,
            "throughput_samples_per_s": m.get("summary/throughput_samples_per_s"),
            "energy_per_sample_j": m.get("summary/energy_per_sample_j"),
            "steps_per_s": m.get("summary/throughput_steps_per_s"),
            "active_s": m.get("summary/active_s"),
            "progress_source": tags.get("radt_ext.progress_source"),
            "progress_note": tags.get("radt_ext.progress_note"),
            "run_id": run.info.run_id,
        })
    return out


def _n(value, digits: int = 0) -> str:
    if value is None:
        return "-"
    if digits:
        return f"{value:.{digits}g}"
    return f"{value:,.0f}".replace(",", " ")


def table(found: list[dict]) -> str:
    lines = ["| script | its own count | radt-ext: e2e_samples | active-phase samples | equal | samples/s | "
             "J/sample | source | note (the unit) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in found:
        own = f"{_n(r['own_count'])} {r['own_unit'] or ''}".strip()
        lines.append(f"| {r['script']} ({r['status']}) | {own} | {_n(r['e2e_samples'])} | {_n(r['active_samples'])} | "
                     f"{'yes' if r['equal'] else 'no'} | {_n(r['throughput_samples_per_s'])} | "
                     f"{_n(r['energy_per_sample_j'], 3)} | {r['progress_source'] or '-'} | {r['progress_note'] or '-'} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--logs", required=True, help="the folder holding <script>.log of each run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--experiment", default=EXPERIMENT)
    ap.add_argument("--radt-ext-file", default=None, help="radt_ext.__file__ as the runs imported it")
    ap.add_argument("--repo", default=None, help="the checkout, which the runs must not have imported")
    args = ap.parse_args(argv)
    found = rows(args.store, args.logs, args.experiment)
    from_checkout = None
    if args.radt_ext_file and args.repo:
        from_checkout = os.path.realpath(args.radt_ext_file).startswith(os.path.realpath(args.repo) + os.sep)
    summary = {"radt_ext_file": args.radt_ext_file, "radt_ext_from_checkout": from_checkout, "runs": found,
               "all_finished": bool(found) and all(r["status"] == "FINISHED" for r in found),
               "all_equal": bool(found) and all(r["equal"] for r in found)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=2)
    text = (f"radt_ext imported from {args.radt_ext_file} (from the checkout: {from_checkout})\n\n" + table(found))
    with open(os.path.join(args.out, "count_proof.md"), "w") as fh:
        fh.write(text)
    print(text, end="")
    return 0 if summary["all_finished"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
