"""Turn the output of benchmarks/sampling/power_timeline_cost.sh into committed files.

    python benchmarks/sampling/ingest_power_timeline_cost.py RESULTS_DIR [--kind nvidia-h100-x1]

RESULTS_DIR holds power_sampling.tar.gz (or its unpacked contents). Copies the recorded trace
into listeners/traces/ (checked: replays through the listeners, under 1 MB) and every table,
JSON and log into docs/benchmarks/gpu/power_sampling/, with a COMMAND.md saying what ran where.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "benchmarks" / "gpu" / "power_sampling"
KEEP = ("calls/nvml_call_cost", "fidelity/energy_fidelity", "monitor/monitor_cost",
        "paired_resnet50/overhead_paired", "paired_resnet18/overhead_paired")
LOGS = ("a_record_trace", "b_call_cost", "c_energy_fidelity", "d_monitor_cost", "e1_paired_resnet50",
        "e2_paired_resnet18")


def unpack(results: Path) -> Path:
    archive = next(results.rglob("power_sampling.tar.gz"), None)
    if archive is None:
        return results
    out = Path(tempfile.mkdtemp(prefix="power-sampling-"))
    with tarfile.open(archive) as tar:
        tar.extractall(out, filter="data")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--kind", default="nvidia-h100-x1")
    args = ap.parse_args(argv)
    src = unpack(args.results)
    DOCS.mkdir(parents=True, exist_ok=True)

    trace = next(src.rglob("*_power_samples.json"), None)
    if trace is not None:
        data = json.loads(trace.read_text())
        if trace.stat().st_size >= 1024 * 1024:
            raise SystemExit(f"{trace}: {trace.stat().st_size} bytes; a committed trace stays under 1 MB")
        if not data["calls"].get("nvmlDeviceGetSamples"):
            print(f"warning: {trace.name} holds no sample-buffer answers", file=sys.stderr)
        dest = REPO / "listeners" / "traces" / trace.name
        shutil.copyfile(trace, dest)
        print(f"trace → {dest.relative_to(REPO)} ({dest.stat().st_size // 1024} KiB)")
        log = next(src.rglob("a_record_trace.log"), None)
        if log is not None:
            shutil.copyfile(log, REPO / "listeners" / "traces" / "recording-logs" / trace.name.replace(".json", ".log"))

    for stem in KEEP:
        for ext in (".md", ".json"):
            f = src / (stem + ext)
            if f.exists():
                name = stem.replace("/", "_") if stem.startswith("paired") else Path(stem).name
                shutil.copyfile(f, DOCS / (name + ext))
    for name in (*LOGS, "env"):
        for f in (src / f"{name}.log", src / f"{name}.txt"):
            if f.exists():
                shutil.copyfile(f, DOCS / f.name)
    (DOCS / "COMMAND.md").write_text(
        f"Machine: {args.kind}. Command, from the repository root:\n\n"
        "    OUT=<dir> bash benchmarks/sampling/power_timeline_cost.sh\n\n"
        "Each part's own command line is in its JSON (`command`) and its log; `env.txt` holds the machine.\n")
    print("files →", DOCS.relative_to(REPO), sorted(p.name for p in DOCS.iterdir()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
