"""dcgm listener: the real `dcgmi dmon` subprocess path against a stand-in replaying a fixture written from
DCGM's documented output format (no DCGM host is available to record one; see fixtures/dcgm/README.md)."""
from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings, strategies as st

from listeners.base import ListenerError, Target
from listeners.dcgm import FIELDS, DcgmListener, DmonParser, visible_gpu_ids
from standins import FIXTURES, calls, collect, use_standins

DMON = (FIXTURES / "dcgm" / "dmon_mig.txt").read_text().splitlines()


def fixture_column(entity: str, tag: str) -> list[float]:
    """Values of one tag for one entity (e.g. 'GPU-I 1'), read from the fixture by its own header."""
    out: list[float] = []
    header: list[str] = []
    for line in DMON:
        if line.startswith("#"):
            header = line.lstrip("#").split()[1:]
        elif line.startswith(entity + " "):
            cell = line.split()[2:][header.index(tag)]
            if cell != "N/A":
                out.append(float(cell))
    return out


@pytest.fixture
def argv_log(monkeypatch, tmp_path):
    return use_standins(monkeypatch, tmp_path)


def test_probe_reasons(argv_log, monkeypatch, tmp_path):
    assert DcgmListener.probe(Target(cuda_visible_devices=None)) is None
    monkeypatch.setenv("STANDIN_DCGM_NO_ENGINE", "1")
    reason = DcgmListener.probe(Target(cuda_visible_devices=None))
    assert reason and "host engine" in reason and "\n" not in reason
    monkeypatch.setenv("PATH", str(tmp_path))  # neither dcgmi nor the bindings here
    assert "DCGM not installed" in DcgmListener.probe(Target(cuda_visible_devices=None))


def test_dmon_stream_names_gpu_and_mig_instances(argv_log):
    listener = DcgmListener(Target(cuda_visible_devices=None), 0.05)
    listener.open()
    try:
        readings = collect(listener, 30)
    finally:
        listener.close()
    [argv] = [a for a in calls(argv_log) if a and a[0] == "dmon"]
    assert argv[argv.index("-e") + 1].split(",") == [str(f) for f in FIELDS]
    assert argv[argv.index("-d") + 1] == "50" and "-i" not in argv
    by_name: dict[str, list[float]] = {}
    for r in readings:
        for name, value in r.values.items():
            by_name.setdefault(name, []).append(value)
    # columns matched by tag although the fixture orders them differently from the request
    assert max(by_name["dcgm_gi1_sm_active_pct"]) == pytest.approx(100 * max(fixture_column("GPU-I 1", "SMACT")))
    assert max(by_name["dcgm_gpu0_power_w"]) == pytest.approx(max(fixture_column("GPU 0", "POWER")))
    assert max(by_name["dcgm_gpu0_pcie_rx_kibps"]) == pytest.approx(max(fixture_column("GPU 0", "PCIRX")) / 1024)
    energy = by_name["dcgm_gpu0_energy_j"]
    assert energy[0] == 0 and energy == sorted(energy) and energy[-1] > 0  # since open, in J
    assert "dcgm_gi0_power_w" not in by_name  # N/A cells are left out, not zero
    assert listener.stream.returncode is not None


def test_cuda_visible_devices_is_passed_as_gpu_ids(argv_log):
    listener = DcgmListener(Target(cuda_visible_devices="0"), 0.05)
    listener.open()
    try:
        assert collect(listener, 3)
    finally:
        listener.close()
    argv = calls(argv_log)[-1]
    assert argv[argv.index("-i") + 1] == "0"


def test_header_order_decides_and_unknown_tags_are_ignored():
    parse = DmonParser()
    assert parse("#Entity   POWER   XYZZY   SMACT", 5.0) == []
    assert parse("ID        W               ", 5.0) == []
    [reading] = parse("GPU 2    101.5   7   0.250", 5.0)
    assert reading.values == {"dcgm_gpu2_power_w": 101.5, "dcgm_gpu2_sm_active_pct": 25.0}
    parse("#Entity   SMACT   POWER", 6.0)  # a repeated header may reorder
    [reading] = parse("GPU 2    0.500   99", 6.0)
    assert reading.values == {"dcgm_gpu2_power_w": 99.0, "dcgm_gpu2_sm_active_pct": 50.0}
    assert parse("GPU 2    0.5", 6.0) is None  # short row
    assert parse("Error setting watches. Result: Insufficient permissions", 6.0) is None


def test_visible_gpu_ids():
    assert visible_gpu_ids(None) is None
    assert visible_gpu_ids("1,0") == [1, 0]
    assert visible_gpu_ids("0,GPU-abc") == [0]
    assert visible_gpu_ids("GPU-abc") is None  # UUIDs: DCGM ids unknown, watch every GPU
    assert visible_gpu_ids("") == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=5))
def test_arbitrary_lines_never_raise(lines):
    parse = DmonParser({0: 0})
    for line in ["#Entity POWER SMACT"] + lines:
        result = parse(line, 1.0)
        assert result is None or isinstance(result, list)


@pytest.fixture
def bindings(monkeypatch):
    """DCGM's Python bindings replaced by the stand-in module in tests/listeners/bindings."""
    monkeypatch.syspath_prepend(str(FIXTURES.parent / "bindings"))
    monkeypatch.delitem(sys.modules, "DcgmReader", raising=False)
    yield
    sys.modules.pop("DcgmReader", None)


def test_bindings_are_preferred_when_a_host_engine_answers(bindings, argv_log):
    listener = DcgmListener(Target(cuda_visible_devices="0"), 0.05)
    listener.open()
    try:
        readings = [r for _ in range(12) for r in listener.sample()]
    finally:
        listener.close()
    assert listener.reader is not None and not [a for a in calls(argv_log) if a and a[0] == "dmon"]
    assert listener.reader.updateFrequency == 50000 and listener.reader.gpuIds == [0]
    sm = [r.values["dcgm_gpu0_sm_active_pct"] for r in readings]
    assert max(sm) == pytest.approx(100 * max(fixture_column("GPU 0", "SMACT")))
    energy = [r.values["dcgm_gpu0_energy_j"] for r in readings]
    assert energy[0] == 0 and energy[-1] > 0
    assert all("dcgm_gpu0_nvlink_tx_kibps" in r.values for r in readings)


def test_bindings_without_host_engine_fall_back_to_dmon(bindings, argv_log, monkeypatch):
    monkeypatch.setenv("STANDIN_DCGM_NO_ENGINE", "1")  # the stand-in dcgmi then fails too
    listener = DcgmListener(Target(cuda_visible_devices=None), 0.05)
    with pytest.raises(ListenerError) as err:
        listener.open()
    listener.close()
    assert "dcgmi exited" in str(err.value) and "host engine" in str(err.value).lower()
    monkeypatch.delenv("STANDIN_DCGM_NO_ENGINE")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("STANDIN_DCGM_NO_ENGINE", "1")
    with pytest.raises(ListenerError, match="could not reach a host engine"):
        DcgmListener(Target(cuda_visible_devices=None), 0.05).open()
