"""SIGINT/SIGTERM to `radt-ext sweep` while an MPS group runs: the tree and the daemon end, runs are
KILLED, every sample stored; a second `radt-ext sweep` skips what finished and runs the rest."""
import signal

import pytest

from tests.radt_ext.collocation.support import standins  # noqa: F401  (fixture: stand-in MPS/nvidia-smi)
from tests.radt_ext.faults.scenarios import sweep_signal_and_resume

pytestmark = pytest.mark.alone  # it times a stop after a signal: no other test runs beside it


def standin_env(monkeypatch_env) -> dict:
    import os

    return {k: os.environ[k] for k in ("PATH", "RADT_EXT_STANDIN_LOG", "RADT_EXT_FAKE_SMI_STATE")}


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signalled_sweep_ends_everything_and_resumes(standins, tmp_path, sig):  # noqa: F811
    out = sweep_signal_and_resume(tmp_path, sig, standin_env(standins))
    d = out.details
    assert len(d["pids"]) == 6 and d["daemons"], d  # two held workloads x 3 processes; the MPS daemon ran
    assert d["survivors"] == [], d
    assert out.exit_code == 128 + sig, d["first_out"]
    quits = [c for c in standins.calls("nvidia-cuda-mps-control") if c.get("stdin") == ["quit"]]
    assert len(quits) >= 1  # the daemon was told to quit (once per run of the MPS group)
    after = d["after_signal"]  # {(run name, status): runs}
    assert after.get(("first", "FINISHED")) == 1, after
    assert {name for (name, status) in after if status == "KILLED"} == {"held-pair", "held_0", "held_1"}, after
    assert not any(name == "after" for name, _ in after), after  # the sweep stopped at the signal
    assert d["resumed"][0] == 0, d["resumed"][1]
    final = d["final"]
    assert final.get(("first", "FINISHED")) == 1, final  # skipped on resume, not run again
    assert final.get(("held-pair", "FINISHED")) == 1 and final.get(("held-pair", "KILLED")) == 1, final
    assert final.get(("after", "FINISHED")) == 1, final  # and the rest of the sweep ran
    assert len(d["second"]) == 6 and d["second_left"] == [], d  # normal exit: escaped helpers reaped too
    assert out.sent > 0 and out.stored == out.sent and out.duplicates == 0
