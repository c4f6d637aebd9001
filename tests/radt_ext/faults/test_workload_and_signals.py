"""The workload fails or `radt-ext run` is signalled: status, exit code, every sample stored, no orphans."""
import signal

import pytest

from tests.radt_ext.faults.scenarios import signal_run, workload_raises

pytestmark = pytest.mark.alone  # it times a stop after a signal: no other test runs beside it


def test_workload_that_raises_is_failed_with_its_exit_code_and_every_sample(tmp_path):
    out = workload_raises(tmp_path)
    assert out.exit_code == 1 and out.status == "FAILED"
    assert "the model diverged" in out.details["stderr"]  # the workload's own traceback still reaches the user
    assert out.details["tags"]["radt_ext.exit_code"] == "1"
    assert out.sent > 0 and out.stored == out.sent and out.duplicates == 0 and out.spooled == 0
    assert out.details["tags"]["radt_ext.listener.top.samples"] != "0"
    assert out.details["helper_left"] == []  # a setsid() helper does not outlive the session


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_ends_the_whole_tree_including_escapees(tmp_path, sig):
    out = signal_run(tmp_path, sig)
    assert len(out.details["pids"]) == 4  # child, SIGTERM-ignoring, setsid, double-forked daemon
    assert out.details["survivors"] == [], out.details
    assert out.exit_code == 128 + sig
    assert out.status == "KILLED"
    assert out.sent > 0 and out.stored == out.sent and out.duplicates == 0
