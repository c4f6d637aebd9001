"""The spill file describes itself: what a killed process left on disk reads back without it."""
from __future__ import annotations

from radt_ext.store import timelines


def _spill(tmp_path, monkeypatch, n: int, chunk: int = 4) -> tuple[timelines.TimelineSpill, list]:
    monkeypatch.setattr(timelines, "CHUNK", chunk)
    spill = timelines.TimelineSpill(str(tmp_path / "spill" / "run"))  # made with the first chunk
    points = []
    for i in range(n):
        key = f"system/k{i % 3 if i < 6 else i % 5}"  # new keys in later chunks too
        spill.add(key, float(i), 1000 + i, i)
        points.append((key, 1000 + i, i, float(i)))
    return spill, points


def _rows(path) -> list:
    return sorted((key, *point) for key, pts in timelines.read_file(path).items() for point in pts)


def test_the_normal_end_writes_every_point(tmp_path, monkeypatch):
    spill, points = _spill(tmp_path, monkeypatch, 11)
    assert spill.write(tmp_path / "all.parquet") == 11
    assert _rows(tmp_path / "all.parquet") == sorted(points)


def test_the_file_alone_holds_every_whole_chunk(tmp_path, monkeypatch):
    spill, points = _spill(tmp_path, monkeypatch, 11)  # two chunks of 4 on disk, 3 points in memory
    (path,) = (tmp_path / "spill" / "run").iterdir()
    assert path.name.startswith(timelines.SPILL_PREFIX)
    assert timelines.spill_to_parquet([path], tmp_path / "disk.parquet") == 8
    assert _rows(tmp_path / "disk.parquet") == sorted(points[:8])


def test_a_chunk_cut_short_ends_the_file(tmp_path, monkeypatch):
    spill, points = _spill(tmp_path, monkeypatch, 12)
    (path,) = (tmp_path / "spill" / "run").iterdir()
    data = path.read_bytes()
    path.write_bytes(data[:-5])  # killed while writing the third chunk
    assert [len(chunk[1]) for chunk in timelines.read_spill(path)] == [4, 4]
    assert timelines.spill_to_parquet([path], tmp_path / "cut.parquet") == 8
    assert _rows(tmp_path / "cut.parquet") == sorted(points[:8])


def test_a_file_with_no_whole_chunk_makes_no_parquet(tmp_path, monkeypatch):
    _spill(tmp_path, monkeypatch, 4)
    (path,) = (tmp_path / "spill" / "run").iterdir()
    path.write_bytes(path.read_bytes()[:10])
    assert timelines.spill_to_parquet([path], tmp_path / "none.parquet") == 0
    assert not (tmp_path / "none.parquet").exists()


def test_the_chunk_size_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(timelines.ENV_CHUNK, "16")
    assert timelines._chunk_size() == 16
    monkeypatch.setenv(timelines.ENV_CHUNK, "many")
    assert timelines._chunk_size() == timelines.DEFAULT_CHUNK


def test_a_file_store_timeline_is_read_in_place(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    spill, points = _spill(tmp_path, monkeypatch, 6)
    spill.write(tmp_path / timelines.SYSTEM_FILE)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.create_experiment("t", artifact_location=(tmp_path / "artifacts").as_uri())
    run_id = client.create_run(exp).info.run_id
    client.log_artifact(run_id, str(tmp_path / timelines.SYSTEM_FILE), timelines.ARTIFACT_DIR)
    root = timelines.local_artifacts(client, run_id)
    assert root is not None and (root / timelines.ARTIFACT_DIR / timelines.SYSTEM_FILE).is_file()
    downloads = []
    monkeypatch.setattr(client, "download_artifacts", lambda *a: downloads.append(a))
    read = timelines.read(client, run_id)
    assert sorted((k, *p) for k, pts in read.items() for p in pts) == sorted(points) and downloads == []

