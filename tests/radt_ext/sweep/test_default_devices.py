"""A sweep without `devices:`: this machine's GPUs (NVML), or cpu where it has none, said in its first line;
a spec that lists its devices keeps them and their checks."""
from __future__ import annotations

import sys
import textwrap

import pytest

from listeners import nvml_backend
from radt_ext.sweep.spec import SpecError, parse
from tests.radt_ext.helpers import parent_runs, radt
from tests.traces import NO_DRIVER, TWO_GPUS

TOY = {"toy": {"command": f"{sys.executable} -c 'print(1)'"}}


def spec(tmp_path, extra: str = "") -> str:
    path = tmp_path / "nodevices.yaml"
    path.write_text(textwrap.dedent(f"""
        name: nodevices
        listeners: top
        child_listeners: top
        interval: 0.2
        workloads:
          toy: {{command: "{sys.executable} -c 'print(1)'"}}
    """) + extra)
    return str(path)


@pytest.fixture
def replayed(monkeypatch):
    """NVML replayed from the given trace, in this process and the CLI's."""
    def use(trace: str) -> None:
        monkeypatch.setenv(nvml_backend.REPLAY_ENV, trace)
        nvml_backend.reset()

    yield use
    nvml_backend.reset()


@pytest.fixture
def no_replay(monkeypatch):
    """The machine's own NVML and nvidia-smi; skips where they list a GPU (the no-GPU path is proven where
    there is none; the GPU path on the replayed NVML)."""
    monkeypatch.delenv(nvml_backend.REPLAY_ENV, raising=False)
    nvml_backend.reset()
    found = parse({"name": "s", "workloads": TOY}).devices
    if found != ["cpu"]:
        pytest.skip(f"this machine has GPUs {found}; the GPU path is tested on the replayed NVML")
    yield
    nvml_backend.reset()


def test_without_gpus_a_sweep_runs_on_the_cpu_and_says_so_first(tmp_path, tracking_uri, no_replay):
    sweep = parse({"name": "s", "workloads": TOY})
    assert sweep.devices == ["cpu"]
    assert sweep.devices_line.startswith("devices: cpu (no GPU on this machine: ")
    done = radt("sweep", spec(tmp_path), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines()[0] == sweep.devices_line
    (run,) = parent_runs(tracking_uri)
    assert run.info.status == "FINISHED" and run.data.tags["sweep.device"] == "cpu"


def test_a_machine_without_a_driver_replayed_gives_cpu_too(tmp_path, tracking_uri, replayed, standins):
    replayed(NO_DRIVER)
    standins.set_gpus([])  # nvidia-smi lists none either
    sweep = parse({"name": "s", "workloads": TOY})
    assert sweep.devices == ["cpu"] and sweep.devices_line.startswith("devices: cpu (no GPU on this machine: ")
    done = radt("sweep", spec(tmp_path), "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == sweep.devices_line
    assert "exclusive toy on cpu" in done.stderr


def test_a_machine_with_gpus_gives_every_gpu_to_the_pool(tmp_path, tracking_uri, replayed):
    replayed(TWO_GPUS)
    sweep = parse({"name": "s", "workloads": TOY})
    assert sweep.devices == ["0", "1"] and sweep.devices_line == "devices: 0, 1 (this machine's GPUs)"
    assert parse({"name": "s", "modes": ["mps"], "workloads": TOY}).devices == ["0", "1"]  # GPU modes allowed
    done = radt("sweep", spec(tmp_path), "--dry-run", "--output", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "devices: 0, 1 (this machine's GPUs)"
    assert done.stdout.splitlines()[0].startswith("index,hash,")  # the CSV on stdout stays clean


def test_where_nvml_does_not_start_the_gpus_nvidia_smi_lists_are_taken(tmp_path, tracking_uri, replayed, standins):
    replayed(NO_DRIVER)  # as a GPU named in `devices:` is checked: NVML first, else `nvidia-smi -L`
    sweep = parse({"name": "s", "workloads": TOY})
    assert sweep.devices == ["0"] and sweep.devices_line == "devices: 0 (this machine's GPUs)"


def test_a_gpu_mode_on_a_machine_without_gpus_is_one_line_naming_why(tmp_path, tracking_uri, replayed, standins):
    replayed(NO_DRIVER)
    standins.set_gpus([])
    with pytest.raises(SpecError, match=r"modes\[0\]: mode mps needs a GPU; devices is cpu \(no GPU on this machine\)"):
        parse({"name": "s", "modes": ["mps"], "workloads": TOY})
    done = radt("sweep", spec(tmp_path, "modes: [mps]\n"), "--dry-run")
    assert done.returncode != 0 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "mode mps needs a GPU; devices is cpu (no GPU on this machine)" in done.stderr


def test_listed_devices_are_kept_and_checked_as_before(tmp_path, tracking_uri, replayed):
    replayed(TWO_GPUS)
    sweep = parse({"name": "s", "devices": ["1"], "workloads": TOY})
    assert sweep.devices == ["1"] and sweep.devices_line is None
    with pytest.raises(SpecError, match="devices lists 'cpu'"):
        parse({"name": "s", "devices": ["cpu"], "modes": ["mps"], "workloads": TOY})
    done = radt("sweep", spec(tmp_path, 'devices: ["7"]\n'))
    assert done.returncode != 0 and done.stderr.startswith("Error: devices: '7': "), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not parent_runs(tracking_uri)  # nothing ran


def test_a_slurm_sweep_without_devices_keeps_each_jobs_first_gpu(replayed, standins):
    replayed(NO_DRIVER)  # the submitting machine has no GPU; the jobs' nodes have theirs
    standins.set_gpus([])
    sweep = parse({"name": "s", "workloads": TOY}, local=False)
    assert sweep.devices == ["0"] and sweep.devices_line is None
