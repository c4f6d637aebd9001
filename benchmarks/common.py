"""What every benchmark script shares: robust statistics, a markdown table, the JSON result file."""
from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Sequence


def median(values: Iterable[float]) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, quartiles, min, max and count: what a table needs to show run-to-run variation."""
    values = sorted(v for v in values if v == v)
    if not values:
        return {"n": 0, "median": float("nan"), "q1": float("nan"), "q3": float("nan"),
                "min": float("nan"), "max": float("nan")}
    if len(values) >= 2:
        q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = q3 = values[0]
    return {"n": len(values), "median": statistics.median(values), "q1": q1, "q3": q3,
            "min": values[0], "max": values[-1]}


def fmt(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    if value != value:
        return "n/a"
    if isinstance(value, int):
        return str(value)
    return f"{value:,.{digits}f}"


def table(headers: Sequence[str], rows: Iterable[Sequence]) -> str:
    """A GitHub markdown table (printed to the terminal and written beside the JSON)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def gpu_name() -> str | None:
    try:
        from listeners.nvml_backend import nvml

        nv = nvml()
        nv.nvmlInit()
        try:
            name = nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(0))
            return name.decode() if isinstance(name, bytes) else str(name)
        finally:
            nv.nvmlShutdown()
    except Exception:
        return None


def environment() -> dict:
    env = {"host": socket.gethostname(), "python": sys.version.split()[0], "platform": platform.platform(),
           "cpu_count": os.cpu_count(), "gpu": gpu_name(),
           "nvml_replay": os.environ.get("RADT_EXT_NVML_REPLAY") or None,
           "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "load_average_1_5_15_min": os.getloadavg()}
    try:
        import mlflow

        env["mlflow"] = mlflow.__version__
    except ImportError:
        pass
    try:
        import torch

        env["torch"] = torch.__version__
    except ImportError:
        pass
    return env


def write_results(out_dir: str | os.PathLike, name: str, result: dict, markdown: str) -> Path:
    """Write NAME.json and NAME.md into out_dir; print the markdown."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = {"benchmark": name, "command": " ".join([Path(sys.executable).name, *sys.orig_argv[1:]])
              if hasattr(sys, "orig_argv") else " ".join(sys.argv), "environment": environment(), **result}
    (out / f"{name}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / f"{name}.md").write_text(markdown.rstrip() + "\n")
    print(markdown)
    return out / f"{name}.json"


def write_tables(out_dir: str | os.PathLike, name: str, data: dict, markdown: str) -> None:
    """An analysis's figures as they are: NAME.json and NAME.md into out_dir (made), the markdown printed."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w") as fh:
        json.dump(data, fh, indent=1, default=str)
    with open(os.path.join(out_dir, f"{name}.md"), "w") as fh:
        fh.write(markdown)
    print(markdown)


def in_lanes(items: Sequence, devices: Sequence[str], run) -> tuple[float, float]:
    """Each item through `run(item, device)`, one lane per device, each lane taking the next item (in order)
    when its last one ended: a queue run one job per GPU. (started, ended) in time.time()."""
    todo, lock = list(items), threading.Lock()

    def lane(device: str) -> None:
        while True:
            with lock:
                if not todo:
                    return
                item = todo.pop(0)
            run(item, device)

    started = time.time()
    threads = [threading.Thread(target=lane, args=(d,)) for d in devices]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return started, time.time()
