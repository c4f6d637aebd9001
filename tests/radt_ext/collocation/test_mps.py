"""MPS control flow against the stand-in nvidia-cuda-mps-control (tests/radt_ext/bin): a private
daemon per GPU, per-workload client settings, `quit` on success, failure and SIGTERM, refusal
when another daemon owns the GPU."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from radt_ext.collocation import Group, Workload, run_group
from radt_ext.collocation.mps import mps_processes
from radt_ext.errors import UsageError
from tests.radt_ext.collocation.support import BIN, MPS_GPU, TWO_GPU_UUIDS, TWO_GPUS, cpu_command, stamps


def quits(standins) -> list[dict]:
    return [c for c in standins.calls("nvidia-cuda-mps-control") if c.get("stdin") == ["quit"]]


def starts(standins) -> list[dict]:
    return [c for c in standins.calls("nvidia-cuda-mps-control") if c["args"] == ["-d"]]


def no_daemon_left(pipe: str) -> bool:
    return not [p for p, env in mps_processes() if env and env.get("CUDA_MPS_PIPE_DIRECTORY") == pipe]


def test_private_daemon_client_settings_and_quit(standins, tracking_uri, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MPS_GPU)  # clients must not inherit it under MPS
    stamp = str(tmp_path / "s.txt")
    g = Group(mode="mps", experiment_name="mps", interval=0.1, workloads=[
        Workload("a", cpu_command(0.5, 8, stamp), device=MPS_GPU, mps_thread_percentage=30, mps_pinned_mem_limit="4G"),
        Workload("b", cpu_command(0.5, 16, stamp), device=MPS_GPU, mps_thread_percentage=70)])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FINISHED"
    (start,) = starts(standins)
    assert start["cuda_visible_devices"] == MPS_GPU
    pipe = start["pipe"]
    assert pipe != "/tmp/nvidia-mps" and f"radt-ext-mps-gpu{MPS_GPU}-" in pipe  # private, not the system default
    rows = {int(r[2]): r for r in stamps(stamp)}
    assert rows[8][3] == pipe and rows[16][3] == pipe  # both clients talk to this daemon
    assert rows[8][4] == "0" and rows[16][4] == "0"  # no UUID without NVML: the re-indexed GPU
    assert (rows[8][5], rows[16][5]) == ("30", "70")
    (quit_call,) = quits(standins)
    assert quit_call["pipe"] == pipe
    assert no_daemon_left(pipe) and not os.path.exists(pipe)
    client = MlflowClient(tracking_uri)
    parent = client.get_run(result.parent_run_id)
    assert parent.data.tags["collocation.mode"] == "mps"
    assert f"collocation.mps.gpu{MPS_GPU}.quit" in parent.data.tags
    log = client.download_artifacts(result.parent_run_id, f"mps/gpu{MPS_GPU}_control.log", str(tmp_path))
    assert "Cmd:quit" in open(log).read()
    env_a = [c for c in result.children if c.name == "a"][0]
    assert client.get_run(env_a.run_id).data.tags["collocation.mode"] == "mps"


def test_quit_after_a_failing_workload(standins, tracking_uri, tmp_path):
    g = Group(mode="mps", experiment_name="mps", interval=0.1, workloads=[
        Workload("bad", cpu_command(0.2, 8, exit=5), device=MPS_GPU)])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FAILED" and result.exit_code == 5
    assert len(starts(standins)) == 1 and len(quits(standins)) == 1
    assert no_daemon_left(starts(standins)[0]["pipe"])


def _end_what_is_left(proc: subprocess.Popen, standins) -> None:
    """After a failure: no collocate tree and no stand-in daemon of this test may meet the next test."""
    if proc.poll() is None:
        for p in [*psutil.Process(proc.pid).children(recursive=True), psutil.Process(proc.pid)]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        proc.wait(30)
    pipes = {s["pipe"] for s in starts(standins)}
    for p, env in mps_processes():
        if env and env.get("CUDA_MPS_PIPE_DIRECTORY") in pipes:
            p.kill()


def test_quit_on_sigterm(standins, tracking_uri, tmp_path):
    cmd = " ".join(cpu_command(60, 8))
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "collocate", "--mode", "mps", "--device", MPS_GPU,
                             "-i", "0.1", "-w", cmd, "-w", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=os.environ.copy())
    try:
        deadline = time.time() + 60
        while time.time() < deadline:  # both workloads running under the daemon
            kids = psutil.Process(proc.pid).children(recursive=True)
            if starts(standins) and sum("cpu_workload.py" in " ".join(k.cmdline()) for k in kids
                                        if k.is_running()) >= 2:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            tree = [" ".join(k.cmdline()) for k in psutil.Process(proc.pid).children(recursive=True)]
            pytest.fail(f"collocate still running 120 s after SIGTERM; its processes: {tree}")
    finally:
        _end_what_is_left(proc, standins)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert len(quits(standins)) == 1
    assert no_daemon_left(starts(standins)[0]["pipe"])
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 3 and {r.info.status for r in runs} == {"KILLED"}


def test_refuses_a_gpu_another_daemon_owns(standins, tracking_uri, tmp_path):
    foreign = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path / "foreign"),
               "CUDA_MPS_LOG_DIRECTORY": str(tmp_path / "foreign-log")}
    foreign["CUDA_VISIBLE_DEVICES"] = f"{MPS_GPU},{int(MPS_GPU) + 1}"  # serves our GPU (and another)
    control = os.path.join(BIN, "nvidia-cuda-mps-control")
    subprocess.run([control, "-d"], env=foreign, check=True, timeout=30)
    try:
        g = Group(mode="mps", workloads=[Workload("a", cpu_command(0.2), device=MPS_GPU)])
        with pytest.raises(UsageError, match=rf"GPU {MPS_GPU} is already served by another MPS daemon .*pid \d+"):
            run_group(g, echo=lambda m: None)
        assert len(starts(standins)) == 1  # only the foreign one: ours was never started
        client = MlflowClient(tracking_uri)
        assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []
    finally:
        subprocess.run([control], input="quit\n", text=True, env=foreign, timeout=30)


def test_missing_control_binary_is_one_line(tracking_uri, monkeypatch):
    """A host with a GPU (NVML replayed: no nvidia-smi on this PATH) but without MPS's control binary."""
    from listeners import nvml_backend

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv(nvml_backend.REPLAY_ENV, TWO_GPUS)
    nvml_backend.reset()
    try:
        with pytest.raises(UsageError, match="needs nvidia-cuda-mps-control on PATH"):
            run_group(Group(mode="mps", workloads=[Workload("a", ["true"], device="0")]), echo=lambda m: None)
    finally:
        nvml_backend.reset()


def test_gpu1_of_a_two_gpu_host_daemon_and_clients_name_it_by_uuid(standins, tracking_uri, tmp_path, monkeypatch):
    """On a 2-GPU host the MPS server re-indexes its one GPU to 0: a client told CUDA_VISIBLE_DEVICES=1
    fails in CUDA initialisation. Daemon and clients both get GPU 1's UUID."""
    from listeners import nvml_backend

    monkeypatch.setenv(nvml_backend.REPLAY_ENV, TWO_GPUS)
    nvml_backend.reset()
    try:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # what a lane of GPU 1 would have inherited
        stamp = str(tmp_path / "s.txt")
        g = Group(mode="mps", experiment_name="mps", interval=0.1, listeners="", child_listeners="top", workloads=[
            Workload("a", cpu_command(0.3, 8, stamp), device="1"), Workload("b", cpu_command(0.3, 16, stamp), device="1")])
        result = run_group(g, echo=lambda m: None)
    finally:
        nvml_backend.reset()
    assert result.status == "FINISHED"
    (start,) = starts(standins)
    assert start["cuda_visible_devices"] == TWO_GPU_UUIDS[1]
    assert {r[4] for r in stamps(stamp)} == {TWO_GPU_UUIDS[1]}
    tags = MlflowClient(tracking_uri).get_run(result.parent_run_id).data.tags
    assert tags["collocation.mps.gpu1.visible"] == TWO_GPU_UUIDS[1]


def test_a_failed_workload_says_why_in_its_run(tracking_uri, tmp_path):
    """Every mode: the end of a failed workload's stderr is a tag and an artifact of its run."""
    crash = [sys.executable, "-c", "import sys; print('loading', file=sys.stderr); "
             "raise RuntimeError('device >= 0 && device < num_gpus INTERNAL ASSERT FAILED')"]
    g = Group(mode="naive", experiment_name="why", interval=0.1, listeners="", child_listeners="top", workloads=[
        Workload("bad", crash, device="cpu"), Workload("good", cpu_command(0.2, 8), device="cpu")])
    result = run_group(g, echo=lambda m: None)
    assert result.status == "FAILED"
    client = MlflowClient(tracking_uri)
    bad, good = (client.get_run(c.run_id) for c in result.children)
    tail = bad.data.tags["radt_ext.stderr_tail"]
    assert tail.startswith("loading") and tail.rstrip().endswith("INTERNAL ASSERT FAILED")
    path = client.download_artifacts(bad.info.run_id, "stderr_tail.txt", str(tmp_path))
    assert "RuntimeError: device >= 0" in open(path).read()
    assert "radt_ext.stderr_tail" not in good.data.tags  # a finished run keeps no tail
