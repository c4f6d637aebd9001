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
    """Without the sample buffer, what the k-th sample's power comes from: the instantaneous field (call
    k+1; call 0 was open()'s probe) where the GPU answers it, else nvmlDeviceGetPowerUsage (call k)."""
    instant = field_answers(trace, g, pynvml.NVML_FI_DEV_POWER_INSTANT)
    if instant and instant[0] is not None:
        return instant[1:]
    return answers(trace, "nvmlDeviceGetPowerUsage", g)


def has_buffer(trace: dict) -> bool:
    """Whether the trace holds the driver's power samples (else power is read point by point)."""
    return any("samples" in a for answers in trace["calls"].get("nvmlDeviceGetSamples", {}).values()
               for a in answers)


def run(n: int, cvd: str | None = None, closing: bool = False,
        interval: float | None = None) -> tuple[NvmlListener, list[dict]]:
    """n samples back to back (and the closing one): per sample, the values read at that moment.
    Where power comes from the driver's sample buffer, its points (each at its own time) are kept
    apart in `listener.timeline` as (time, name, watts)."""
    listener = NvmlListener(Target(cuda_visible_devices=cvd), interval)
    listener.open()
    try:
        batches = [listener.sample() for _ in range(n)] + ([listener.closing_sample()] if closing else [])
    finally:
        listener.close()
    buffered = {f"gpu{d.index}_power_w" for d in listener.devices
                if listener.tags()[f"gpu.{d.index}.power_source"].startswith("driver power samples")}
    listener.timeline, out = [], []
    for batch in batches:
        values = {}
        for r in batch:
            for name, value in r.values.items():
                if name in buffered:
                    listener.timeline.append((r.time, name, value))
                else:
                    values[name] = value
        out.append(values)
    return listener, out


def test_values_are_the_recorded_readings_in_si_units(trace):
    n = min(5, trace["meta"]["sample_counts"]["nvml"])
    _, samples = run(n)
    g = gpu_label(trace)
    power = None if has_buffer(trace) else expected_power_mw(trace, g)
    temp = answers(trace, "nvmlDeviceGetTemperature", g, pynvml.NVML_TEMPERATURE_GPU)
    sm = answers(trace, "nvmlDeviceGetClockInfo", g, pynvml.NVML_CLOCK_SM)
    util = answers(trace, "nvmlDeviceGetUtilizationRates", g)
    memory = answers(trace, "nvmlDeviceGetMemoryInfo", g)  # [0] was read by open() for the tags
    for k, values in enumerate(samples):
        if power is None:  # power is the driver's own samples, apart from the point reads
            assert "gpu0_power_w" not in values
        else:
            assert values["gpu0_power_w"] == pytest.approx(power[k] / 1000)
            assert 0 < values["gpu0_power_w"] < 2000
        assert values["gpu0_temp_c"] == temp[k]
        assert values["gpu0_sm_clock_mhz"] == sm[k]
        assert values["gpu0_util_pct"] == util[k].gpu
        assert values["gpu0_mem_util_pct"] == util[k].memory
        assert values["gpu0_mem_used_mib"] == pytest.approx(memory[k + 1].used / MIB)
        assert all(NAME.match(name) for name in values), sorted(values)
        assert 0 < values["gpu0_temp_c"] < 120


def energy_answers_mj(trace: dict, g) -> list:
    """The recorded energy counter reads, in order: its field where the GPU answers it, else the call."""
    energy_mj = field_answers(trace, g, pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION)
    if energy_mj and energy_mj[0] is not None:
        return energy_mj
    from listeners.replay import _label_of_ref, call_key

    key = call_key("nvmlDeviceGetFieldValues", (g, [pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION]), _label_of_ref)
    own = trace["calls"].get("nvmlDeviceGetFieldValues", {}).get(key)
    if own and not own[0][0]["fields"]["nvmlReturn"]:
        return [r[0]["fields"]["value"]["fields"]["ullVal"] for r in own]
    return answers(trace, "nvmlDeviceGetTotalEnergyConsumption", g)


def test_energy_counts_joules_since_open_read_at_open_and_close_only(trace):
    n = min(8, trace["meta"]["sample_counts"]["nvml"])
    listener, samples = run(n, closing=True)
    energy_mj = energy_answers_mj(trace, gpu_label(trace))
    # back to back, well inside ENERGY_EVERY_S: 0 J at open (handed out by the first sample), then the
    # counter's difference at close; no read in between (each costs ~5 ms of driver CPU)
    assert samples[0]["gpu0_energy_j"] == 0.0
    assert all("gpu0_energy_j" not in v for v in samples[1:-1])
    # the counter at close is the recording's of that moment: where the field call read every sample
    # has come (open's read, then n), not the recording's next answer
    shared = field_answers(trace, gpu_label(trace), pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION) is not None
    close = min(n, len(energy_mj) - 1) if shared else 1
    assert samples[-1]["gpu0_energy_j"] == pytest.approx((energy_mj[close] - energy_mj[0]) / 1000)
    assert 0 <= samples[-1]["gpu0_energy_j"] < 1000 * n  # joules, not millijoules


def test_energy_is_read_again_once_its_period_has_passed(trace, monkeypatch):
    import listeners.nvml as nvml_module

    monkeypatch.setattr(nvml_module, "ENERGY_EVERY_S", 0.0)  # with a µs interval: every sample
    n = min(4, trace["meta"]["sample_counts"]["nvml"])
    _, samples = run(n, closing=True, interval=1e-6)
    energy_mj = energy_answers_mj(trace, gpu_label(trace))
    got = [v["gpu0_energy_j"] for v in samples]  # the first sample's read follows its 0 J at open
    last = len(energy_mj) - 1  # past the recording the replay holds the last answer
    assert got == pytest.approx([(energy_mj[min(k, last)] - energy_mj[0]) / 1000 for k in range(1, n + 2)])
    assert got == sorted(got)


def test_power_is_the_drivers_samples_each_at_its_own_time_else_point_reads_and_why(trace):
    n = min(5, trace["meta"]["sample_counts"]["nvml"])
    listener, samples = run(n, closing=True)
    source = listener.tags()["gpu.0.power_source"]
    if not has_buffer(trace):  # recorded before the buffer was read: replayed as not supported
        assert source.startswith("point reads every 0.1 s") and "NVMLError_NotSupported" in source
        assert all("gpu0_power_w" in v for v in samples[:-1]) and not listener.timeline
        return
    assert source.startswith("driver power samples (nvmlDeviceGetSamples), drained every")
    calls = next(iter(trace["calls"]["nvmlDeviceGetSamples"].values()))
    backlog = calls[0]["samples"]
    drained = sorted({int(t): v for a in calls[1:2] for t, v in a.get("samples", []) if t > backlog[-1][0]}.items())
    # back to back the buffer is not due; the closing sample drains what came since open, sample by sample
    assert [w for _, _, w in listener.timeline] == pytest.approx([v / 1000 for _, v in drained])
    times = [t for t, _, _ in listener.timeline]
    gaps = [b - a for a, b in zip(times, times[1:])]
    recorded_gaps = [(b - a) / 1e6 for (a, _), (b, _) in zip(drained, drained[1:])]
    assert gaps == pytest.approx(recorded_gaps, abs=1e-6)  # each at its own time (the driver's ~20 ms spacing)
    assert listener.interval == 0.1  # the buffer holds over 2 s: drained every second, the tick is the interval


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
    listener, samples = run(4, closing=True)
    assert all("gpu0_mem_temp_c" not in s for s in samples)
    assert "gpu0_power_w" in samples[-2] or listener.timeline  # the other readings carry on
    assert "gpu0_mem_temp_c" in listener.dropped


def test_unsupported_call_is_not_asked_again(tmp_path, monkeypatch):
    from nvml_fake import record_fake

    trace = record_fake(gpus=1, samples=4, power_samples=False)
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

    if has_buffer(trace):  # power is not read point by point here: a temperature read fails once
        key = call_key("nvmlDeviceGetTemperature", (g, pynvml.NVML_TEMPERATURE_GPU), _label_of_ref)
        results = trace["calls"]["nvmlDeviceGetTemperature"][key]
        results[1] = {"nvml_error": pynvml.NVML_ERROR_TIMEOUT}
        path = tmp_path / "edited.json"
        path.write_text(json.dumps(trace))
        replay_from(monkeypatch, path)
        listener, samples = run(3)
        assert "gpu0_temp_c" in samples[0] and "gpu0_temp_c" not in samples[1]
        assert samples[2]["gpu0_temp_c"] == results[2] and "gpu0_temp_c" not in listener.dropped
        return
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
    path.write_text(json.dumps(record_fake(gpus=2, samples=3, power_samples=False)))
    trace = replay_from(monkeypatch, path)
    _, samples = run(2, cvd="1")
    power_gpu1 = answers(trace, "nvmlDeviceGetPowerUsage", gpu_label(trace, 1))
    assert {n.split("_")[0] for n in samples[0]} == {"gpu0"}
    assert samples[1]["gpu0_power_w"] == pytest.approx(power_gpu1[1] / 1000)
    path.write_text(json.dumps(record_fake(gpus=2, samples=3)))  # with the sample buffer: its points too
    replay_from(monkeypatch, path)
    listener, _ = run(2, cvd="1", closing=True)
    assert listener.timeline and {name for _, name, _ in listener.timeline} == {"gpu0_power_w"}


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
        readings = listener.sample()
        time.sleep(1.5)
        readings += listener.sample() + listener.closing_sample()
    finally:
        listener.close()
    power = [r.values["gpu0_power_w"] for r in readings if "gpu0_power_w" in r.values]
    energy = [r.values["gpu0_energy_j"] for r in readings if "gpu0_energy_j" in r.values]
    assert power and all(p > 0 for p in power)
    assert energy[0] == 0.0 and energy == sorted(energy) and energy[-1] > 0
    assert all(NAME.match(n) for r in readings for n in r.values)


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
