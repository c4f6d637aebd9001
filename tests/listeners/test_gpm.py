"""The `gpm` listener's real code against recorded NVML traces, incl. the derived MIG fixture."""
from __future__ import annotations

import glob
import json
import os
import re
import sys

import pynvml
import pytest

from listeners import nvml_backend
from listeners.base import ListenerError, Target
from listeners.gpm import METRICS, GpmListener
from nvml_fake import TRACES, answers, gpu_label, real_gpu_traces, record_fake, replay_from, source_path

sys.path.insert(0, TRACES)
import derive_mig  # noqa: E402

NAME = re.compile(r"^gpu\d+_(mig\d+_)?[a-z0-9_]+_pct$")


@pytest.fixture(params=["fake"] + real_gpu_traces(), ids=os.path.basename)
def trace(request, tmp_path, monkeypatch):
    yield replay_from(monkeypatch, source_path(request.param, tmp_path))
    nvml_backend.reset()


def mig_sources() -> list[str]:
    return ["fake"] + sorted(glob.glob(os.path.join(TRACES, "*_mig_derived.json")))


@pytest.fixture(params=mig_sources(), ids=os.path.basename)
def mig_trace(request, tmp_path, monkeypatch):
    if request.param == "fake":
        path = tmp_path / "mig.json"
        path.write_text(json.dumps(derive_mig.derive(record_fake())))
    else:
        path = request.param
    yield replay_from(monkeypatch, path)
    nvml_backend.reset()


def run(n: int, cvd: str | None = None) -> tuple[GpmListener, list[dict]]:
    listener = GpmListener(Target(cuda_visible_devices=cvd))
    listener.open()
    try:
        return listener, [listener.sample()[0].values for _ in range(n)]
    finally:
        listener.close()


def _metric_values(result) -> dict[int, float]:
    return {m.metricId: m.value for m in result.metrics
            if m.nvmlReturn == pynvml.NVML_SUCCESS and m.value == m.value}  # NaN: no reading


def test_values_are_the_metrics_between_consecutive_samples(trace):
    n = min(4, trace["meta"]["sample_counts"]["gpm"])
    _, samples = run(n)
    a, b = [s["ref"] for s in trace["calls"]["nvmlGpmSampleAlloc"]["[]"][:2]]
    by_pair = {}
    for key, results in trace["calls"]["nvmlGpmMetricsGet"].items():
        (req,) = json.loads(key)
        by_pair[(req["sample1"]["ref"], req["sample2"]["ref"])] = results
    ids = {getattr(pynvml, const): suffix for const, suffix in METRICS.items()}
    for k, values in enumerate(samples):
        pair = (a, b) if k % 2 == 0 else (b, a)
        from listeners.replay import decode

        expected = _metric_values(decode(by_pair[pair][k // 2]))
        assert values == pytest.approx({f"gpu0_{ids[i]}": v for i, v in expected.items()})
        assert all(NAME.match(name) and 0 <= v <= 100.5 for name, v in values.items())
    assert {"gpu0_sm_active_pct", "gpu0_tensor_active_pct", "gpu0_dram_active_pct"} <= set(samples[-1])


def test_nan_metric_is_left_out_not_logged(trace, tmp_path, monkeypatch):
    # The H200 recording's first interval answered NaN for DRAM bandwidth with NVML_SUCCESS.
    for results in trace["calls"]["nvmlGpmMetricsGet"].values():
        for r in results:
            if "fields" in r:
                r["fields"]["metrics"][0]["fields"]["value"] = float("nan")
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(trace))
    replay_from(monkeypatch, path)
    _, samples = run(2)
    name = "gpu0_" + METRICS[list(METRICS)[0]]  # the listener asks for METRICS in order
    assert all(name not in s for s in samples)
    assert "gpu0_sm_active_pct" in samples[-1]


def test_close_frees_both_sample_buffers(trace):
    run(2)
    replay = nvml_backend.nvml()
    assert replay.calls_made("nvmlGpmSampleAlloc") == 2
    assert replay.calls_made("nvmlGpmSampleFree") == 2


def test_mig_mode_gpu_reports_each_gpu_instance(mig_trace):
    _, samples = run(3)
    names = set(samples[-1])
    assert {"gpu0_mig1_sm_active_pct", "gpu0_mig2_sm_active_pct", "gpu0_mig1_tensor_active_pct"} <= names
    assert not any(n.startswith("gpu0_sm") for n in names)
    # the derived fixture gives instance 2 a quarter of instance 1's activity
    assert samples[-1]["gpu0_mig2_sm_active_pct"] == pytest.approx(samples[-1]["gpu0_mig1_sm_active_pct"] * 0.25)


def test_visible_mig_device_is_named_by_its_gpu_instance(mig_trace):
    mig_uuid = answers(mig_trace, "nvmlDeviceGetUUID", derive_mig.Ref("devmig1"))[0]
    _, samples = run(2, cvd=mig_uuid)
    assert samples[-1] and all(n.startswith("gpu0_mig2_") for n in samples[-1])


def _support(trace: dict, answer) -> dict:
    for key in trace["calls"]["nvmlGpmQueryDeviceSupport"]:
        trace["calls"]["nvmlGpmQueryDeviceSupport"][key] = [answer]
    return trace


def test_probe_explains_a_gpu_without_gpm(trace, tmp_path, monkeypatch):
    unsupported = {"struct": "c_nvmlGpmSupport_t", "fields": {"version": 1, "isSupportedDevice": 0}}
    path = tmp_path / "no_gpm.json"
    path.write_text(json.dumps(_support(trace, unsupported)))
    replay_from(monkeypatch, path)
    reason = GpmListener.probe(Target(cuda_visible_devices=None))
    assert "GPM is not supported on GPU 0" in reason and "Hopper" in reason
    with pytest.raises(ListenerError, match="not supported"):
        GpmListener(Target(cuda_visible_devices=None)).open()
    replay = nvml_backend.nvml()
    assert replay.calls_made("nvmlInit") == replay.calls_made("nvmlShutdown")  # open() cleaned up


def test_probe_explains_a_driver_without_gpm(trace, tmp_path, monkeypatch):
    path = tmp_path / "old_driver.json"
    path.write_text(json.dumps(_support(trace, {"nvml_error": pynvml.NVML_ERROR_FUNCTION_NOT_FOUND})))
    replay_from(monkeypatch, path)
    assert "needs NVIDIA driver R520" in GpmListener.probe(Target(cuda_visible_devices=None))


def test_probe_without_nvml(monkeypatch):
    trace = replay_from(monkeypatch, os.path.join(TRACES, "no_driver.json"))
    assert GpmListener.probe(Target()) == trace["meta"]["probe"]["gpm"]
    assert GpmListener.probe(Target()).startswith("NVML not found")


def test_probe_passes_on_the_recorded_gpu(trace):
    assert GpmListener.probe(Target(cuda_visible_devices=None)) is None
    assert gpu_label(trace).label.startswith("dev")


@pytest.mark.gpu
def test_real_gpu_gpm_reads_sm_activity(monkeypatch):
    monkeypatch.delenv(nvml_backend.REPLAY_ENV, raising=False)
    if GpmListener.probe(Target()):
        pytest.skip(GpmListener.probe(Target()))
    import time

    listener = GpmListener(Target())
    listener.open()
    try:
        time.sleep(0.2)
        values = listener.sample()[0].values
    finally:
        listener.close()
    assert 0 <= values["gpu0_sm_active_pct"] <= 100


def test_a_global_interval_leaves_gpm_at_its_floor_and_its_own_interval_goes_below(trace):
    from radt_ext.sampling.recorder import select_listeners

    chosen, _ = select_listeners("nvml,gpm", 0.1, Target())
    assert {lst.name: lst.interval for lst in chosen} == {"nvml": 0.1, "gpm": GpmListener.min_interval}
    assert GpmListener.min_interval > 0.1
    chosen, _ = select_listeners("nvml,gpm:0.1", 2.0, Target())
    assert {lst.name: lst.interval for lst in chosen} == {"nvml": 2.0, "gpm": 0.1}
