"""A run's full-rate timelines as one compressed columnar artifact: `timelines/system.parquet`.

The store holds a bounded shape of each `system/*` timeline (shaper.py); this artifact holds every
point the point filter passed — the 50 Hz driver power, the per-process samples, every reading that
changed a value, each at its own time — which is what the store held before it was shaped (and still
holds with `--full-rate-store`). One Parquet file (zstd) with the columns `key` (the metric name as in
the store, `system/gpu0_power_w`), `timestamp` (ms since the epoch), `step` and `value`; a collocated
workload's attributed power timeline is `timelines/attributed.parquet` in the same shape.

While a run records, its points go to a spill file of raw arrays in the session's temporary directory
(appending costs the monitor thread no more than a list append; no Parquet library in the sampling
path), turned into Parquet once at the end. Every CHUNK points (`RADT_EXT_TIMELINE_CHUNK`, default 16384)
go to the file as one record that describes itself — a header (the number of points, the new key names'
length), the key names first used since the record before, then the four columns — so the file alone
can be read back: when radt-ext's process was killed, its watchdog turns what the file holds into the
run's artifact (`spill_to_parquet`; the points after the last whole record, held in memory, are lost).
`history()` reads a run's timelines back: from the artifact where the run has one, else from the store
(runs recorded before it, or compacted later).
"""
from __future__ import annotations

import json
import logging
import os
import struct
import tempfile
from array import array
from pathlib import Path

ARTIFACT_DIR = "timelines"
SYSTEM_FILE = "system.parquet"
ATTRIBUTED_FILE = "attributed.parquet"
COMPACTED_FILE = "compacted.parquet"  # `radt-ext compact`: the store's points beside a file the run already had
ENV_CHUNK = "RADT_EXT_TIMELINE_CHUNK"
DEFAULT_CHUNK = 16_384  # ~2 min of a GPU run's ~120 points a second: what a SIGKILL can lose
COLUMNS = ("key", "timestamp", "step", "value")
SPILL_PREFIX, SPILL_SUFFIX = "radt-timeline-", ".bin"
_RECORD = struct.Struct("<4sII")  # magic, points, bytes of the new key names (JSON)
_MAGIC = b"RTS1"
_TYPECODES = "Iqqd"  # key code, timestamp ms, step, value


def _chunk_size() -> int:
    value = os.environ.get(ENV_CHUNK, "").strip()
    if not value:
        return DEFAULT_CHUNK
    try:
        return max(1, int(value))
    except ValueError:
        logging.getLogger(__name__).warning("radt-ext: %s=%r is not a whole number of points; using %d",
                                            ENV_CHUNK, value, DEFAULT_CHUNK)
        return DEFAULT_CHUNK


CHUNK = _chunk_size()  # points per spill record and per Parquet row group


class TimelineSpill:
    """Every point of one run, appended from one thread; `write(path)` makes the Parquet file."""

    def __init__(self, directory: str | None = None):
        self._dir = directory  # made with the first record when it does not exist
        self._path: str | None = None  # the spill file, made with the first full chunk
        self._names: dict[str, int] = {}
        self._named = 0  # key names already in the file
        self._chunk()
        self.points = 0

    def _chunk(self) -> None:
        self._key, self._ts, self._step, self._value = array("I"), array("q"), array("q"), array("d")

    def add(self, key: str, value: float, timestamp_ms: int, step: int) -> None:
        code = self._names.get(key)
        if code is None:
            code = self._names[key] = len(self._names)
        self._key.append(code)
        self._ts.append(timestamp_ms)
        self._step.append(step)
        self._value.append(value)
        self.points += 1
        if len(self._key) >= CHUNK:
            self._spill()

    def _spill(self) -> None:
        if self._path is None:
            if self._dir is not None:
                os.makedirs(self._dir, exist_ok=True)
            fd, self._path = tempfile.mkstemp(prefix=SPILL_PREFIX, suffix=SPILL_SUFFIX, dir=self._dir)
            os.close(fd)
        new = json.dumps(list(self._names)[self._named:]).encode()
        with open(self._path, "ab") as fh:
            start = fh.tell()
            try:
                fh.write(_RECORD.pack(_MAGIC, len(self._key), len(new)) + new)
                for column in (self._key, self._ts, self._step, self._value):
                    column.tofile(fh)
            except BaseException:  # a disk full: the file keeps whole records only
                fh.truncate(start)
                raise
        self._named = len(self._names)
        self._chunk()

    def write(self, path: str | Path) -> int:
        """The Parquet file of every point so far; the number of points written."""
        names = list(self._names)
        with ParquetTimeline(path) as out:
            if self._path is not None:
                for _, codes, ts, steps, values in read_spill(self._path):
                    out.write_coded(names, codes, ts, steps, values)
            if len(self._key):
                out.write_coded(names, self._key, self._ts, self._step, self._value)
        return self.points

    def discard(self) -> None:
        if self._path is not None:
            try:
                os.unlink(self._path)
            except OSError:
                pass
            self._path = None


def read_spill(path: str | Path):
    """Each whole record of a spill file, in order: (key names so far, codes, timestamps, steps, values).
    A record cut short (its process killed while writing it) or not a record ends the file."""
    names: list[str] = []
    with open(path, "rb") as fh:
        while True:
            head = fh.read(_RECORD.size)
            if len(head) < _RECORD.size:
                return
            magic, n, named = _RECORD.unpack(head)
            if magic != _MAGIC:
                return
            try:
                new = json.loads(fh.read(named))
                columns = []
                for typecode in _TYPECODES:
                    column = array(typecode)
                    column.fromfile(fh, n)
                    columns.append(column)
            except (ValueError, EOFError):
                return
            names.extend(new)
            yield names, *columns


def spill_to_parquet(spill_paths, path: str | Path) -> int:
    """What spill files hold on disk (a run whose process was killed: its points after the last whole
    record are gone) as one Parquet file; the number of points, 0 and no file when they hold none."""
    out, points = None, 0
    try:
        for spill in spill_paths:
            for names, codes, ts, steps, values in read_spill(spill):
                if out is None:
                    out = ParquetTimeline(path)
                out.write_coded(names, codes, ts, steps, values)
                points += len(codes)
    finally:
        if out is not None:
            out.close()
    return points


class ParquetTimeline:
    """Writes the artifact's Parquet file in row groups (pyarrow imported only here)."""

    def __init__(self, path: str | Path):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self._pa = pa
        self.schema = pa.schema([("key", pa.dictionary(pa.int32(), pa.string())), ("timestamp", pa.int64()),
                                 ("step", pa.int64()), ("value", pa.float64())])
        self._writer = pq.ParquetWriter(str(path), self.schema, compression="zstd")

    def write_coded(self, names: list[str], codes, timestamps, steps, values) -> None:
        pa = self._pa
        keys = pa.DictionaryArray.from_arrays(pa.array(codes, type=pa.int32()), pa.array(names, type=pa.string()))
        self._writer.write_table(pa.Table.from_arrays(
            [keys, pa.array(timestamps, type=pa.int64()), pa.array(steps, type=pa.int64()),
             pa.array(values, type=pa.float64())], schema=self.schema), row_group_size=CHUNK)

    def write_points(self, points) -> None:
        """(key, timestamp ms, step, value) tuples."""
        names: dict[str, int] = {}
        codes, ts, steps, values = array("I"), array("q"), array("q"), array("d")
        for key, t, step, value in points:
            codes.append(names.setdefault(key, len(names)))
            ts.append(int(t))
            steps.append(int(step))
            values.append(float(value))
        if len(codes):
            self.write_coded(list(names), codes, ts, steps, values)

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> "ParquetTimeline":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def log_points(client, run_id: str, points, name: str) -> None:
    """(key, timestamp ms, step, value) points as the run's timeline file `timelines/<name>`."""
    with tempfile.TemporaryDirectory(prefix="radt-timeline-") as tmp:
        path = os.path.join(tmp, name)
        with ParquetTimeline(path) as out:
            out.write_points(points)
        client.log_artifact(run_id, path, ARTIFACT_DIR)


# -- reading back --------------------------------------------------------------------------

def artifact_paths(client, run_id: str) -> list[str]:
    """The run's timeline files (artifact paths), [] when it has none."""
    try:
        return sorted(f.path for f in client.list_artifacts(run_id, ARTIFACT_DIR)
                      if not f.is_dir and f.path.endswith(".parquet"))
    except Exception:  # no artifact store, or nothing there
        return []


def local_artifacts(client, run_id: str) -> Path | None:
    """The run's artifact folder where it is on this machine's disk (a file store), else None: its files
    are read in place, with no copy and no download progress bar."""
    from mlflow.utils.file_utils import local_file_uri_to_path
    from mlflow.utils.uri import is_local_uri

    try:
        uri = client.get_run(run_id).info.artifact_uri
        if not is_local_uri(uri, is_tracking_or_registry_uri=False):
            return None
    except Exception:  # a run it cannot read, a URI MLflow refuses: downloaded as before
        return None
    root = Path(local_file_uri_to_path(uri))
    return root if root.is_dir() else None


def read_file(path: str | Path, keys=None) -> dict[str, list[tuple[int, int, float]]]:
    """{key: [(timestamp ms, step, value), ...] in time order} of one timeline file."""
    import pyarrow.parquet as pq

    table = pq.read_table(str(path), filters=[("key", "in", list(keys))] if keys is not None else None)
    out: dict[str, list[tuple[int, int, float]]] = {}
    columns = table.to_pydict()
    for key, t, step, value in zip(*(columns[c] for c in COLUMNS)):
        out.setdefault(key, []).append((t, step, value))
    for points in out.values():
        points.sort()
    return out


def read(client, run_id: str, keys=None) -> dict[str, list[tuple[int, int, float]]] | None:
    """The run's full-rate timelines {key: [(timestamp ms, step, value), ...]}; None when the run has no
    timeline artifact."""
    paths = artifact_paths(client, run_id)
    if not paths:
        return None
    files = []
    root = local_artifacts(client, run_id)
    with tempfile.TemporaryDirectory(prefix="radt-timelines-") as tmp:
        for path in paths:
            local = root / path if root is not None and (root / path).is_file() else None
            if local is None:
                local = client.download_artifacts(run_id, path, tmp)
            files.append(read_file(local, keys))
    return merged(files)


def merged(files: list[dict]) -> dict[str, list[tuple[int, int, float]]]:
    """A run's timeline files read ({key: [(timestamp ms, step, value), ...]} each) as one; with several, each
    key's points sorted and a point in two files (a compacted run) once."""
    if len(files) == 1:
        return files[0]
    out: dict[str, list[tuple[int, int, float]]] = {}
    for f in files:
        for key, points in f.items():
            out.setdefault(key, []).extend(points)
    return {key: sorted(set(points)) for key, points in out.items()}


def history(client, run_id: str, keys, timelines=None) -> dict[str, list]:
    """{key: [mlflow Metric, ...]} for each of `keys`: from the run's timeline artifact where it holds
    the key (full rate), else the store's history (`timelines`: the artifact already read, or None)."""
    from mlflow.entities import Metric

    keys = list(keys)
    if timelines is None:
        timelines = read(client, run_id) or {}
    out = {}
    for key in keys:
        points = timelines.get(key)
        if points:
            out[key] = [Metric(key, value, t, step) for t, step, value in points]
        else:
            out[key] = client.get_metric_history(run_id, key)
    return out
