"""CUDA_VISIBLE_DEVICES → NVML devices, and the machine facts for run tags, on recorded traces."""
from __future__ import annotations

import json
import os
import sys

import pytest

from listeners import devices, nvml_backend
from listeners.base import ListenerError
from nvml_fake import TRACES, answers, gpu_label, real_gpu_traces, record_fake, replay_from, source_path

sys.path.insert(0, TRACES)
import derive_mig  # noqa: E402


@pytest.fixture(params=["fake"] + real_gpu_traces(), ids=os.path.basename)
def trace(request, tmp_path, monkeypatch):
    trace = replay_from(monkeypatch, source_path(request.param, tmp_path))
    nvml_backend.nvml().nvmlInit()
    yield trace
    nvml_backend.reset()


@pytest.fixture
def two_gpus(tmp_path, monkeypatch):
    path = tmp_path / "two.json"
    path.write_text(json.dumps(record_fake(gpus=2, samples=1)))
    trace = replay_from(monkeypatch, path)
    yield trace
    nvml_backend.reset()


@pytest.fixture
def mig(tmp_path, monkeypatch):
    real = real_gpu_traces()
    source = json.load(open(real[0])) if real else record_fake(samples=2)
    path = tmp_path / "mig.json"
    path.write_text(json.dumps(derive_mig.derive(source)))
    yield replay_from(monkeypatch, path)
    nvml_backend.reset()


def uuid_of(trace, index=0) -> str:
    return answers(trace, "nvmlDeviceGetUUID", gpu_label(trace, index))[0]


def test_unset_means_every_gpu(trace):
    found = devices.resolve(None)
    count = answers(trace, "nvmlDeviceGetCount")[0]
    assert [d.nvml_index for d in found] == list(range(count))
    assert found[0].uuid == uuid_of(trace) and found[0].uuid.startswith("GPU-")
    assert found[0].name == answers(trace, "nvmlDeviceGetName", gpu_label(trace))[0]
    assert not found[0].is_mig


def test_empty_string_means_no_gpu(trace):
    assert devices.resolve("") == []


def test_index_uuid_and_uuid_prefix_name_the_same_gpu(trace):
    uuid = uuid_of(trace)
    for value in ("0", uuid, uuid[:12], f" {uuid} "):
        (d,) = devices.resolve(value)
        assert (d.index, d.nvml_index, d.uuid) == (0, 0, uuid), value


def test_order_follows_cuda_visible_devices(two_gpus):
    found = devices.resolve("1,0")
    assert [(d.index, d.nvml_index) for d in found] == [(0, 1), (1, 0)]
    assert found[0].uuid == uuid_of(two_gpus, 1)


@pytest.mark.parametrize("value, says", [
    ("7", "no GPU with index 7"),
    ("-1", "no GPU with index -1"),
    ("GPU-00000000-dead", "no GPU with UUID 'GPU-00000000-dead'"),
    ("MIG-00000000-dead", "no MIG device with UUID"),
    ("cuda:0", "'cuda:0' is not a GPU index, GPU-<uuid> or MIG-<uuid>"),
    ("0,,1", "an empty entry"),
    ("0,0", "names '0' twice"),
    ("--1", "'--1' is not a GPU index"),
    ("\u00b2", "'\u00b2' is not a GPU index"),  # str.isdigit() says yes, int() says no
    ("\u0661", "'\u0661' is not a GPU index"),  # an Arabic-Indic 1: CUDA reads ASCII digits only
])
def test_bad_value_is_one_line_naming_it_and_the_gpus_that_exist(trace, value, says):
    with pytest.raises(ListenerError) as err:
        devices.resolve(value)
    message = str(err.value)
    assert says in message and "\n" not in message
    assert message.startswith(f"CUDA_VISIBLE_DEVICES={value!r}")
    if "twice" not in says:
        assert f"this machine has GPUs 0 ({answers(trace, 'nvmlDeviceGetName', gpu_label(trace))[0]}, " in message


def test_mig_devices_are_found_by_uuid_with_parent_and_instance(mig):
    nvml_backend.nvml().nvmlInit()
    (gpu,) = devices.resolve(None)
    assert gpu.mig_enabled and [m.gpu_instance_id for m in gpu.mig_instances] == [1, 2]
    second = gpu.mig_instances[1]
    assert second.uuid.startswith("MIG-")
    (d,) = devices.resolve(second.uuid)
    assert d.is_mig and d.gpu_instance_id == 2 and d.index == 0
    assert d.parent_handle == gpu.handle and d.handle == second.handle
    both = devices.resolve(f"{gpu.mig_instances[0].uuid},{second.uuid}")
    assert [(x.index, x.gpu_instance_id) for x in both] == [(0, 1), (1, 2)]
    assert "MIG devices MIG-" in devices.unavailable_reason("GPU-nope")
    with pytest.raises(ListenerError, match="'MIG-' matches 2 MIG devices; give more of the UUID"):
        devices.resolve("MIG-")  # a prefix of both: never silently the first


def test_describe_gives_string_facts_for_run_tags(trace):
    tags = devices.describe(devices.resolve("0"))
    g = gpu_label(trace)
    assert tags["gpu.0.name"] == answers(trace, "nvmlDeviceGetName", g)[0]
    assert tags["gpu.0.uuid"] == uuid_of(trace)
    assert tags["gpu.driver"] == answers(trace, "nvmlSystemGetDriverVersion")[0]
    cuda = answers(trace, "nvmlSystemGetCudaDriverVersion")[0]
    assert tags["gpu.cuda_driver"] == f"{cuda // 1000}.{cuda % 1000 // 10}"
    assert tags["gpu.0.power_limit_w"] == f"{answers(trace, 'nvmlDeviceGetPowerManagementLimit', g)[0] / 1000:g}"
    major, minor = answers(trace, "nvmlDeviceGetCudaComputeCapability", g)[0]
    assert tags["gpu.0.compute_capability"] == f"{major}.{minor}"
    assert tags["gpu.0.mig_mode"] == "disabled" and tags["gpu.count"] == "1"
    assert tags["gpu.0.compute_mode"] in ("default", "exclusive_process", "prohibited", "exclusive_thread")
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items())


def test_describe_marks_mig(mig):
    nvml_backend.nvml().nvmlInit()
    tags = devices.describe()
    assert tags["gpu.0.mig_mode"] == "enabled" and tags["gpu.0.mig_devices"].count("MIG-") == 2
    mig_uuid = devices.resolve(None)[0].mig_instances[0].uuid
    tags = devices.describe(devices.resolve(mig_uuid))
    assert tags["gpu.0.uuid"] == mig_uuid and tags["gpu.0.gpu_instance_id"] == "1"


@pytest.mark.gpu
def test_real_gpu_resolves_by_index_and_uuid(monkeypatch):
    monkeypatch.delenv(nvml_backend.REPLAY_ENV, raising=False)
    import pynvml

    pynvml.nvmlInit()
    try:
        (by_index,) = devices.resolve("0")
        (by_uuid,) = devices.resolve(by_index.uuid)
        assert by_uuid.nvml_index == 0 and by_index.uuid.startswith("GPU-")
        with pytest.raises(ListenerError, match="no GPU with index 99"):
            devices.resolve("99")
        assert devices.describe([by_index])["gpu.0.name"] == by_index.name
    finally:
        pynvml.nvmlShutdown()


def test_gpu_indices_lists_every_gpu_of_a_derived_two_gpu_trace(tmp_path, monkeypatch):
    import derive_multi

    source = json.load(open(os.path.join(TRACES, "h200_idle.json")))
    path = tmp_path / "x2.json"
    path.write_text(json.dumps(derive_multi.derive(source, gpus=3)))
    replay_from(monkeypatch, path)
    assert devices.gpu_indices() == ["0", "1", "2"]
    nvml_backend.nvml().nvmlInit()
    try:
        gpus = devices.resolve("2,0")
        assert [g.nvml_index for g in gpus] == [2, 0] and gpus[0].uuid != gpus[1].uuid
    finally:
        nvml_backend.nvml().nvmlShutdown()
    nvml_backend.reset()


def test_the_committed_two_gpu_trace_is_derive_multi_of_the_idle_recording():
    import derive_multi

    source = json.load(open(os.path.join(TRACES, "h200_idle.json")))
    committed = json.load(open(os.path.join(TRACES, "h200x2_derived.json")))
    assert json.loads(json.dumps(derive_multi.derive(source))) == committed


def test_gpu_indices_without_a_driver_is_one_line(monkeypatch):
    replay_from(monkeypatch, os.path.join(TRACES, "no_driver.json"))
    with pytest.raises(ListenerError) as err:
        devices.gpu_indices()
    assert "NVML" in str(err.value) and "\n" not in str(err.value)
    nvml_backend.reset()
