"""The suite writes nothing under the real HOME: what radt-ext keeps under HOME by default (its spool) lands
in the test's own HOME (tests/conftest.py), in the test's process and in the child processes it starts."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from mlflow.tracking import MlflowClient

from tests.conftest import REAL_HOME
from tests.servers import free_port

# a run's samples spooled because its store is away, in the process radt-ext's writer runs in
SPOOL_AWAY = textwrap.dedent("""
    import sys
    from radt_ext.store.writer import MetricWriter

    writer = MetricWriter(None, None, sys.argv[1]).bind_to_spool(
        sys.argv[2], made={"experiment_id": "0", "run_name": "away", "start_time": 1000})
    writer.start()
    writer.add("system/gpu0_power_w", 300.0, 1000, 0)
    writer.close()
""")


def _radt_ext_paths(home: str | Path) -> set[str]:
    root = Path(home) / ".radt-ext"
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.is_dir() else set()


def _defaults_only() -> dict[str, str]:
    """The environment with no MLFLOW_*/RADT_EXT_* variable: radt-ext keeps its files where it does by default."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RADT_EXT_"))}


def test_each_test_has_a_home_of_its_own(own_home):
    assert os.path.expanduser("~") == str(own_home) != REAL_HOME
    assert os.environ["RADT_EXT_SPOOL_DIR"].startswith(str(own_home))


def test_what_radt_ext_spools_by_default_lands_in_the_tests_home(tracking_uri, own_home, tmp_path):
    """The flows that spool: a run whose timeline file the store refuses (an artifact location that cannot
    be written, the flow that once left an entry under the real HOME) and a run whose store is away; then
    `radt-ext sync` against both. Each in a child process that knows only HOME."""
    client = MlflowClient(tracking_uri)
    experiment = client.create_experiment("refuses-files", artifact_location="file:///proc/radt-ext-no")
    env = {**_defaults_only(), "MLFLOW_TRACKING_URI": tracking_uri, "MLFLOW_EXPERIMENT_ID": experiment}
    run = subprocess.run([sys.executable, "-m", "radt_ext.cli", "run", "-l", "top", "-i", "0.05", "--",
                          sys.executable, "-c", "import time; time.sleep(0.5)"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (refused,) = client.search_runs([experiment])
    away_id = "away" + refused.info.run_id[4:]
    away = subprocess.run([sys.executable, "-c", SPOOL_AWAY, f"http://127.0.0.1:{free_port()}", away_id],
                          env=_defaults_only(), capture_output=True, text=True, timeout=120)
    assert away.returncode == 0, away.stderr[-2000:]
    sync = subprocess.run([sys.executable, "-m", "radt_ext.cli", "sync"], env=_defaults_only(),
                          capture_output=True, text=True, timeout=120)
    assert sync.returncode == 1, sync.stdout + sync.stderr  # both stores still refuse: kept

    ours = _radt_ext_paths(own_home)
    assert f"spool/timelines/{refused.info.run_id}/system.parquet" in ours
    assert f"spool/{away_id}.jsonl" in ours
    # the real HOME is shared with whatever else runs on the machine: none of this test's entries is there
    assert not [p for p in _radt_ext_paths(REAL_HOME) if refused.info.run_id in p or away_id in p]
