"""Bad input, generated: never a traceback, always one line saying what is wrong.

Covers the sweep YAML and radT CSV readers, `--listeners` specs, and the
nvidia-smi / dcgmi output parsers (whose bad lines are dropped, never raised).
"""
import csv
import io
import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from listeners import registry
from listeners.base import Reading
from listeners.dcgm import DmonParser
from listeners.smi import RowParser, parse_gpu_list, parse_number, parse_timestamp, supported_fields, visible_gpus
from radt_ext.errors import UsageError
from tests.radt_ext.helpers import radt

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def one_line(message: str) -> bool:
    return bool(message.strip()) and "\n" not in message and "Traceback" not in message


# ----------------------------------------------------------------------------- listener specs
SPEC_TEXT = st.one_of(
    st.text(max_size=40),
    st.lists(st.tuples(st.sampled_from([*registry.LISTENERS, "bogus", "", " top", "NVML"]),
                       st.sampled_from(["", ":", ":0.1", ":0", ":-1", ":nan", ":inf", ":1e9", ":fast", ":0.001"])),
             max_size=5).map(lambda parts: ",".join(n + i for n, i in parts)),
)


@FAST
@given(SPEC_TEXT)
def test_listener_spec_parses_or_says_one_line(spec):
    try:
        selections = registry.parse_spec(spec)
    except registry.SpecError as exc:
        assert one_line(str(exc)), repr(str(exc))
        return
    if selections is not None:
        assert len({s.name for s in selections}) == len(selections)
        for s in selections:
            assert s.name in registry.LISTENERS
            assert s.interval is None or 0.001 <= s.interval <= 3600


def test_listener_spec_through_the_cli_is_one_error_line(tracking_uri):
    for spec in ("top:nan", "top:inf", "top,\ntop"):
        res = radt("run", "--listeners", spec, "--", "true")
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert len([ln for ln in lines if ln.startswith("Error:")]) == 1, res.stderr



def test_an_experiment_id_the_store_does_not_hold_is_one_line(tracking_uri, monkeypatch):
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "4242")  # e.g. left over from another store
    res = radt("run", "--listeners", "top", "--", "true")
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("Error:")] == [
        "Error: experiment '4242' (from MLFLOW_EXPERIMENT_ID) is not in this store; unset MLFLOW_EXPERIMENT_ID "
        "or pass --experiment-name"], res.stderr
    from mlflow.tracking import MlflowClient
    assert MlflowClient(tracking_uri).search_runs(["0"]) == []  # nothing recorded

# ----------------------------------------------------------------------------- nvidia-smi output
COLUMNS = ["timestamp", "index", "uuid", "power.draw", "utilization.gpu", "memory.used", "pstate",
           "clocks_event_reasons.active", "total_energy_consumption"]
SUFFIXES = {"power_w": "power.draw", "util_pct": "utilization.gpu", "mem_used_mib": "memory.used",
            "pstate_level": "pstate", "clock_reasons": "clocks_event_reasons.active",
            "energy_j": "total_energy_consumption"}
CELL = st.one_of(st.text(max_size=12), st.sampled_from(["[N/A]", "P0", "P12", "0x0000000000000004", "-1", "1e308",
                                                        "nan", "inf", "2026/11/21 21:33:07.123", "GPU-abc"]),
                 st.floats(allow_nan=True, allow_infinity=True).map(str), st.integers().map(str))


def check_readings(out):
    assert out is None or isinstance(out, list)
    for r in out or []:
        assert isinstance(r, Reading) and isinstance(r.time, float)
        for name, value in r.values.items():
            assert name == name.lower() and " " not in name and isinstance(value, float)


@FAST
@given(st.one_of(st.text(max_size=200), st.lists(CELL, min_size=0, max_size=12).map(
    lambda cells: ", ".join(cells))))
def test_smi_row_parser_drops_bad_lines(line):
    parser = RowParser(COLUMNS, SUFFIXES, ordinal={0: 0})
    check_readings(parser(line, 1.0))


@FAST
@given(st.lists(CELL, min_size=len(COLUMNS), max_size=len(COLUMNS)))
def test_smi_rows_of_the_right_width_give_finite_names(cells):
    buf = io.StringIO()
    csv.writer(buf).writerow(cells)
    out = RowParser(COLUMNS, SUFFIXES, ordinal=None)(buf.getvalue().strip("\r\n"), 1.0)
    check_readings(out)


@FAST
@given(st.text(max_size=300), st.one_of(st.none(), st.text(max_size=30)))
def test_smi_helpers_never_raise(text, visible):
    parse_number(text)
    parse_timestamp(text)
    supported_fields(text)
    gpus, migs = parse_gpu_list(text)
    assert all(isinstance(i, int) for i in [*gpus.values(), *migs.values()])
    result = visible_gpus(visible, text)
    assert result is None or all(isinstance(i, int) for i in result)


# ----------------------------------------------------------------------------- dcgmi dmon output
DMON_LINE = st.one_of(
    st.text(max_size=120),
    st.lists(st.sampled_from(["#Entity", "Entity", "POWER", "GPUTL", "SMACT", "TOTEC", "XYZ", "ID", "GPU", "GPU-I",
                              "0", "7", "-1", "N/A", "nan", "inf", "1e20", "9e15", "12.5", "٣"]),
             max_size=8).map(" ".join),
)


@FAST
@given(st.lists(DMON_LINE, max_size=8))
def test_dmon_parser_drops_bad_lines(lines):
    parser = DmonParser(gpu_names=None)
    for line in ["#Entity  POWER  GPUTL  TOTEC", *lines]:
        out = parser(line, 1.0)
        check_readings(out)
        for r in out or []:
            assert all(math.isfinite(v) for v in r.values.values())


# ----------------------------------------------------------------------------- sweep YAML and radT CSV
def plan_or_one_line(path):
    from radt_ext import sweep

    try:
        sweep.plan(path)
    except UsageError as exc:  # SpecError is a UsageError: the CLI prints it as one "Error:" line
        assert one_line(str(exc)), repr(str(exc))


YAML_VALUE = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=15),
              st.sampled_from(["exclusive", "naive", "mps", "mig", "cpu", "0", "busy", "{seconds}", "recipes/x",
                               "pool", "each", "all"])),
    lambda kids: st.one_of(st.lists(kids, max_size=3),
                           st.dictionaries(st.sampled_from(["name", "workloads", "groups", "grid", "modes", "command",
                                                            "params", "devices", "interval", "repeats", "busy",
                                                            "recipe", "random", "mps", "listeners", "x",
                                                            "device_mode", "gpus_per_variant"]),
                                           kids, max_size=4)),
    max_leaves=12)


@FAST
@given(st.one_of(YAML_VALUE.map(lambda v: yaml.safe_dump(v)), st.text(max_size=200)))
def test_sweep_yaml_plans_or_says_one_line(tracking_uri, tmp_path, text):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    plan_or_one_line(path)


HEADER = "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params"
CSV_CELL = st.one_of(st.text(max_size=10), st.sampled_from(["-", "mps", "3g.20gb", "0", "0+1", "cpu", "smi+top",
                                                            "dcgmi", "train.py", "--batch-size 8", "FINISHED", "1"]))


@FAST
@given(st.one_of(st.text(max_size=300),
                 st.lists(st.lists(CSV_CELL, min_size=7, max_size=10), max_size=4).map(
                     lambda rows: HEADER + "\n" + "\n".join(",".join(r) for r in rows))))
def test_radt_csv_plans_or_says_one_line(tracking_uri, tmp_path, text):
    path = tmp_path / "experiments.csv"
    path.write_text(text)
    plan_or_one_line(path)


def test_bad_sweep_through_the_cli_is_one_error_line(tracking_uri, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("workloads: {a: {command: 'true'}}\ngroups: [{workloads: [b]}]\n")
    res = radt("sweep", str(path))
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(lines) == 1 and lines[0].startswith("Error:") and "no workload named 'b'" in lines[0], res.stderr


@pytest.mark.parametrize("name", ["does-not-exist.yaml", "does-not-exist.csv"])
def test_missing_sweep_file_is_one_line(tracking_uri, tmp_path, name):
    res = radt("sweep", str(tmp_path / name))
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stderr.count("Error") == 1, res.stderr
