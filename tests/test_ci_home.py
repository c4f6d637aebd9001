"""`.ci/radt-ext-home`, which .ci/run calls around the tests: it fails, naming the paths, when they changed
$HOME/.radt-ext."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "radt-ext-home"


def _ci(home: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *args], env={**os.environ, "HOME": str(home)}, capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("existed", [True, False])
def test_a_home_left_as_it_was_passes(tmp_path, existed):
    home = tmp_path / "home"
    if existed:
        (home / ".radt-ext" / "spool").mkdir(parents=True)
        (home / ".radt-ext" / "spool" / "a.jsonl").write_text("{}\n")
    else:
        home.mkdir()
    assert _ci(home, "save", str(tmp_path / "before")).returncode == 0
    done = _ci(home, "check", str(tmp_path / "before"))
    assert done.returncode == 0 and done.stdout == done.stderr == ""


def test_new_changed_and_removed_paths_are_named_in_one_line(tmp_path):
    spool = tmp_path / "home" / ".radt-ext" / "spool"
    spool.mkdir(parents=True)
    (spool / "kept.jsonl").write_text("{}\n")
    (spool / "grows.jsonl").write_text("{}\n")
    (spool / "goes.jsonl").write_text("{}\n")
    assert _ci(tmp_path / "home", "save", str(tmp_path / "before")).returncode == 0
    (spool / "grows.jsonl").write_text("{}\n{}\n")
    (spool / "goes.jsonl").unlink()
    (spool / "timelines" / "r1").mkdir(parents=True)
    done = _ci(tmp_path / "home", "check", str(tmp_path / "before"))
    assert done.returncode == 1
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"ci: the tests changed {spool.parent} (they must write under a temporary HOME): ")
    for word, name in [("changed", "grows.jsonl"), ("removed", "goes.jsonl"), ("new", "timelines"),
                       ("new", "timelines/r1")]:
        assert f"{word} {spool / name};" in line + ";", line
    assert "kept.jsonl" not in line
