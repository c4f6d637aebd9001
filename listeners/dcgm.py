"""DCGM profiling metrics (SM active, occupancy, tensor/FP pipes, DRAM, PCIe, NVLink).

Two paths to the same numbers:
- DCGM's own Python bindings (`DcgmReader`), shipped with DCGM rather than on
  PyPI, when they import and a host engine answers;
- else one long-lived `dcgmi dmon -e <ids> -d <ms>` process. dmon prints aligned
  text whose header names columns by field *tag* (`#Entity  POWER  SMACT ...`),
  then a units line (`ID  W  ...`), then rows `GPU 0  120.5 ...` or, under MIG,
  `GPU-I 3  0.75 ...`; the header repeats. Columns are matched by tag from the
  latest header, never by position in our own request.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time

from listeners.base import Listener, ListenerError, Reading, Target
from listeners.streaming import DRAIN_EVERY_S, StreamingProcess

TOOL = "dcgmi"

# field id: (dmon tag, metric suffix, scale from DCGM's unit to ours)
FIELDS: dict[int, tuple[str, str, float]] = {
    155: ("POWER", "power_w", 1.0),
    156: ("TOTEC", "energy_j", 1e-3),  # mJ since driver load; reported since open
    1001: ("GRACT", "gr_active_pct", 100.0),  # profiling fields are ratios 0..1
    1002: ("SMACT", "sm_active_pct", 100.0),
    1003: ("SMOCC", "sm_occupancy_pct", 100.0),
    1004: ("TENSO", "tensor_active_pct", 100.0),
    1005: ("DRAMA", "dram_active_pct", 100.0),
    1006: ("FP64A", "fp64_active_pct", 100.0),
    1007: ("FP32A", "fp32_active_pct", 100.0),
    1008: ("FP16A", "fp16_active_pct", 100.0),
    1009: ("PCITX", "pcie_tx_kibps", 1 / 1024),  # bytes/s
    1010: ("PCIRX", "pcie_rx_kibps", 1 / 1024),
    1011: ("NVLTX", "nvlink_tx_kibps", 1 / 1024),
    1012: ("NVLRX", "nvlink_rx_kibps", 1 / 1024),
}
TAG_TO_ID = {tag: fid for fid, (tag, _, _) in FIELDS.items()}
ENTITY_PREFIX = {"GPU": "gpu", "GPU-I": "gi", "GPU-CI": "ci"}  # MIG instances get their own names
MISSING = {"N/A", "-", "", "NaN", "nan"}
BINDING_DIRS = ("/usr/share/datacenter-gpu-manager-4/bindings/python3", "/usr/local/dcgm/bindings/python3",
                "/usr/local/dcgm/bindings")


class DmonParser:
    """dmon lines → Readings; one Reading per entity row."""

    def __init__(self, gpu_names: dict[int, int] | None = None):
        self.columns: list[int | None] | None = None  # field id per value column, None: a tag we did not ask for
        self.gpu_names = gpu_names  # DCGM gpu id -> workload ordinal; None: the same
        self.energy_start: dict[tuple[str, int], float] = {}

    def __call__(self, line: str, received: float) -> list[Reading] | None:
        text = line.strip()
        if text.startswith("#"):
            tags = text.lstrip("#").split()
            if not tags or tags[0].lower() != "entity":
                return None
            self.columns = [TAG_TO_ID.get(tag.upper()) for tag in tags[1:]]
            return []
        parts = text.split()
        if len(parts) < 2 or self.columns is None:
            return None
        kind, ident = parts[0].upper(), parts[1]
        if kind == "ID":  # the units line under the header
            return []
        if kind not in ENTITY_PREFIX or not (ident.isascii() and ident.isdigit()):
            return None
        cells = parts[2:]
        if len(cells) != len(self.columns):
            return None
        entity = int(ident)
        if kind == "GPU" and self.gpu_names is not None:
            if entity not in self.gpu_names:
                return []
            entity = self.gpu_names[entity]
        prefix = f"dcgm_{ENTITY_PREFIX[kind]}{entity}_"
        values: dict[str, float] = {}
        for fid, cell in zip(self.columns, cells):
            if fid is None or cell in MISSING:
                continue
            try:
                value = float(cell)
            except ValueError:
                continue
            if value != value or abs(value) == float("inf") or abs(value) >= 9e15:  # DCGM blank sentinels
                continue
            tag, suffix, scale = FIELDS[fid]
            if fid == 156:
                value -= self.energy_start.setdefault((kind, entity), value)
            values[prefix + suffix] = value * scale
        return [Reading(received, values)] if values else []


def import_bindings():
    """DCGM's Python modules (pydcgm, dcgm_fields, DcgmReader) or None."""
    try:
        import DcgmReader  # noqa: F401  (already on sys.path)
        return DcgmReader
    except Exception:
        pass
    for pattern in BINDING_DIRS:
        for path in glob.glob(pattern):
            if os.path.isdir(path) and path not in sys.path:
                sys.path.append(path)
    try:
        import DcgmReader
        return DcgmReader
    except Exception:
        return None


def visible_gpu_ids(cuda_visible_devices: str | None) -> list[int] | None:
    """DCGM gpu ids for plain-index CUDA_VISIBLE_DEVICES; None: every GPU (UUID lists included)."""
    if cuda_visible_devices is None:
        return None
    ids: list[int] = []
    for entry in cuda_visible_devices.split(","):
        entry = entry.strip()
        if not (entry.isascii() and entry.isdigit()):
            return None if not ids and entry.startswith(("GPU-", "MIG-")) else ids
        ids.append(int(entry))
    return ids


class DcgmListener(Listener):
    name = "dcgm"
    description = "DCGM profiling metrics: SM active/occupancy, tensor/FP pipes, DRAM, PCIe, NVLink"
    default_interval = 1.0
    tool = TOOL
    field_ids: tuple[int, ...] = tuple(FIELDS)

    @classmethod
    def probe(cls, target: Target) -> str | None:
        if visible_gpu_ids(target.cuda_visible_devices) == []:
            return f"CUDA_VISIBLE_DEVICES={target.cuda_visible_devices!r} names no GPU"
        path = shutil.which(cls.tool)
        if import_bindings() is not None:
            return None  # open() tries the host engine and falls back to dcgmi
        if path is None:
            return "DCGM not installed (no dcgmi on PATH, no DCGM Python bindings)"
        try:
            run = subprocess.run([path, "discovery", "-l"], capture_output=True, text=True, timeout=15)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"dcgmi discovery failed: {exc}"
        if run.returncode != 0:
            text = (run.stdout + run.stderr).strip().splitlines()
            return f"no DCGM host engine answers ({text[0] if text else 'exit code ' + str(run.returncode)}); start nv-hostengine"
        return None

    def open(self) -> None:
        ids = visible_gpu_ids(self.target.cuda_visible_devices)
        ordinal = {gid: n for n, gid in enumerate(ids)} if ids is not None else None
        self.reader = None
        why_not_bindings = "DCGM not installed (no dcgmi on PATH, no DCGM Python bindings)"
        if import_bindings() is not None:
            try:
                self._open_bindings(ids, ordinal)
                return
            except ListenerError as exc:
                why_not_bindings = str(exc)
        if shutil.which(self.tool) is None:
            raise ListenerError(why_not_bindings)
        argv = [shutil.which(self.tool), "dmon", "-e", ",".join(map(str, self.field_ids)),
                "-d", str(max(1, round(self.interval * 1000)))]
        if ids is not None:
            argv += ["-i", ",".join(map(str, ids))]
        self.parser = DmonParser(ordinal)
        self.stream = StreamingProcess(argv, self.parser)
        self.stream.start(wait_first=min(5.0, max(1.0, 3 * self.interval)))
        self.interval = max(self.interval, DRAIN_EVERY_S)  # the monitor drains; dcgmi keeps its -d

    def _open_bindings(self, ids, ordinal) -> None:
        module = import_bindings()
        try:
            self.reader = module.DcgmReader(fieldIds=list(self.field_ids), gpuIds=ids,
                                            updateFrequency=max(1000, round(self.interval * 1e6)))
            self.reader.GetLatestGpuValuesAsFieldIdDict()  # connects; fails here without a host engine
        except Exception as exc:
            raise ListenerError(f"DCGM bindings could not reach a host engine: {exc}".splitlines()[0]) from None
        self.ordinal = ordinal
        self.energy_start: dict[int, float] = {}

    def sample(self) -> list[Reading]:
        if self.reader is None:
            return self.stream.drain()
        try:
            latest = self.reader.GetLatestGpuValuesAsFieldIdDict()
        except Exception as exc:
            raise ListenerError(f"DCGM read failed: {exc}".splitlines()[0]) from None
        now = time.time()
        values: dict[str, float] = {}
        for gpu_id, fields in (latest or {}).items():
            gpu = self.ordinal.get(gpu_id) if self.ordinal is not None else gpu_id
            if gpu is None:
                continue
            for fid, value in fields.items():
                if fid not in FIELDS or not isinstance(value, (int, float)) or abs(value) >= 9e15:
                    continue
                _, suffix, scale = FIELDS[fid]
                if fid == 156:
                    value -= self.energy_start.setdefault(gpu, value)
                values[f"dcgm_gpu{gpu}_{suffix}"] = float(value) * scale
        return [Reading(now, values)] if values else []

    def close(self) -> None:
        stream = getattr(self, "stream", None)
        if stream is not None:
            stream.stop()
        reader = getattr(self, "reader", None)
        if reader is not None:
            try:
                reader.Shutdown()
            except Exception:
                pass
