"""Bad input stops a sweep with one line before any run (real CLI, real SQLite store), and resume
matches a FINISHED run only in the variant's own experiment."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest
from mlflow.tracking import MlflowClient

from radt_ext import sweep
from radt_ext.sweep.spec import SpecError
from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import radt

TRACE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "listeners", "traces", "h200_matmul.json")
HEADER = "Experiment,Workload,Status,Run,Devices,Collocation,File,Listeners,Params"


def runs(uri):
    if not os.path.exists(uri[len("sqlite:///"):]):
        return []
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def one_error_line(done, *parts):
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("Error: ")
    for part in parts:
        assert part in lines[-1], lines[-1]


def test_a_workload_defined_twice_in_yaml_is_refused_not_dropped(tmp_path, tracking_uri):
    path = tmp_path / "dup.yaml"
    path.write_text(textwrap.dedent(f"""
        devices: [cpu]
        workloads:
          a: {{command: "{sys.executable} {WORKLOAD} --seconds 0.2"}}
          a: {{command: "{sys.executable} {WORKLOAD} --seconds 0.3"}}
    """))
    with pytest.raises(SpecError) as err:
        sweep.plan(path)
    assert "line 5" in str(err.value) and "'a'" in str(err.value) and "twice" in str(err.value)
    one_error_line(radt("sweep", str(path)), "dup.yaml: line 5", "'a'")
    assert runs(tracking_uri) == []


@pytest.mark.parametrize("extra, words", [
    ({"devices": ["cpu", "cpu"]}, "twice"),
    ({"groups": [["t"], ["t"]]}, "twice"),
    ({"groups": [{"workloads": ["t"], "name": "x"}, {"workloads": ["t"], "name": "y"}]}, "same"),
    ({"grid": {"unused": [1, 2]}}, "unused"),  # a param no command uses: both variants run the same thing
])
def test_variants_that_would_run_the_same_thing_twice_are_refused(extra, words):
    data = {"devices": ["cpu"], "workloads": {"t": {"command": "python x.py --bs {bs}",
                                                     "params": {"bs": 1, "unused": 0}}}, **extra}
    with pytest.raises(SpecError) as err:
        sweep.plan_from_dict(data, source="s.yaml")
    assert str(err.value).startswith("s.yaml: ") and words in str(err.value) and "\n" not in str(err.value)


def test_random_draws_that_repeat_a_setting_run_once():
    data = {"devices": ["cpu"], "workloads": {"t": {"command": "run {k}", "params": {"k": "a"}}},
            "random": {"samples": 5, "seed": 0, "params": {"k": {"choice": ["a"]}}}}
    assert [v.setting for v in sweep.plan_from_dict(data)] == [{"k": "a"}]


def test_a_gpu_index_that_does_not_exist_stops_before_any_run(tmp_path, tracking_uri):
    path = tmp_path / "dev.yaml"
    path.write_text(textwrap.dedent(f"""
        interval: 0.1
        listeners: nvml:0.1
        child_listeners: top
        devices: ["0", "7"]
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds 0.2"}}
    """))
    done = radt("sweep", str(path), env={"RADT_EXT_NVML_REPLAY": TRACE})  # a machine with one GPU
    one_error_line(done, "devices", "'7'", "no GPU with index 7")
    assert runs(tracking_uri) == []  # not the device-0 variant either


def test_a_list_command_keeps_each_value_one_word():
    data = {"devices": ["cpu"], "workloads": {"t": {"command": ["echo", "{msg}", "--tag={tag}"],
                                                     "params": {"msg": "a b", "tag": "it's"}}}}
    (v,) = sweep.plan_from_dict(data)
    assert v.workloads[0].command == ["echo", "a b", "--tag=it's"]


@pytest.mark.parametrize("name, data", [("bad.yaml", b"name: \xff\xfe\n"), ("bad.csv", HEADER.encode() + b"\n\xff,1\n")])
def test_a_file_that_is_not_utf8_is_one_line(tmp_path, tracking_uri, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    one_error_line(radt("sweep", str(path)), name, "UTF-8")


def test_a_csv_without_rows_is_one_line(tmp_path, tracking_uri):
    path = tmp_path / "empty.csv"
    path.write_text(HEADER + "\n")
    one_error_line(radt("sweep", str(path)), "empty.csv", "no rows")
    assert runs(tracking_uri) == []


@pytest.mark.parametrize("names, words", [(("a", "a"), "row 3: column Name: 'a' is used twice"),
                                          (("a/b", "c"), "row 2: column Name: 'a/b'")])
def test_csv_names_are_checked_before_any_run(tmp_path, tracking_uri, names, words):
    path = tmp_path / "names.csv"
    path.write_text(f"{HEADER},Name\n" + "".join(
        f"1,1,,,cpu,-,{WORKLOAD},top,--seconds 0.2 --batch-size {8 * (i + 1)},{n}\n" for i, n in enumerate(names)))
    one_error_line(radt("sweep", str(path)), "names.csv", words)
    assert runs(tracking_uri) == []


def test_resume_matches_finished_runs_only_in_the_variants_own_experiment(tmp_path, tracking_uri):
    path = tmp_path / "x.csv"
    row = f"{{}},1,,,cpu,-,{WORKLOAD},top,--seconds 0.2\n"
    path.write_text(HEADER + "\n" + row.format("alpha"))
    assert [o.status for o in sweep.run(sweep.plan(path))] == ["FINISHED"]
    path.write_text(HEADER + "\n" + row.format("alpha") + row.format("beta"))  # the same job, a new experiment
    outcomes = sweep.run(sweep.plan(path))
    assert [(o.variant.experiment, o.status) for o in outcomes] == [("alpha", "SKIPPED"), ("beta", "FINISHED")]
    client = MlflowClient(tracking_uri)
    beta = client.get_experiment_by_name("beta").experiment_id
    assert client.get_run(outcomes[1].run_id).info.experiment_id == beta


def test_a_csv_job_repeated_under_another_workload_id_is_not_skipped_on_resume(tmp_path, tracking_uri):
    path = tmp_path / "rep.csv"
    row = f"1,{{}},,,cpu,-,{WORKLOAD},top,--seconds 0.2\n"
    path.write_text(HEADER + "\n" + row.format(1))
    assert [o.status for o in sweep.run(sweep.plan(path))] == ["FINISHED"]
    path.write_text(HEADER + "\n" + row.format(1) + row.format(2))  # radT's way to repeat a job
    outcomes = sweep.run(sweep.plan(path))
    assert [(o.variant.label, o.status) for o in outcomes] == [("workload-1", "SKIPPED"), ("workload-2", "FINISHED")]


def test_an_empty_experiment_name_is_one_line(tmp_path, tracking_uri):
    path = tmp_path / "e.yaml"
    path.write_text(f'experiment: ""\ndevices: [cpu]\nworkloads:\n  t: {{command: "{sys.executable} -c pass"}}\n')
    one_error_line(radt("sweep", str(path)), "e.yaml: experiment")
    assert runs(tracking_uri) == []
