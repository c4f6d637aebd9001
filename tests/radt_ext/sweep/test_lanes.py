"""The local executor with `device_mode: each`: a lane per GPU, lanes at the same time (NVML replayed from a 2-GPU trace derived
from a real H200 recording; workloads are real child processes; a real SQLite store).

Concurrency is proven by the workloads themselves: a rendezvous workload finishes only when the
workload of the other lane runs at the same time (one after another, it gives up and its variant
FAILS), and by the MLflow spans of the two lanes' parent runs, which overlap."""
from __future__ import annotations

import os
import signal
import sys

import pytest
from mlflow.tracking import MlflowClient

from listeners import nvml_backend
from radt_ext import sweep
from radt_ext.sweep.lanes import lanes_of
from radt_ext.sweep.spec import SpecError
from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import parent_runs, radt, signalled_sweep, sweep_spec
from tests.traces import TWO_GPUS, gpu_uuids

HERE = os.path.dirname(os.path.abspath(__file__))
RENDEZVOUS = os.path.join(HERE, "rendezvous.py")
TRACES = os.path.join(HERE, "..", "..", "..", "listeners", "traces")
NO_DRIVER = os.path.join(TRACES, "no_driver.json")


def rendezvous_spec(tmp_path, hold: bool = False, devices='["0", "1"]'):
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    hold_flag = " --hold" if hold else ""
    path = sweep_spec(tmp_path / "lanes.yaml", "lanes", f"""
        workloads:
          meet: {{command: "{sys.executable} {RENDEZVOUS} --dir {marks} --round {{round}} --lanes 0,1{hold_flag}",
                 params: {{round: a}}}}
        grid: {{round: [a, b]}}
    """, devices=devices, device_mode="each")
    return path, marks



def test_variants_on_two_gpus_run_at_the_same_time(tmp_path, two_gpus):
    path, _ = rendezvous_spec(tmp_path)
    variants = sweep.plan(path)
    assert {lane: [v.setting["round"] for v in vs] for lane, vs in lanes_of(variants).items()} == \
        {"0": ["a", "b"], "1": ["a", "b"]}
    outcomes = sweep.run(variants)
    assert [o.status for o in outcomes] == ["FINISHED"] * 4  # each rendezvous met the other lane's workload
    assert [o.variant.index for o in outcomes] == [0, 1, 2, 3]  # the results table keeps plan order
    runs = {(r.data.tags["collocation.gpu"], r.data.tags["sweep.param.round"]): r for r in parent_runs(two_gpus)}
    assert sorted(runs) == [("0", "a"), ("0", "b"), ("1", "a"), ("1", "b")]
    for rnd in ("a", "b"):
        a, b = runs[("0", rnd)].info, runs[("1", rnd)].info
        assert max(a.start_time, b.start_time) < min(a.end_time, b.end_time), (rnd, a, b)  # the spans overlap
    # each lane's parent run watched its own GPU through the replayed NVML
    assert all(any(k.startswith("system/gpu") for k in r.data.metrics) for r in runs.values())
    gpu1 = gpu_uuids(TWO_GPUS)[1]
    assert gpu1 in runs[("1", "a")].data.tags.values() and gpu1 not in runs[("0", "a")].data.tags.values()


def spec_two_lanes(tmp_path):
    return sweep_spec(tmp_path / "toy.yaml", "toy", f"""
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds 0.3 --batch-size {{bs}}", params: {{bs: 8}}}}
        groups:
          - {{workloads: [toy], modes: [exclusive]}}
          - {{workloads: [toy, toy], modes: [naive]}}
        grid: {{bs: [8]}}
    """, device_mode="each")


def test_resume_by_hash_stays_exact_with_lanes(tmp_path, two_gpus):
    path = spec_two_lanes(tmp_path)
    first = sweep.run(sweep.plan(path))
    assert [(o.variant.mode, o.variant.device, o.status) for o in first] == [
        ("exclusive", "0", "FINISHED"), ("exclusive", "1", "FINISHED"), ("naive", "0", "FINISHED"),
        ("naive", "1", "FINISHED")]
    # the collocated variant of each lane found its own lane's exclusive baseline
    assert all(o.summary["avg_slowdown_ratio"] > 0 for o in first[2:])
    again = sweep.run(sweep.plan(path))
    assert [o.status for o in again] == ["SKIPPED"] * 4 and len(parent_runs(two_gpus)) == 4
    MlflowClient(two_gpus).set_terminated(first[3].run_id, "KILLED")
    third = sweep.run(sweep.plan(path))
    assert [o.status for o in third] == ["SKIPPED", "SKIPPED", "SKIPPED", "FINISHED"]
    hashes = [r.data.tags["sweep.hash"] for r in parent_runs(two_gpus)]
    assert len(hashes) == 5 and hashes.count(first[3].variant.hash) == 2 and len(set(hashes)) == 4


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_every_lane_and_leaves_the_sweep_resumable(tmp_path, two_gpus, sig):
    path, marks = rendezvous_spec(tmp_path, hold=True)
    code, err = signalled_sweep(path, [marks / f"a-{lane}" for lane in "01"], sig)
    assert code == 128 + sig, err
    runs = parent_runs(two_gpus)
    assert sorted((r.data.tags["collocation.gpu"], r.info.status) for r in runs) == [("0", "KILLED"), ("1", "KILLED")]
    for lane in "01":  # both lanes' workloads were stopped
        pid = int((marks / f"a-{lane}").read_text().split()[0])
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not (marks / "b-0").exists() and not (marks / "b-1").exists()  # no lane started another variant
    dry = radt("sweep", str(path), "--dry-run")
    assert "4 variants, 4 to run, 0 done" in dry.stdout, dry.stderr


def test_devices_all_is_every_gpu_nvml_lists(tmp_path, two_gpus, monkeypatch):
    listed, _ = rendezvous_spec(tmp_path, devices='["0", "1"]')
    explicit = [v.hash for v in sweep.plan(listed)]
    every, _ = rendezvous_spec(tmp_path, devices="all")
    assert [v.hash for v in sweep.plan(every)] == explicit  # the same variants, so resume holds across both
    monkeypatch.setenv(nvml_backend.REPLAY_ENV, NO_DRIVER)
    nvml_backend.reset()
    with pytest.raises(SpecError) as err:
        sweep.plan(every)
    assert "devices: all:" in str(err.value) and "list the devices" in str(err.value)
    assert "\n" not in str(err.value)
