"""radT's CSV experiment files, read (never written) as a sweep plan.

Columns: Experiment, Workload, Status, Run, Devices, Collocation, File, Listeners, Params
(Status, Run and Name optional; spaces around values ignored). Rows sharing Experiment and
Workload run together as one collocation group, as in radT:
- Collocation `-` (or empty): each row on its Devices (`0`, or `0+1`); rows on the same GPU
  share it without MPS (mode naive), rows on different GPUs simply run side by side.
- `mps`: an MPS daemon per GPU. A MIG profile such as `3g.20gb`: mode mig with that profile.
- File: the script (`python File Params`); Params are its arguments (`--batch-size 128`;
  radT's older `batch-size=128` form becomes `--batch-size=128`).
- Listeners: radT names joined by `+` (smi, top, dcgmi → dcgm; nvml, gpm, ...); GPU
  listeners go on the parent run, process listeners on each child. Listeners this machine
  cannot run are left out with a note, as radT did for DCGM.
- Experiment: an MLflow experiment id that exists in the store, else used as the experiment name.
- Status: rows whose group is all FINISHED are skipped, as radT did; radT's file is not
  changed (results live in MLflow, and re-running skips FINISHED groups by sweep.hash).
"""
from __future__ import annotations

import csv
import shlex
import sys
from pathlib import Path

from listeners import registry
from radt_ext.collocation.modes import CPU, NAME
from radt_ext.sweep.plan import PlannedWorkload, Variant, digest, order
from radt_ext.sweep.spec import SpecError, read_text

REQUIRED = ("Experiment", "Workload", "Devices", "Collocation", "File", "Listeners", "Params")
OPTIONAL = ("Name", "Status", "Run")
LISTENER_NAMES = {"dcgmi": "dcgm", "smi": "smi", "top": "top", "nvml": "nvml", "gpm": "gpm", "dcgm": "dcgm",
                  "perf": "perf", "rapl": "rapl", "gpu_procs": "gpu_procs"}
DEVICE_LEVEL = {"nvml", "gpm", "smi", "dcgm", "rapl"}


def _experiment(value: str) -> str:
    """An existing experiment id → its name; anything else is the name itself."""
    if value.isdigit():
        try:
            from radt_ext.store.client import connect, tracking_uri

            uri = tracking_uri()
            if not (uri.startswith("sqlite:///") and not Path(uri[len("sqlite:///"):]).exists()):
                exp = connect(uri).get_experiment(value)
                if exp is not None:
                    return exp.name
        except Exception:
            pass
    return value


def _params(text: str) -> list[str]:
    args = shlex.split(text)
    return [a if a.startswith("-") or "=" not in a else f"--{a}" for a in args]


def load_csv(path: str | Path) -> list[Variant]:
    path = Path(path)
    text = read_text(path)
    reader = csv.DictReader(text.splitlines(), skipinitialspace=True)
    header = [h.strip() for h in (reader.fieldnames or [])]
    reader.fieldnames = header
    for col in REQUIRED:
        if col not in header:
            raise SpecError(f"{path}: header: column {col} is missing; radT files have "
                            f"{', '.join(REQUIRED[:2] + ('Status', 'Run') + REQUIRED[2:])}")
    for col in header:
        if col not in REQUIRED + OPTIONAL:
            raise SpecError(f"{path}: header: unknown column {col!r}")
    groups: dict[tuple[str, str], list[tuple[int, dict]]] = {}
    for n, row in enumerate(reader, start=2):
        row = {k: (v or "").strip() for k, v in row.items() if k is not None}
        if not any(row.values()):
            continue
        for col in ("Experiment", "Workload", "Devices", "File"):
            if not row.get(col):
                raise SpecError(f"{path}: row {n}: column {col} is empty")
        groups.setdefault((row["Experiment"], row["Workload"]), []).append((n, row))
    if not groups:
        raise SpecError(f"{path}: no rows under the header; add one row per workload")
    variants = []
    for (experiment, workload), rows in groups.items():
        if all("FINISHED" in r.get("Status", "") for _, r in rows):
            print(f"radt-ext: {path}: experiment {experiment} workload {workload} is FINISHED in the file; "
                  "skipped", file=sys.stderr)
            continue
        v = _variant(path, experiment, workload, rows)
        # radT repeats a job by giving it again under another Workload id: the same content, so a repeat
        # number of its own keeps its hash apart (else a resume would skip it on the first one's run)
        while any(u.hash == v.hash and u.experiment == v.experiment for u in variants):
            v.repeat += 1
        variants.append(v)
    return order(variants)


def _variant(path: Path, experiment: str, workload: str, rows: list[tuple[int, dict]]) -> Variant:
    kinds = set()
    planned: list[PlannedWorkload] = []
    parent_listeners: list[str] = []
    child_listeners: list[str] = []
    for i, (n, row) in enumerate(rows):
        colloc = row["Collocation"].lower()
        if colloc in ("", "-", "nan", "none"):
            kind, mig = "naive", None
        elif colloc == "mps":
            kind, mig = "mps", None
        elif "g." in colloc:
            kind, mig = "mig", row["Collocation"]
        else:
            raise SpecError(f"{path}: row {n}: column Collocation: {row['Collocation']!r} is not -, mps or a "
                            "MIG profile like 3g.20gb")
        kinds.add(kind)
        devices = [d.strip() for d in row["Devices"].split("+") if d.strip()]
        if len(devices) != 1:
            raise SpecError(f"{path}: row {n}: column Devices: {row['Devices']!r}: one GPU per workload is "
                            "supported; split multi-GPU rows")
        file = Path(row["File"])
        if not file.is_absolute() and not file.exists() and (path.parent / file).exists():
            file = path.parent / file
        command = ([sys.executable, str(file)] if file.suffix == ".py" else [str(file)]) + _params(row["Params"])
        for name in filter(None, (x.strip().lower() for x in row["Listeners"].split("+"))):
            ours = LISTENER_NAMES.get(name)
            if ours is None:
                raise SpecError(f"{path}: row {n}: column Listeners: unknown listener {name!r}; use "
                                f"{', '.join(sorted(LISTENER_NAMES))} joined by +")
            bucket = parent_listeners if ours in DEVICE_LEVEL else child_listeners
            if ours not in bucket:
                bucket.append(ours)
        label = (row.get("Name") or f"{file.stem}_{i}").replace(" ", "_")
        if not NAME.match(label):
            where = "column Name" if row.get("Name") else f"the name from column File {row['File']!r}"
            raise SpecError(f"{path}: row {n}: {where}: {label!r}: use letters, digits, '_', '-' or '.' "
                            "(a Name column names the workload)")
        if any(w.name == label for w in planned):
            raise SpecError(f"{path}: row {n}: column Name: {label!r} is used twice in experiment {experiment} "
                            f"workload {workload}; give each row its own Name")
        planned.append(PlannedWorkload(name=label, source=file.stem, command=command,
                                       device=devices[0], params={"radt.params": row["Params"]}, mig=mig))
    if len(kinds) > 1:
        raise SpecError(f"{path}: row {rows[0][0]}: column Collocation: experiment {experiment} workload {workload} "
                        f"mixes {', '.join(sorted(kinds))}; one collocation kind per workload group")
    mode = kinds.pop()
    if mode == "naive" and len(planned) == 1:
        mode = "exclusive"
    devs = sorted({w.device for w in planned})
    return Variant(0, f"radt-csv-{path.stem}", _experiment(experiment), f"workload-{workload}", mode,
                   "+".join(devs), {}, 0, planned,
                   listeners=_usable(parent_listeners, devs), child_listeners=_usable(child_listeners, None) or None,
                   extra_tags={"radt.experiment": experiment, "radt.workload": workload,
                               "radt.file_hash": digest(path.read_text())[:16]})


def _usable(names: list[str], devices: list[str] | None) -> str:
    from listeners.base import Target

    target = Target(pid=None, cuda_visible_devices=",".join(devices) if devices and CPU not in devices else None)
    kept = []
    for name in names:
        reason = registry.availability(name, target)
        if reason:
            print(f"radt-ext: listener {name} left out: {reason}", file=sys.stderr)
        else:
            kept.append(name)
    return ",".join(kept)
