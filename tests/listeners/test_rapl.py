"""rapl listener against a powercap tree the test builds (this machine has no RAPL)."""
from __future__ import annotations

import os
import time

import pytest

from listeners.base import ListenerError, Target
from listeners.rapl import RaplListener

MAX = 262143328850  # a real package max_energy_range_uj


def zone(path, name, energy, max_range=MAX):
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy}\n")
    (path / "max_energy_range_uj").write_text(f"{max_range}\n")
    return path / "energy_uj"


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "powercap"
    files = {
        "p0": zone(root / "intel-rapl:0", "package-0", 1_000_000),
        "p0dram": zone(root / "intel-rapl:0" / "intel-rapl:0:0", "dram", 500_000, 65712999613),
        "p0core": zone(root / "intel-rapl:0" / "intel-rapl:0:1", "core", 7),
        "p1": zone(root / "intel-rapl:1", "package-1", MAX - 1_000_000),  # about to wrap
    }
    (root / "intel-rapl-mmio:0").mkdir()  # another powercap control type: ignored
    return root, files


def test_energy_power_and_wraparound(tree):
    root, files = tree
    listener = RaplListener(Target(), 0.1, root=root)
    assert RaplListener.probe(Target(), root=root) is None
    listener.open()
    start = time.time()
    files["p0"].write_text("3000000\n")  # +2 J
    files["p0dram"].write_text("1500000\n")  # +1 J
    files["p1"].write_text("2000000\n")  # wrapped: +1 J before the wrap, +2 J after
    time.sleep(0.2)
    first = listener.read()
    elapsed = time.time() - start
    assert set(first) == {f"cpu{p}_{d}_{u}" for p, d in ((0, "package"), (0, "dram"), (1, "package"))
                          for u in ("energy_j", "power_w")}
    assert first["cpu0_package_energy_j"] == pytest.approx(2.0)
    assert first["cpu0_dram_energy_j"] == pytest.approx(1.0)
    assert first["cpu1_package_energy_j"] == pytest.approx(3.0)
    assert 2.0 / (elapsed + 0.05) < first["cpu0_package_power_w"] <= 2.0 / 0.2
    files["p0"].write_text("4000000\n")
    second = listener.read()
    assert second["cpu0_package_energy_j"] == pytest.approx(3.0)  # cumulative since open
    assert second["cpu1_package_power_w"] == 0.0
    listener.close()


def test_probe_reasons(tmp_path, tree):
    assert "no RAPL zones" in RaplListener.probe(Target(), root=tmp_path / "absent")
    root, files = tree
    files["p1"].unlink()
    files["p1"].mkdir()  # unreadable as a file
    reason = RaplListener.probe(Target(), root=root)
    assert reason.startswith("cannot read") and "intel-rapl:1" in reason
    with pytest.raises(ListenerError):
        RaplListener(Target(), root=root).open()


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_probe_reports_permission(tree):
    root, files = tree
    files["p0"].chmod(0)
    assert "permission denied" in RaplListener.probe(Target(), root=root)


def test_default_root_is_sysfs():
    assert str(RaplListener.root) == "/sys/class/powercap"
    reason = RaplListener.probe(Target())
    assert reason is None or "/sys/class/powercap" in reason or "energy_uj" in reason
