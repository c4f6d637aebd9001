"""smi listener: the real nvidia-smi subprocess path against a stand-in that replays recorded output."""
from __future__ import annotations

import csv
import os
import shutil
import time

import pytest
from hypothesis import given, settings, strategies as st

from listeners import smi
from listeners.base import ListenerError, Target
from listeners.smi import (RowParser, SmiListener, choose_fields, parse_gpu_list, parse_number,
                           parse_timestamp, supported_fields, visible_gpus)
from standins import calls, collect, smi_fixture_dir, use_standins

FIXTURE = smi_fixture_dir()
RECORDED = (FIXTURE / "fields.txt").read_text().strip().split(",")
ROWS = [r for r in csv.reader((FIXTURE / "lms100.csv").read_text().splitlines(), skipinitialspace=True)
        if len(r) == len(RECORDED)]


def recorded_column(field: str) -> list[float]:
    at = RECORDED.index(field)
    return [v for v in (parse_number(r[at]) for r in ROWS) if v is not None]


@pytest.fixture
def argv_log(monkeypatch, tmp_path):
    return use_standins(monkeypatch, tmp_path)


def open_listener(target: Target, interval: float = 0.05) -> SmiListener:
    listener = SmiListener(target, interval)
    listener.open()
    return listener


def test_probe_reports_missing_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    reason = SmiListener.probe(Target(cuda_visible_devices=None))
    assert reason and "nvidia-smi not found" in reason


def test_probe_accepts_the_standin_and_rejects_an_empty_device_list(argv_log):
    assert SmiListener.probe(Target(cuda_visible_devices=None)) is None
    reason = SmiListener.probe(Target(cuda_visible_devices=""))
    assert reason and "CUDA_VISIBLE_DEVICES" in reason


def test_stream_reads_recorded_rows_with_their_own_times(argv_log):
    listener = open_listener(Target(cuda_visible_devices=None))
    try:
        started = time.time()
        readings = collect(listener, 8)
    finally:
        listener.close()
    assert len(readings) >= 8
    # one long-lived process, asked for csv without header/units at the requested interval
    query = [a for a in calls(argv_log) if any(x.startswith("--query-gpu=") for x in a)]
    assert len(query) == 1
    assert "--format=csv,noheader,nounits" in query[0] and query[0][query[0].index("-lms") + 1] == "50"
    asked = next(x for x in query[0] if x.startswith("--query-gpu=")).split("=", 1)[1].split(",")
    assert set(asked) <= supported_fields((FIXTURE / "help_query_gpu.txt").read_text())
    # the reading time is nvidia-smi's timestamp column (ms resolution, local time), not our receive time
    for r in readings:
        assert abs(r.time - started) < 10
        assert abs(r.time * 1000 - round(r.time * 1000)) < 0.01  # ms resolution: nvidia-smi's column
    power = {r.values["smi_gpu0_power_w"] for r in readings if "smi_gpu0_power_w" in r.values}
    assert power and power <= set(recorded_column("power.draw"))
    names = set().union(*(r.values for r in readings))
    assert {"smi_gpu0_util_pct", "smi_gpu0_mem_used_mib", "smi_gpu0_temp_c", "smi_gpu0_sm_clock_mhz"} <= names
    assert not any(n.startswith("gpu") for n in names)  # never collides with the nvml listener
    assert listener.stream.returncode is not None  # reaped


def test_cuda_visible_devices_selects_and_renumbers(argv_log, monkeypatch):
    monkeypatch.setenv("STANDIN_SMI_GPUS", "2")
    uuid1 = parse_gpu_list(__import__("subprocess").run(["nvidia-smi", "-L"], capture_output=True,
                                                         text=True).stdout)[0]
    uuid_of_1 = next(u for u, i in uuid1.items() if i == 1)
    for visible in ("1", uuid_of_1, uuid_of_1[:-1]):
        listener = open_listener(Target(cuda_visible_devices=visible))
        try:
            readings = collect(listener, 3)
            tags = listener.tags()
        finally:
            listener.close()
        argv = calls(argv_log)[-1]
        assert argv[argv.index("-i") + 1] == "1"
        names = set().union(*(r.values for r in readings))
        assert names and all(n.startswith("smi_gpu0_") for n in names)  # the workload's cuda:0
        assert tags["smi.gpu0.uuid"] == uuid_of_1


def test_both_gpus_when_nothing_is_hidden(argv_log, monkeypatch):
    monkeypatch.setenv("STANDIN_SMI_GPUS", "2")
    listener = open_listener(Target(cuda_visible_devices=None))
    try:
        names = set().union(*(r.values for r in collect(listener, 6)))
    finally:
        listener.close()
    assert "-i" not in calls(argv_log)[-1]
    assert "smi_gpu0_power_w" in names and "smi_gpu1_power_w" in names


def test_a_dying_tool_is_one_line_listener_error(argv_log, monkeypatch):
    monkeypatch.setenv("STANDIN_EXIT_AFTER", "2")
    listener = open_listener(Target(cuda_visible_devices=None))
    try:
        deadline = time.time() + 10
        with pytest.raises(ListenerError) as err:
            while time.time() < deadline:
                listener.sample()
                time.sleep(0.05)
    finally:
        listener.close()
    message = str(err.value)
    assert "nvidia-smi exited with code 15" in message and "GPU is lost" in message and "\n" not in message


def test_a_rejected_query_fails_at_open(argv_log, monkeypatch, tmp_path):
    broken = tmp_path / "smi"
    shutil.copytree(FIXTURE, broken)
    # the help lists a field that the (stand-in) driver then refuses to query
    (broken / "help_query_gpu.txt").write_text((FIXTURE / "help_query_gpu.txt").read_text()
                                               + '\n"power.draw.instant"\nInstant power.\n')
    (broken / "fields.txt").write_text(",".join(f for f in RECORDED if f != "power.draw.instant"))
    monkeypatch.setenv("STANDIN_SMI_DIR", str(broken))
    listener = SmiListener(Target(cuda_visible_devices=None), 0.05)
    with pytest.raises(ListenerError, match="not a valid field"):
        listener.open()
    listener.close()
    assert listener.stream.returncode == 2


def test_close_kills_a_tool_that_ignores_sigterm(argv_log, monkeypatch):
    monkeypatch.setenv("STANDIN_IGNORE_TERM", "1")
    listener = open_listener(Target(cuda_visible_devices=None), interval=0.2)
    collect(listener, 1)
    listener.stream.stop(timeout=0.5)
    assert listener.stream.returncode == -9  # SIGKILL ended it after SIGTERM was ignored


def test_the_listener_close_waits_for_the_tool_no_longer_than_its_grace(argv_log, monkeypatch):
    """The run's end waits for the listeners' closes: a tool slow to leave on SIGTERM is killed after the
    grace, its process reaped (no zombie) and its last readings already taken."""
    monkeypatch.setenv("STANDIN_IGNORE_TERM", "1")
    listener = open_listener(Target(cuda_visible_devices=None), interval=0.2)
    assert collect(listener, 1)
    pid = listener.stream._proc.pid
    t0 = time.monotonic()
    listener.close()
    assert time.monotonic() - t0 < smi.EXIT_GRACE_S + 1.0
    assert listener.stream.returncode == -9
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped


def test_field_choice_follows_the_help_text():
    help_text = '"timestamp"\nx\n"clocks_throttle_reasons.active"\ny\n"power.draw"\nz\n'
    chosen = choose_fields(supported_fields(help_text))
    assert chosen == {"power_w": "power.draw", "clock_reasons": "clocks_throttle_reasons.active"}


def test_row_values_missing_markers_and_reason_bits():
    columns = ["timestamp", "index", "uuid", "power.draw", "temperature.memory",
               "clocks_event_reasons.active", "pstate"]
    parse = RowParser(columns, {"power_w": "power.draw", "mem_temp_c": "temperature.memory",
                                "clock_reasons": "clocks_event_reasons.active", "pstate_level": "pstate"}, None)
    [reading] = parse("2026/01/02 03:04:05.678, 0, GPU-x, [N/A], [Not Supported], 0x0000000000000044, P2", 1.0)
    assert reading.values == {"smi_gpu0_throttle_power_bool": 1.0, "smi_gpu0_throttle_thermal_bool": 1.0,
                              "smi_gpu0_throttle_hw_bool": 0.0, "smi_gpu0_clocks_idle_bool": 0.0,
                              "smi_gpu0_pstate_level": 2.0}
    assert reading.time != 1.0  # the timestamp column, not the receive time
    assert parse("2026/01/02 03:04:05.678, 0, GPU-x", 1.0) is None  # wrong column count


def test_timestamps_read_as_local_time_to_the_millisecond():
    from datetime import datetime

    for text in ("2026/11/21 21:33:07.123", "2026/11/21 21:33:59.999", "2026/11/21 21:34:00.000",
                 "2026/01/02 03:04:05", " 2026/12/31 23:59:59.5 "):
        fmt = "%Y/%m/%d %H:%M:%S.%f" if "." in text else "%Y/%m/%d %H:%M:%S"
        assert parse_timestamp(text) == pytest.approx(datetime.strptime(text.strip(), fmt).timestamp(), abs=1e-6)
    for text in ("", "garbage", "2026/11/21 21:33:61.0", "2026/13/21 21:33:07.1"):
        assert parse_timestamp(text) is None, text


def test_a_quoted_cell_is_read_as_csv():
    columns = ["timestamp", "index", "name", "power.draw"]
    parse = RowParser(columns, {"power_w": "power.draw"}, None)
    [reading] = parse('2026/01/02 03:04:05.678, 0, "GPU, with a comma", 71.5', 1.0)
    assert reading.values == {"smi_gpu0_power_w": 71.5}


def test_visible_gpus_follows_cuda_rules():
    listing = ("GPU 0: A (UUID: GPU-aaaa)\nGPU 1: B (UUID: GPU-bbbb)\n"
               "  MIG 1g.10gb Device 0: (UUID: MIG-cccc)\n")
    assert visible_gpus(None, listing) is None
    assert visible_gpus("1,0", listing) == [1, 0]
    assert visible_gpus("GPU-bb", listing) == [1]
    assert visible_gpus("MIG-cccc", listing) == [1]
    assert visible_gpus("0,7,1", listing) == [0]  # CUDA stops at the first invalid entry
    assert visible_gpus("", listing) == []


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_lines_never_raise(line):
    parse = RowParser(RECORDED, choose_fields(set(RECORDED)), {0: 0})
    result = parse(line, 1.0)
    assert result is None or isinstance(result, list)
    supported_fields(line)
    parse_gpu_list(line)
    visible_gpus(line, line)


def test_the_whole_recorded_stream_parses():
    """Every line nvidia-smi wrote (idle, bf16 matmul load, idle) becomes one reading at its own time."""
    chosen = choose_fields(supported_fields((FIXTURE / "help_query_gpu.txt").read_text()))
    parse = RowParser(RECORDED, {s: f for s, f in chosen.items() if f in RECORDED}, None)
    lines = (FIXTURE / "lms100.csv").read_text().splitlines()
    readings = [r for line in lines for r in (parse(line, 0.0) or [])]
    assert len(readings) == len(ROWS) == len(lines)
    times = [r.time for r in readings]
    assert times == sorted(times) and 0.05 < (times[-1] - times[0]) / (len(times) - 1) < 0.2  # -lms 100
    power = [r.values["smi_gpu0_power_w"] for r in readings]
    util = [r.values["smi_gpu0_util_pct"] for r in readings]
    assert power == recorded_column("power.draw") and util == recorded_column("utilization.gpu")
    busy = [r.values for r in readings if r.values["smi_gpu0_util_pct"] >= 90]
    idle = [r.values for r in readings if r.values["smi_gpu0_util_pct"] == 0]
    assert busy and idle
    mean = lambda vs: sum(v["smi_gpu0_power_w"] for v in vs) / len(vs)  # power.draw is a 1 s average: it lags
    assert mean(busy) > 2 * mean(idle)
    masks = [int(r[RECORDED.index(chosen["clock_reasons"])], 16) for r in ROWS]
    assert [r.values["smi_gpu0_throttle_power_bool"] for r in readings] == [float(bool(m & 0x84)) for m in masks]
    assert [r.values["smi_gpu0_clocks_idle_bool"] for r in readings] == [float(bool(m & 0x1)) for m in masks]
