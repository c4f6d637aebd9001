"""The `nvml` listener's real code against recorded NVML traces (RADT_EXT_NVML_REPLAY)."""
from __future__ import annotations

import json
import os
import re

import pynvml
import pytest

from listeners import nvml_backend
from listeners.base import ListenerError, Target
from listeners.nvml import THROTTLE_REASONS, NvmlListener
from nvml_fake import TRACES, answers, gpu_label, real_gpu_traces, replay_from, source_path

NAME = re.compile(r"^gpu\d+_[a-z0-9_]+_(w|j|c|mhz|pct|mib|num|kibps|bool|bits)$")
MIB = 1024 * 1024


@pytest.fixture(params=["fake"] + real_gpu_traces(), ids=os.path.basename)
def trace(request, tmp_path, monkeypatch):
    yield replay_from(monkeypatch, source_path(request.param, tmp_path))
    nvml_backend.reset()


FIELD_IDS = [pynvml.NVML_FI_DEV_POWER_INSTANT, pynvml.NVML_FI_DEV_POWER_AVERAGE,
             pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, pynvml.NVML_FI_DEV_MEMORY_TEMP]


def field_answers(trace: dict, g, field_id: int) -> list | None:
    """Per call, the recorded value of one NVML field (None where that entry failed); None if never asked."""
    from listeners.replay import _label_of_ref, call_key

    calls = trace["calls"].get("nvmlDeviceGetFieldValues", {})
    key = call_key("nvmlDeviceGetFieldValues", (g, FIELD_IDS), _label_of_ref)
    if key not in calls:
        return None
    out = []
    for result in calls[key]:
        entry = next(e["fields"] for e in result if e["fields"]["fieldId"] == field_id)
        value = entry["value"]["fields"]
        out.append(None if entry["nvmlReturn"] else
                   value["ullVal"] if field_id == pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION else value["uiVal"])
    return out


def expected_power_mw(trace: dict, g) -> list:
    """What the k-th sample's power comes from: the instantaneous field (call k+1; call 0 was open()'s
    probe) where the GPU answers it, else nvmlDeviceGetPowerUsage (call k)."""
    instant = field_answers(trace, g, pynvml.NVML_FI_DEV_POWER_INSTANT)
    if instant and instant[0] is not None:
        return instant[1:]
    return answers(trace, "nvmlDeviceGetPowerUsage", g)


def run(n: int, cvd: str | None = None) -> tuple[NvmlListener, list[dict]]:
    listener = NvmlListener(Target(cuda_visible_devices=cvd))
    listener.open()
    try:
        return listener, [listener.sample()[0].values for _ in range(n)]
    finally:
        listener.close()


def test_values_are_the_recorded_readings_in_si_units(trace):
    n = min(5, trace["meta"]["sample_counts"]["nvml"])
    _, samples = run(n)
    g = gpu_label(trace)
    power = expected_power_mw(trace, g)
    temp = answers(trace, "nvmlDeviceGetTemperature", g, pynvml.NVML_TEMPERATURE_GPU)
    sm = answers(trace, "nvmlDeviceGetClockInfo", g, pynvml.NVML_CLOCK_SM)
    util = answers(trace, "nvmlDeviceGetUtilizationRates", g)
    memory = answers(trace, "nvmlDeviceGetMemoryInfo", g)  # [0] was read by open() for the tags
    for k, values in enumerate(samples):
        assert values["gpu0_power_w"] == pytest.approx(power[k] / 1000)
        assert values["gpu0_temp_c"] == temp[k]
        assert values["gpu0_sm_clock_mhz"] == sm[k]
        assert values["gpu0_util_pct"] == util[k].gpu
        assert values["gpu0_mem_util_pct"] == util[k].memory
        assert values["gpu0_mem_used_mib"] == pytest.approx(memory[k + 1].used / MIB)
        assert all(NAME.match(name) for name in values), sorted(values)
        assert 0 < values["gpu0_power_w"] < 2000 and 0 < values["gpu0_temp_c"] < 120


def test_energy_counts_joules_since_the_listener_opened(trace):
    n = min(8, trace["meta"]["sample_counts"]["nvml"])
    _, samples = run(n)
    energy_mj = field_answers(trace, gpu_label(trace), pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION)
    if not energy_mj or energy_mj[0] is None:
        energy_mj = answers(trace, "nvmlDeviceGetTotalEnergyConsumption", gpu_label(trace))
    got = [s["gpu0_energy_j"] for s in samples]
    assert got == pytest.approx([(energy_mj[k + 1] - energy_mj[0]) / 1000 for k in range(n)])
    assert got == sorted(got) and got[0] >= 0
    assert got[-1] < 1000 * n  # joules, not millijoules, over a fraction of a second per sample


def test_throttle_mask_is_decoded_one_bool_per_reason(trace):
    n = min(5, trace["meta"]["sample_counts"]["nvml"])
    _, samples = run(n)
    masks = answers(trace, "nvmlDeviceGetCurrentClocksEventReasons", gpu_label(trace))
    if isinstance(masks[0], pynvml.NVMLError):  # a driver before 535: the listener fell back
        masks = answers(trace, "nvmlDeviceGetCurrentClocksThrottleReasons", gpu_label(trace))
    for k, values in enumerate(samples):
        assert values["gpu0_throttle_mask_bits"] == masks[k]
        for bit, reason in THROTTLE_REASONS.items():
            assert values[f"gpu0_throttle_{reason}_bool"] == (1.0 if masks[k] & bit else 0.0)
    assert {bit for bit in THROTTLE_REASONS} == {
        getattr(pynvml, n) for n in ("nvmlClocksEventReasonGpuIdle", "nvmlClocksEventReasonApplicationsClocksSetting",
                                     "nvmlClocksEventReasonSwPowerCap", "nvmlClocksEventReasonHwSlowdown",
                                     "nvmlClocksEventReasonSyncBoost", "nvmlClocksEventReasonSwThermalSlowdown",
                                     "nvmlClocksEventReasonHwThermalSlowdown",
                                     "nvmlClocksEventReasonHwPowerBrakeSlowdown",
                                     "nvmlClocksEventReasonDisplayClockSetting")}


def _not_supported(trace: dict, fn: str) -> dict:
    for key in trace["calls"][fn]:
        trace["calls"][fn][key] = [{"nvml_error": pynvml.NVML_ERROR_NOT_SUPPORTED}]
    return trace


def test_unsupported_reading_is_dropped_after_its_first_failure(trace, tmp_path, monkeypatch):
    # Make memory temperature answer NotSupported, as it does on GDDR boards.
    for results in trace["calls"].get("nvmlDeviceGetFieldValues", {}).values():
        for result in results:
            for entry in result if isinstance(result, list) else []:
                if entry["fields"]["fieldId"] == pynvml.NVML_FI_DEV_MEMORY_TEMP:
                    entry["fields"]["nvmlReturn"] = pynvml.NVML_ERROR_NOT_SUPPORTED
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(trace))
    replay_from(monkeypatch, path)
    listener, samples = run(4)
    assert all("gpu0_mem_temp_c" not in s for s in samples)
    assert "gpu0_power_w" in samples[-1]
    assert "gpu0_mem_temp_c" in listener.dropped


def test_unsupported_call_is_not_asked_again(tmp_path, monkeypatch):
    from nvml_fake import record_fake

    trace = record_fake(gpus=1, samples=4)
    for key in trace["calls"]["nvmlDeviceGetPerformanceState"]:
        trace["calls"]["nvmlDeviceGetPerformanceState"][key] = [{"nvml_error": pynvml.NVML_ERROR_NOT_SUPPORTED}]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(trace))
    replay_from(monkeypatch, path)
    listener, samples = run(4)
    assert all("gpu0_pstate_num" not in s for s in samples) and "gpu0_power_w" in samples[-1]
    assert "gpu0_pstate_num" in listener.dropped
    assert nvml_backend.nvml().calls_made("nvmlDeviceGetPerformanceState") == 1


def test_transient_error_skips_one_reading_and_retries(trace, tmp_path, monkeypatch):
    g = gpu_label(trace)
    from listeners.replay import _label_of_ref, call_key

    instant = field_answers(trace, g, pynvml.NVML_FI_DEV_POWER_INSTANT)
    if instant and instant[0] is not None:
        key = call_key("nvmlDeviceGetFieldValues", (g, FIELD_IDS), _label_of_ref)
        results = trace["calls"]["nvmlDeviceGetFieldValues"][key]
        entry = next(e["fields"] for e in results[2] if e["fields"]["fieldId"] == pynvml.NVML_FI_DEV_POWER_INSTANT)
        entry["nvmlReturn"] = pynvml.NVML_ERROR_TIMEOUT  # sample 1 (call 0 was open()'s)
        expected = [None, None, field_answers(trace, g, pynvml.NVML_FI_DEV_POWER_INSTANT)[3]]
    else:
        key = call_key("nvmlDeviceGetPowerUsage", (g,), _label_of_ref)
        results = trace["calls"]["nvmlDeviceGetPowerUsage"][key]
        results[1] = {"nvml_error": pynvml.NVML_ERROR_TIMEOUT}
        expected = [None, None, results[2]]
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(trace))
    replay_from(monkeypatch, path)
    listener, samples = run(3)
    assert "gpu0_power_w" in samples[0] and "gpu0_power_w" not in samples[1]
    assert samples[2]["gpu0_power_w"] == pytest.approx(expected[2] / 1000)
    assert "gpu0_power_w" not in listener.dropped


def test_tags_describe_the_visible_gpu(trace):
    listener, _ = run(1)
    tags = listener.tags()
    g = gpu_label(trace)
    assert tags["gpu.0.name"] == answers(trace, "nvmlDeviceGetName", g)[0]
    assert tags["gpu.0.uuid"] == answers(trace, "nvmlDeviceGetUUID", g)[0]
    assert tags["gpu.driver"] == answers(trace, "nvmlSystemGetDriverVersion")[0]
    assert tags["gpu.0.mig_mode"] == "disabled"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items())


def test_index_in_names_is_the_position_in_cuda_visible_devices(tmp_path, monkeypatch):
    from nvml_fake import record_fake

    path = tmp_path / "two.json"
    path.write_text(json.dumps(record_fake(gpus=2, samples=3)))
    trace = replay_from(monkeypatch, path)
    _, samples = run(2, cvd="1")
    power_gpu1 = answers(trace, "nvmlDeviceGetPowerUsage", gpu_label(trace, 1))
    assert {n.split("_")[0] for n in samples[0]} == {"gpu0"}
    assert samples[1]["gpu0_power_w"] == pytest.approx(power_gpu1[1] / 1000)


def test_probe_without_driver_says_nvml_not_found(monkeypatch):
    # This machine has no NVIDIA driver: the real pynvml fails to init.
    monkeypatch.delenv(nvml_backend.REPLAY_ENV, raising=False)
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    except pynvml.NVMLError:
        pass
    reason = NvmlListener.probe(Target(cuda_visible_devices=None))
    assert reason.startswith("NVML not found: no NVIDIA driver on this machine") and "\n" not in reason
    with pytest.raises(ListenerError, match="^NVML not found"):
        NvmlListener(Target()).open()


def test_probe_from_recorded_no_driver_trace(monkeypatch):
    trace = replay_from(monkeypatch, os.path.join(TRACES, "no_driver.json"))
    assert NvmlListener.probe(Target(cuda_visible_devices=None)) == trace["meta"]["probe"]["nvml"]
    assert trace["meta"]["probe"]["nvml"].startswith("NVML not found")


def test_probe_reasons_for_no_or_wrong_gpu(trace):
    assert NvmlListener.probe(Target(cuda_visible_devices=None)) is None
    assert "no GPU visible" in NvmlListener.probe(Target(cuda_visible_devices=""))
    reason = NvmlListener.probe(Target(cuda_visible_devices="9"))
    assert "no GPU with index 9" in reason and "this machine has GPUs 0 (" in reason


@pytest.mark.gpu
def test_real_gpu_reads_power_and_energy(monkeypatch):
    monkeypatch.delenv(nvml_backend.REPLAY_ENV, raising=False)
    import time

    listener = NvmlListener(Target())
    assert NvmlListener.probe(Target()) is None
    listener.open()
    try:
        first = listener.sample()[0].values
        time.sleep(0.5)
        last = listener.sample()[0].values
    finally:
        listener.close()
    assert first["gpu0_power_w"] > 0
    assert last["gpu0_energy_j"] >= first["gpu0_energy_j"] >= 0
    assert all(NAME.match(n) for n in last)


def test_visible_mig_device_reads_its_gpu_and_its_own_memory(monkeypatch):
    # Derived fixture (MIG could not be recorded): see listeners/traces/derive_mig.py.
    trace = replay_from(monkeypatch, os.path.join(TRACES, "h200_mig_derived.json"))
    from listeners.replay import Ref

    mig_uuid = answers(trace, "nvmlDeviceGetUUID", Ref("devmig1"))[0]
    listener, samples = run(3, cvd=mig_uuid)
    power = expected_power_mw(trace, gpu_label(trace))
    mig_memory = answers(trace, "nvmlDeviceGetMemoryInfo", Ref("devmig1"))
    assert samples[2]["gpu0_power_w"] == pytest.approx(power[2] / 1000)  # the physical GPU's power
    assert samples[2]["gpu0_mem_used_mib"] == pytest.approx(mig_memory[3].used / MIB)
    assert "gpu0_util_pct" in listener.dropped and "gpu0_util_pct" not in samples[-1]
    assert listener.tags()["gpu.0.gpu_instance_id"] == "2"


def test_failed_open_shuts_nvml_down_again(trace):
    with pytest.raises(ListenerError, match="no GPU with index 9"):
        NvmlListener(Target(cuda_visible_devices="9")).open()
    replay = nvml_backend.nvml()
    assert replay.calls_made("nvmlInit") == replay.calls_made("nvmlShutdown") == 1
