"""Which GPUs `radt-ext run` records for a job, on a replayed 2-GPU host (TWO_GPUS): every GPU the
job may use (its CUDA_VISIBLE_DEVICES; all of them when it is unset), each with its own timeline and
its identity in the run's tags, named by the index the job itself uses."""
from __future__ import annotations

import sys

import pytest

from listeners import nvml_backend
from tests.radt_ext.helpers import only_run, radt
from tests.traces import TWO_GPUS, gpu_uuids

JOB = "import time; time.sleep(1.0)"


@pytest.mark.parametrize("visible, watched", [(None, [0, 1]), ("0,1", [0, 1]), ("1", [1]), ("1,0", [1, 0])])
def test_every_gpu_the_job_may_use_gets_its_timeline(tracking_uri, monkeypatch, visible, watched):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    env = {nvml_backend.REPLAY_ENV: TWO_GPUS}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    res = radt("run", "-l", "nvml", "-i", "0.1", "--", sys.executable, "-c", JOB, env=env)
    assert res.returncode == 0, res.stderr
    run = only_run(tracking_uri)
    uuids = gpu_uuids(TWO_GPUS)
    for position, nvml_index in enumerate(watched):  # gpu{i}: the i-th GPU the job sees
        assert f"system/gpu{position}_power_w" in run.data.metrics
        assert run.data.tags[f"machine.gpu.{position}.uuid"] == uuids[nvml_index]
        assert run.data.tags[f"machine.gpu.{position}.nvml_index"] == str(nvml_index)
    assert f"system/gpu{len(watched)}_power_w" not in run.data.metrics
