"""A listener raises, or its tool disappears mid-run: the workload carries on, the run names the error."""
from tests.radt_ext.faults.scenarios import listener_raises, tool_disappears


def test_a_listener_that_starts_raising_is_named_in_a_tag(tmp_path, tracking_uri):
    out = listener_raises(tmp_path)
    tags = out.details["tags"]
    assert out.exit_code == 0 and out.status == "FINISHED" and out.details["marker"]
    assert tags["radt_ext.listener_error.flaky"] == "sample: RuntimeError: sensor fell off the bus"
    assert out.details["full_rate_flaky"] == 5  # the good readings are kept (the run's timeline artifact)
    assert 0 < out.details["counts"]["system/flaky_value_count"] <= 5  # the store holds their shape
    assert int(tags["radt_ext.listener.top.samples"]) > 10  # the other listener carried on
    assert out.sent > 0 and out.stored == out.sent and out.duplicates == 0


def test_nvidia_smi_killed_and_removed_mid_run(tmp_path):
    out = tool_disappears(tmp_path)
    tags = out.details["tags"]
    assert out.exit_code == 0 and out.status == "FINISHED" and out.details["marker"], out.details["stderr"]
    assert "radt_ext.listener_error.smi" in tags and "nvidia-smi" in tags["radt_ext.listener_error.smi"]
    assert "radt_ext.listener_error.top" not in tags
    smi_points = sum(n for k, n in out.details["counts"].items() if k.startswith("system/smi_"))
    assert smi_points > 0  # what it read before it died is stored
    assert out.sent > 0 and out.stored == out.sent and out.duplicates == 0
