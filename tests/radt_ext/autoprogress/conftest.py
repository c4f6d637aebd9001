"""Runs a user's script, unmodified (it imports nothing of radt-ext), in a child interpreter with the
start-up hook on its path the way the session puts it, and reads back what the hook wrote."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field

import pytest

from radt_ext.workload_api.autoprogress import SITE_DIR

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str
    records: list[dict] = field(default_factory=list)

    def of(self, src: str, pid: int | None = None) -> list[dict]:
        return [r for r in self.records if r.get("src") == src and (pid is None or r["pid"] == pid)]

    def totals(self, src: str) -> dict[int, dict]:
        """Each process's last totals record of `src`."""
        out: dict[int, dict] = {}
        for r in self.of(src):
            if not ({"epoch", "hooked", "error"} & set(r)):
                out[r["pid"]] = r
        return out

    def last(self, src: str) -> dict:
        (only,) = self.totals(src).values()
        return {k: v for k, v in only.items() if k not in ("pid", "t", "src")}

    def epoch_marks(self, src: str) -> list[tuple[int, str]]:
        return [(r["epoch"], r["event"]) for r in self.of(src) if "epoch" in r]

    def assert_epoch_totals(self, src: str, per_epoch: list[int]) -> None:
        """In each process's records, the totals written with an epoch mark hold exactly the epochs done
        before it (`per_epoch`: the training samples of each), and the totals never go down in time."""
        done_samples = [sum(per_epoch[:n]) for n in range(len(per_epoch) + 1)]
        for pid in {r["pid"] for r in self.of(src)}:
            records = self.of(src, pid)
            totals = [r for r in records if not ({"epoch", "hooked", "error"} & set(r))]
            for i, r in enumerate(records):
                if r.get("event") in ("start", "end"):
                    done = r["epoch"] - (r["event"] == "start")
                    before = records[i - 1]
                    if before not in totals:  # nothing counted yet: only before the first epoch
                        assert (r["epoch"], r["event"]) == (1, "start"), (before, r)
                        continue
                    assert before["t"] >= r["t"] and before.get("epochs", 0) == done, (before, r)
                    assert before.get("train_samples", 0) == done_samples[done], (before, r)
            assert [r["t"] for r in totals] == sorted(r["t"] for r in totals)
            for key in ("steps", "train_samples", "eval_samples", "forwards"):
                values = [r.get(key, 0) for r in totals]
                assert values == sorted(values), key


@pytest.fixture
def run_script(tmp_path):
    """run_script(code, hook=True, env=None, timeout=120, launcher=()) -> Ran; launcher: python's arguments
    before the script (e.g. `-m torch.distributed.run ...`)."""
    def run(code: str, hook: bool = True, env: dict | None = None, timeout: float = 120, launcher=()) -> Ran:
        script = tmp_path / "train.py"
        script.write_text(textwrap.dedent(code))
        progress = tmp_path / "progress.jsonl"
        if progress.exists():
            progress.unlink()
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "OMP_NUM_THREADS": "1",
                "PYTHONPATH": os.pathsep.join([SITE_DIR, REPO]) if hook else REPO, "HF_HUB_OFFLINE": "1",
                "TF_CPP_MIN_LOG_LEVEL": "3", "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
        if hook:
            base["RADT_EXT_PROGRESS_FILE"] = str(progress)
        res = subprocess.run([sys.executable, *launcher, str(script)], cwd=tmp_path, env={**base, **(env or {})},
                             capture_output=True, text=True, timeout=timeout)
        records = [json.loads(line) for line in progress.read_text().splitlines()] if progress.exists() else []
        return Ran(res.returncode, res.stdout, res.stderr, records)
    return run
