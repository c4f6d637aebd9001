"""MIG control flow against the stand-in nvidia-smi (tests/radt_ext/bin) and the derived MIG
NVML trace: pin workloads to existing instances by MIG UUID; plan missing ones and apply
the plan only with allow_mig_reconfigure. No real GPU is touched."""
from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from listeners import nvml_backend
from radt_ext.collocation import Group, Workload, run_group
from radt_ext.errors import UsageError
from tests.radt_ext.collocation.support import GPU_UUID, MIG_TRACE, MIG_UUIDS, cpu_command, stamps
from tests.radt_ext.helpers import radt


def mig_gpu(instances, mode="Enabled"):
    return [{"index": "0", "name": "NVIDIA H200", "uuid": GPU_UUID, "mig": mode, "instances": instances}]


def creates(standins):
    return [c["args"] for c in standins.calls("nvidia-smi") if "-cgi" in c["args"] or "-mig" in c["args"]]


@pytest.fixture
def mig_replay(monkeypatch):
    monkeypatch.setenv(nvml_backend.REPLAY_ENV, MIG_TRACE)
    nvml_backend.reset()
    yield
    nvml_backend.reset()


def test_existing_instances_pin_each_workload(standins, tracking_uri, tmp_path, mig_replay):
    standins.set_gpus(mig_gpu([{"profile": "3g.40gb", "uuid": u} for u in MIG_UUIDS]))
    stamp = str(tmp_path / "s.txt")
    g = Group(mode="mig", experiment_name="mig", interval=0.1, listeners="nvml", child_listeners="top", workloads=[
        Workload("a", cpu_command(0.5, 8, stamp), device="0", mig="3g.40gb"),
        Workload("b", cpu_command(0.5, 16, stamp), device="0", mig=MIG_UUIDS[1])])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FINISHED"
    visible = {int(r[2]): r[4] for r in stamps(stamp)}
    assert visible == {8: MIG_UUIDS[0], 16: MIG_UUIDS[1]}
    assert creates(standins) == []  # nothing was created or changed
    client = MlflowClient(tracking_uri)
    for child, uuid in zip(result.children, MIG_UUIDS):
        assert client.get_run(child.run_id).data.tags["collocation.mig_device"] == uuid
    parent = client.get_run(result.parent_run_id)
    assert "system/gpu0_power_w" in parent.data.metrics  # device level on the parent (physical GPU)


def test_gpm_of_the_instance_on_the_child(standins, tracking_uri, tmp_path, mig_replay):
    # one GPM user per process: the replay answers GPM sample handles in recorded order
    standins.set_gpus(mig_gpu([{"profile": "3g.40gb", "uuid": u} for u in MIG_UUIDS]))
    g = Group(mode="mig", experiment_name="mig", interval=0.1, listeners="nvml", child_listeners="gpm:0.1",
              workloads=[Workload("a", cpu_command(0.8, 8), device="0", mig=MIG_UUIDS[0])])
    result = run_group(g, echo=lambda m: None)
    run = MlflowClient(tracking_uri).get_run(result.children[0].run_id)
    assert run.data.tags["collocation.mig_device"] == MIG_UUIDS[0]
    assert "radt_ext.listener_error.gpm" not in run.data.tags, run.data.tags.get("radt_ext.listener_error.gpm")
    assert "system/gpu0_mig1_sm_active_pct" in run.data.metrics  # GPU instance 1, sorted(run.data.metrics)


def test_missing_profiles_print_the_plan_and_change_nothing(standins, tracking_uri):
    standins.set_gpus(mig_gpu([], mode="Disabled"))
    before = standins.smi_state()
    lines = []
    g = Group(mode="mig", workloads=[Workload("a", ["true"], device="0", mig="3g.71gb"),
                                     Workload("b", ["true"], device="0", mig="3g.71gb")])
    with pytest.raises(UsageError, match="--allow-mig-reconfigure") as err:
        run_group(g, echo=lines.append)
    plan = "nvidia-smi -i 0 -mig 1; nvidia-smi mig -i 0 -cgi 3g.71gb,3g.71gb -C"
    assert plan in str(err.value) and "\n" not in str(err.value)
    assert any(plan in line for line in lines)
    assert creates(standins) == [] and standins.smi_state() == before
    client = MlflowClient(tracking_uri)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_allow_reconfigure_applies_the_plan_then_runs(standins, tracking_uri, tmp_path):
    standins.set_gpus(mig_gpu([], mode="Disabled"))
    stamp = str(tmp_path / "s.txt")
    g = Group(mode="mig", interval=0.1, allow_mig_reconfigure=True, workloads=[
        Workload("a", cpu_command(0.3, 8, stamp), device="0", mig="1g.18gb"),
        Workload("b", cpu_command(0.3, 16, stamp), device="0", mig="2g.35gb")])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FINISHED"
    assert creates(standins) == [["-i", "0", "-mig", "1"], ["mig", "-i", "0", "-cgi", "1g.18gb,2g.35gb", "-C"]]
    made = {m["profile"]: m["uuid"] for m in standins.smi_state()["gpus"][0]["instances"]}
    assert {int(r[2]): r[4] for r in stamps(stamp)} == {8: made["1g.18gb"], 16: made["2g.35gb"]}


def test_bad_mig_values_are_one_line(standins, tracking_uri):
    with pytest.raises(UsageError, match="neither a MIG profile"):
        run_group(Group(mode="mig", workloads=[Workload("a", ["true"], mig="big")]), echo=lambda m: None)
    with pytest.raises(UsageError, match="no MIG device 'MIG-nope'"):
        run_group(Group(mode="mig", workloads=[Workload("a", ["true"], mig="MIG-nope")]), echo=lambda m: None)
    with pytest.raises(UsageError, match="needs a MIG profile"):
        run_group(Group(mode="mig", workloads=[Workload("a", ["true"])]), echo=lambda m: None)


def test_cli_prints_plan_without_the_flag(standins, tracking_uri):
    standins.set_gpus(mig_gpu([]))
    done = radt("collocate", "--mode", "mig", "--mig", "3g.71gb", "-w", "true")
    assert done.returncode == 2 and "nvidia-smi mig -i 0 -cgi 3g.71gb -C" in done.stderr
    assert "Traceback" not in done.stderr and creates(standins) == []
