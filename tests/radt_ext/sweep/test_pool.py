"""The device pool (`devices:` by default): each variant runs once, on the next free device, with a
2-GPU machine replayed from a trace (TWO_GPUS of tests/traces.py, the `two_gpus` fixture; real child processes, a real SQLite store)."""
from __future__ import annotations

import os
import signal
import sys
import textwrap
import threading
import time

import pytest
from mlflow.tracking import MlflowClient

from listeners import nvml_backend
from radt_ext import sweep
from radt_ext.sweep.pool import DevicePool
from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import parent_runs, radt, signalled_sweep, sweep_spec
from tests.traces import NO_DRIVER, TWO_GPUS, gpu_name

HERE = os.path.dirname(os.path.abspath(__file__))
RENDEZVOUS = os.path.join(HERE, "rendezvous.py")



def write(tmp_path, body: str, name="pool.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def meet_spec(tmp_path, devices='["0", "1"]', hold: bool = False):
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    hold_flag = " --hold" if hold else ""
    return sweep_spec(tmp_path / "pool.yaml", "pooled", f"""
        workloads:
          meet: {{command: "{sys.executable} {RENDEZVOUS} --dir {marks} --round r --lanes 0,1 --name {{n}}{hold_flag}",
                 params: {{n: p}}}}
        grid: {{n: [p, q]}}
    """, devices=devices), marks


def test_each_variant_runs_once_on_the_next_free_device(tmp_path, two_gpus):
    path, marks = meet_spec(tmp_path)
    variants = sweep.plan(path)
    assert len(variants) == 2 and {v.device for v in variants} == {"pool"}
    outcomes = sweep.run(variants)
    # the two variants met each other: they ran at the same time, one on each GPU
    assert [o.status for o in outcomes] == ["FINISHED", "FINISHED"]
    seen = {(marks / f"devices-{n}").read_text() for n in "pq"}
    assert seen == {"0", "1"}
    assert sorted(o.device for o in outcomes) == ["0", "1"]
    runs = parent_runs(two_gpus)
    assert sorted(r.data.tags["sweep.device"] for r in runs) == ["0", "1"]
    assert {r.data.tags["sweep.place"] for r in runs} == {"pool"}
    # the results table has the device column
    table = sweep.executor.results_table(outcomes)
    assert [c.header for c in table.columns][3] == "device"
    # the hash names the pool, not the GPU: the same variants on another pool are done already
    other, _ = meet_spec(tmp_path, devices='["1", "0"]')
    assert [v.hash for v in sweep.plan(other)] == [v.hash for v in variants]
    assert [o.status for o in sweep.run(sweep.plan(other))] == ["SKIPPED", "SKIPPED"]


def test_a_signal_stops_the_pooled_variants_and_leaves_them_to_resume(tmp_path, two_gpus):
    path, marks = meet_spec(tmp_path, hold=True)
    code, err = signalled_sweep(path, [marks / f"r-{gpu}" for gpu in "01"], signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, err
    assert sorted((r.data.tags["sweep.device"], r.info.status) for r in parent_runs(two_gpus)) == [
        ("0", "KILLED"), ("1", "KILLED")]
    assert "2 variants, 2 to run, 0 done" in radt("sweep", str(path), "--dry-run").stdout


def test_collocated_variants_on_gpu1_find_the_baseline_measured_on_gpu0(tmp_path, two_gpus):
    path = write(tmp_path, f"""
        name: base
        devices: all
        repeats: 2
        listeners: nvml
        child_listeners: top
        interval: 0.2
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds 0.3 --batch-size 8"}}
        groups:
          - {{workloads: [toy], modes: [exclusive]}}
          - {{workloads: [toy, toy], modes: [naive]}}
    """)
    outcomes = sweep.run(sweep.plan(path))
    assert [(o.variant.mode, o.status) for o in outcomes] == [("exclusive", "FINISHED")] * 2 + [("naive", "FINISHED")] * 2
    client = MlflowClient(two_gpus)
    naive = [o for o in outcomes if o.variant.mode == "naive"]
    assert sorted(o.device for o in naive) == ["0", "1"]  # the two repeats ran side by side
    exclusive_children = {r.info.run_id: r for o in outcomes if o.variant.mode == "exclusive"
                          for r in client.search_runs([client.get_run(o.run_id).info.experiment_id],
                                                      f"tags.`mlflow.parentRunId` = '{o.run_id}'")}
    for o in naive:
        assert o.summary["avg_slowdown_ratio"] > 0
        kids = client.search_runs([client.get_run(o.run_id).info.experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{o.run_id}'")
        for kid in kids:
            assert kid.data.tags["baseline_run_id"] in exclusive_children
            assert kid.data.tags["sweep.gpu_model"] == gpu_name(TWO_GPUS)


def test_gpus_per_variant_gives_a_variant_several_devices(tmp_path, two_gpus):
    seen = tmp_path / "visible.txt"
    path = write(tmp_path, f"""
        name: wide
        devices: all
        gpus_per_variant: 2
        listeners: nvml
        child_listeners: top
        interval: 0.2
        workloads:
          w: {{command: ["{sys.executable}", "-c", "import os, sys; open(sys.argv[1], 'w').write(os.environ['CUDA_VISIBLE_DEVICES'])", "{seen}"]}}
    """)
    (v,) = sweep.plan(path)
    assert v.device == "pool:2" and v.gpus == 2
    (outcome,) = sweep.run([v])
    assert outcome.status == "FINISHED" and outcome.device == "0,1"
    assert seen.read_text() == "0,1"
    parent = MlflowClient(two_gpus).get_run(outcome.run_id)
    assert parent.data.tags["collocation.gpu"] == "0,1"
    assert {"system/gpu0_power_w", "system/gpu1_power_w"} <= set(parent.data.metrics)  # its listeners watched both
    client = MlflowClient(two_gpus)
    (child,) = client.search_runs([parent.info.experiment_id], f"tags.`mlflow.parentRunId` = '{outcome.run_id}'")
    # both GPUs' energy is the workload's (alone on them), with a power timeline per GPU in its numbering
    p = parent.data.metrics
    assert child.data.metrics["summary/gpu_energy_attributed_j"] + p["summary/gpu_energy_unattributed_j"] == \
        pytest.approx(p["summary/gpu_energy_attributed_total_j"], rel=0.01), p
    assert {"system/gpu0_power_attributed_w", "system/gpu1_power_attributed_w"} <= set(child.data.metrics)


def test_device_mode_each_keeps_every_variant_on_every_device(tmp_path, two_gpus):
    path, _ = meet_spec(tmp_path)
    path.write_text(path.read_text().replace("devices:", "device_mode: each\ndevices:"))
    assert sorted((v.device, v.setting["n"]) for v in sweep.plan(path)) == [
        ("0", "p"), ("0", "q"), ("1", "p"), ("1", "q")]


@pytest.mark.parametrize("extra, says", [
    ("gpus_per_variant: 3", "gpus_per_variant: 3 GPUs per variant, but the pool has 2 (0, 1)"),
    ("gpus_per_variant: 0", "gpus_per_variant: expected a whole number 1 or more"),
    ("device_mode: spread", "device_mode: 'spread': use pool"),
    ("device_mode: each\ngpus_per_variant: 2", "gpus_per_variant: applies to device_mode pool"),
    ("gpus_per_variant: 2\nmodes: [mps]", "mode mps runs on one GPU; gpus_per_variant is 2"),
])
def test_bad_pool_settings_are_one_line_before_anything_runs(tmp_path, two_gpus, extra, says):
    path = write(tmp_path, f"""
        devices: all
        {extra.replace(chr(10), chr(10) + '        ')}
        workloads:
          t: {{command: "{sys.executable} -c pass"}}
    """)
    done = radt("sweep", str(path), env={nvml_backend.REPLAY_ENV: TWO_GPUS})
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], done.stderr
    assert parent_runs(two_gpus) == []


@pytest.mark.new_store
def test_collocate_on_a_gpu_the_host_lacks_is_one_line(two_gpus):
    done = radt("collocate", "--device", "7", "-w", f"{sys.executable} -c pass",
                env={nvml_backend.REPLAY_ENV: TWO_GPUS})
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "device '7'" in lines[0] and "no GPU with index 7" in lines[0], done.stderr
    assert not os.path.exists(two_gpus[len("sqlite:///"):]) or parent_runs(two_gpus) == []


@pytest.mark.new_store
def test_a_gpu_on_a_machine_without_gpus_is_one_line(tracking_uri, tmp_path):
    no_gpu = {nvml_backend.REPLAY_ENV: NO_DRIVER}  # NVML does not start, as on a machine without a driver
    marker = tmp_path / "ran"
    done = radt("collocate", "--device", "7", "-w", f"{sys.executable} -c \"open({str(marker)!r}, 'w')\"", env=no_gpu)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: device '7': this machine has no GPU (NVML does not start"), done.stderr
    path = write(tmp_path, f"""
        devices: ["0"]
        workloads:
          t: {{command: "{sys.executable} -c pass"}}
    """)
    done = radt("sweep", str(path), env=no_gpu)
    assert done.returncode == 2 and "devices: '0': this machine has no GPU" in done.stderr, done.stderr
    assert not marker.exists() and not os.path.exists(tracking_uri[len("sqlite:///"):])


def test_the_pool_hands_out_the_first_free_devices_and_waits_for_them():
    pool = DevicePool(["0", "1", "2"], {"0": "H100", "1": "H100", "2": "A100"})
    assert pool.acquire(2) == ["0", "1"]
    assert pool.acquire(1, among=["0", "2"]) == ["2"]
    got = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(2)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and pool.free == []  # nothing free: it waits
    pool.release(["1", "0"])
    waiter.join(10)
    assert got == [["0", "1"]]
    assert pool.acquire(1, stopping=lambda: True) is None
    assert pool.model(["0", "1"]) == "H100" and pool.model(["1", "2"]) is None and pool.model(["cpu"]) == "cpu"
    with pytest.raises(ValueError):
        pool.acquire(4)


def test_a_slurm_job_runs_a_pooled_variant_on_the_gpus_slurm_gave_it():
    from radt_ext.sweep.slurm_job import pooled_devices

    data = {"devices": ["0", "1"], "gpus_per_variant": 2, "workloads": {"t": {"command": "true"}}}
    (v,) = sweep.plan_from_dict(data)
    assert pooled_devices(v, "3,5,6") == ["3", "5"] and pooled_devices(v, None) == ["0", "1"]
    (c,) = sweep.plan_from_dict({"devices": ["cpu"], "workloads": {"t": {"command": "true"}}})
    assert pooled_devices(c, "0") == ["cpu"]


def test_the_next_variant_starts_while_the_last_group_closes_its_runs(tmp_path, two_gpus, monkeypatch):
    """One GPU, two exclusive variants: the second workload starts once the first one ended and its device
    listeners closed, not after the first group's summaries and reports (held back here by 2 s)."""
    from radt_ext.collocation import group as group_mod

    close = group_mod.GroupRunner._close

    def slow_close(self, recorder, t0):
        time.sleep(2.0)
        return close(self, recorder, t0)

    monkeypatch.setattr(group_mod.GroupRunner, "_close", slow_close)
    marks = tmp_path / "marks"
    marks.mkdir()
    path = sweep_spec(tmp_path / "pool.yaml", "early", f"""
        workloads:
          stamp: {{command: "{sys.executable} -c 'import time, sys; open(sys.argv[1], \\"w\\").write(repr(time.time()))' {marks}/{{n}}",
                  params: {{n: a}}}}
        grid: {{n: [a, b]}}
    """, devices='["0"]')
    outcomes = sweep.run(sweep.plan(path))
    assert [o.status for o in outcomes] == ["FINISHED", "FINISHED"]
    groups = [r for r in parent_runs(two_gpus) if "sweep.device" in r.data.tags]
    assert len(groups) == 2 and all(r.info.status == "FINISHED" for r in groups)
    first_end = min(r.info.end_time for r in groups) / 1000
    started = sorted(float((marks / n).read_text()) for n in "ab")
    # the second workload ran before the first group had ended: its close was still sleeping
    assert started[1] < first_end, (started, first_end)
