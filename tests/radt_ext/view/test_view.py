"""radt-ext's comparison view: MLflow's format (checked against the UI bundle the installed MLflow ships),
the view radt-ext writes into a real SQLite store, the link the commands print, and `radt-ext ui`.
The browser side (the link opens the view, the table and charts draw) is tests/radt_ext/test_mlflow_ui.py."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
import zlib
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from radt_ext.view import content, write
from radt_ext.view import mlflow_format as fmt
from tests.radt_ext.collocation.support import WORKLOAD
from tests.radt_ext.helpers import radt
from tests.servers import free_port, mlflow_sqlite_server  # noqa: F401  (fixture)

LINK = re.compile(r"radt-ext: comparison view[^:]*: (\S+)")


def _bundle() -> str:
    build = Path(mlflow.__file__).parent / "server" / "js" / "build" / "static" / "js"
    files = sorted(build.glob("*.js"))
    if not files:
        pytest.skip("this MLflow ships no UI bundle (mlflow-skinny)")
    return "".join(f.read_text(errors="replace") for f in files)


def test_the_format_is_what_the_installed_mlflow_ui_writes_and_reads():
    """The names, the envelope, the compression and the shared fields, as MLflow's own UI code has them:
    a newer MLflow that changes one fails here first (and its version is then not a tested one)."""
    js = _bundle()
    assert fmt.tested(mlflow.__version__), mlflow.__version__
    assert f'="{fmt.TAG_PREFIX}"' in js and f'="{fmt.URL_PARAM}"' in js
    assert f'"{fmt.COMPRESSED_PREFIX}"' in js  # textCompressDeflate's prefix
    assert "JSON.stringify({name:e,createdAt:i,updatedAt:a,state:t})" in js  # the saved view's envelope
    assert "o.length>2e4" in js and fmt.MAX_VALUE_CHARS == 20_000  # the UI refuses a longer one
    assert json.dumps(list(fmt.NOT_SHARED), separators=(",", ":")) in js  # left out when shared and opened
    ui_fields = re.search(r'HC:\(\)=>a.*?const a=(\["selectedColumns".*?\])', js).group(1)
    state = content.state(["bs"])
    assert set(state) - set(json.loads(ui_fields)) == set(fmt.facets())  # every other field is a UI one
    assert 'DATE:"attributes.start_time"' in js and '(e,t)=>e+".`"+t+"`"' in js  # sort key, column key
    assert 'this.type=c.SCATTER,this.xaxis={key:"",type:"METRIC"}' in js
    assert 'e.TIME_RELATIVE="time-relative"' in js
    assert f'.get("{fmt.WORKFLOW_PARAM}")' in js and f'MACHINE_LEARNING="{fmt.TRAINING_WORKFLOW}"' in js


def test_value_round_trip_compressed_as_the_ui_writes_it():
    state = content.state(["bs", "lr"])
    value = fmt.encode(content.NAME, state, 1000, 2000)
    envelope = json.loads(value)
    assert envelope["name"] == "radt-ext comparison" and envelope["createdAt"] == 1000
    assert envelope["state"].startswith("deflate;")
    import base64
    inflated = json.loads(zlib.decompress(base64.b64decode(envelope["state"][len("deflate;"):])))
    assert inflated == state
    assert fmt.decode(value) == ("radt-ext comparison", 1000, state)
    # the bare state an older share wrote, plain or compressed, reads too (3.17 reads both)
    assert fmt.decode(json.dumps(state)) == (None, None, state)
    assert fmt.decode(fmt.compress(json.dumps(state))) == (None, None, state)
    with pytest.raises(ValueError):
        fmt.decode("not json")


def test_the_view_shows_the_comparison_columns_sorted_by_radt_exts_order():
    state = content.state(["bs"])
    cols = state["selectedColumns"]
    for metric in ("throughput_samples_per_s", "energy_per_sample_j", "gpu_total_energy_j", "gpu_total_avg_power_w",
                   "gpu_mean_avg_sm_active_pct", "gpu_mean_avg_tensor_active_pct", "slowdown_ratio", "startup_s"):
        assert f"metrics.`summary/{metric}`" in cols, metric
    for tag in ("collocation.mode", "variant", "recipe", "collocation.gpu", "machine.gpu.0.name", "sweep.param.bs"):
        assert f"tags.`{tag}`" in cols, tag
    assert content.params_of(state) == ["bs"]
    assert state["orderByKey"] == "tags.`radt_ext.view_order`" and state["orderByAsc"] is True
    kinds = {c["type"]: c for c in state["compareRunCharts"]}
    assert set(kinds) == {"BAR", "SCATTER", "LINE"}
    assert kinds["LINE"]["selectedMetricKeys"] == ["system/gpu0_power_w"]
    assert kinds["SCATTER"]["yaxis"] == {"key": "summary/gpu_total_energy_j", "type": "METRIC"}
    assert {c["metricSectionId"] for c in state["compareRunCharts"]} == {state["compareRunSections"][0]["uuid"]}


def test_the_work_figures_come_first_and_no_parameter_shows_twice():
    state = content.state(["bs", "lr", "system.cpus"])
    cols = state["selectedColumns"]
    assert state["columnOrder"] == cols and len(cols) == len(set(cols))
    work = [f"metrics.`summary/{m}`" for m in ("throughput_samples_per_s", "energy_per_sample_j",
                                               "energy_per_sample_attributed_j", "epoch_time_s", "epoch_energy_j",
                                               "slowdown_ratio")]
    assert cols[:len(work)] == work  # before every tag and parameter column
    assert cols[len(work)] == "tags.`collocation.mode`"
    assert [c for c in cols if "bs" in c] == ["tags.`sweep.param.bs`"]  # once: no params.`bs` beside it
    assert not [c for c in cols if c.startswith("params.")]
    # the other figures follow the tags and parameters
    assert cols.index("tags.`sweep.param.lr`") < cols.index("metrics.`summary/gpu_total_energy_j`")
    assert content.params_of(state) == ["bs", "lr", "system.cpus"]


def test_a_view_written_before_is_read_and_brought_to_the_new_layout(tracking_uri):
    """An older view showed each parameter as params.`bs` and tags.`sweep.param.bs`: its parameters are
    kept, and the next refresh writes them once, after the work figures."""
    older = dict(content.state(["bs"]))
    older["selectedColumns"] = ["tags.`collocation.mode`", "params.`bs`", "tags.`sweep.param.bs`",
                                "metrics.`summary/throughput_samples_per_s`"]
    assert content.params_of(older) == ["bs"]
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment("older")
    client.set_experiment_tag(experiment_id, write.TAG, fmt.encode(content.NAME, older, 1000, 1000))
    assert write.refresh(client, experiment_id) is True
    assert fmt.decode(client.get_experiment(experiment_id).tags[write.TAG])[2] == content.state(["bs"])


def test_order_puts_each_parent_right_before_its_children_and_modes_together():
    keys = {
        "mps parent": content.order_key("mps", "a+b", "p2"),
        "mps child 1": content.order_key("mps", "a+b", "p2", 1),
        "mps child 0": content.order_key("mps", "a+b", "p2", 0),
        "exclusive a": content.order_key("exclusive", "a", "p1"),
        "exclusive a child": content.order_key("exclusive", "a", "p1", 0),
        "exclusive b": content.order_key("exclusive", "b", "p3"),
        "exclusive b child": content.order_key("exclusive", "b", "p3", 0),
    }
    assert sorted(keys, key=keys.get) == ["exclusive a", "exclusive a child", "exclusive b", "exclusive b child",
                                          "mps parent", "mps child 0", "mps child 1"]
    assert content.order_key(None, None, "1.5") == "run / - / 1.5"


def test_refresh_writes_once_adds_parameters_and_keeps_its_creation_time(tracking_uri):
    client = MlflowClient(tracking_uri)
    experiment_id = client.create_experiment("v")
    assert write.refresh(client, experiment_id, ["bs"]) is True
    first = client.get_experiment(experiment_id).tags[write.TAG]
    assert len(first) <= fmt.MAX_VALUE_CHARS
    assert write.refresh(client, experiment_id) is False  # nothing new: not written again
    assert write.refresh(client, experiment_id, ["bs"]) is False
    assert write.refresh(client, experiment_id, ["lr"]) is True  # parameters are only ever added
    name, created, state = fmt.decode(client.get_experiment(experiment_id).tags[write.TAG])
    assert content.params_of(state) == ["bs", "lr"]
    assert created == json.loads(first)["createdAt"]
    client.set_experiment_tag(experiment_id, write.TAG, "damaged")
    assert write.refresh(client, experiment_id) is True
    assert fmt.decode(client.get_experiment(experiment_id).tags[write.TAG])[2] == content.state()


def test_link_is_the_servers_address_or_mlflow_uis_default():
    assert write.link("http://mlflow.example:8080/", "7") == (
        "http://mlflow.example:8080/#/experiments/7/runs?workflowType=machine_learning&viewStateShareKey=radt-ext")
    assert write.link("sqlite:///mlflow.db", "7").startswith("http://127.0.0.1:5000/#/experiments/7/runs?")
    assert "after `radt-ext ui`" in write.link_line("sqlite:///mlflow.db", "7")
    assert write.version_note("3.17.2") is None and "untested" in write.version_note("9.1.0")


def _tag_and_link(uri: str, stderr: str, experiment: str):
    found = LINK.findall(stderr)
    assert found, stderr[-2000:]
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(experiment)
    assert found[-1].endswith(f"/#/experiments/{exp.experiment_id}/runs?workflowType=machine_learning"
                              "&viewStateShareKey=radt-ext"), found
    return client, exp


def test_run_and_collocate_print_the_link_and_order_their_runs(tracking_uri):
    done = radt("run", "--listeners", "top", "--experiment-name", "v", "--tag", "variant=amp", "--",
                sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    client, exp = _tag_and_link(tracking_uri, done.stderr, "v")
    assert fmt.decode(exp.tags[write.TAG])[2] == content.state()
    run = client.search_runs([exp.experiment_id])[0]
    assert run.data.tags[content.ORDER_TAG].startswith("run / amp / ")
    cmd = f"{sys.executable} {WORKLOAD} --seconds 0.2"
    done = radt("collocate", "--device", "cpu", "--experiment-name", "g", "--name", "a", "--name", "b",
                "-w", cmd, "-w", cmd)
    assert done.returncode == 0, done.stderr
    client, exp = _tag_and_link(tracking_uri, done.stderr, "g")
    runs = client.search_runs([exp.experiment_id], order_by=[f"tags.`{content.ORDER_TAG}` ASC"])
    assert [r.info.run_name for r in runs] == ["naive:a+b", "a", "b"]  # as the view sorts them


def test_sweep_adds_its_parameters_to_the_view_and_prints_the_link(tmp_path, tracking_uri):
    spec = tmp_path / "s.yaml"
    spec.write_text(textwrap.dedent(f"""
        name: cpu
        experiment: cpu-sweep
        devices: [cpu]
        interval: 0.1
        workloads:
          toy: {{command: "{sys.executable} {WORKLOAD} --seconds 0.2 --batch-size {{bs}}", params: {{bs: 8}}}}
        groups:
          - {{workloads: [toy], modes: [exclusive]}}
        grid: {{bs: [8]}}
    """))
    done = radt("sweep", str(spec), timeout=300)
    assert done.returncode == 0, done.stderr
    client, exp = _tag_and_link(tracking_uri, done.stderr, "cpu-sweep")
    state = fmt.decode(exp.tags[write.TAG])[2]
    assert content.params_of(state) == ["bs"]
    assert "tags.`sweep.param.bs`" in state["selectedColumns"]
    # every run of the sweep carries the parameter, the workload's run as well as its group's: one column
    runs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("sweep.role") is None]
    assert len(runs) == 2 and all(r.data.tags["sweep.param.bs"] == "8" for r in runs)


def _read_until(proc, pattern: re.Pattern, timeout: float) -> list[str]:
    lines, deadline = [], time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if pattern.search(line):
            return lines
    raise AssertionError("".join(lines) or "no output")


def test_ui_serves_the_store_in_use_and_prints_each_view(tracking_uri):
    done = radt("run", "--listeners", "top", "--experiment-name", "v", "--", sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "radt_ext.cli", "ui", "--port", str(port)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        lines = _read_until(proc, LINK, 180)
        link = LINK.search(lines[-1]).group(1)
        experiment_id = MlflowClient(tracking_uri).get_experiment_by_name("v").experiment_id
        assert link == (f"http://127.0.0.1:{port}/#/experiments/{experiment_id}/runs?"
                        "workflowType=machine_learning&viewStateShareKey=radt-ext")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ajax-api/2.0/mlflow/experiments/get?"
                                    f"experiment_id={experiment_id}", timeout=30) as answer:
            tags = {t["key"]: t["value"] for t in json.load(answer)["experiment"]["tags"]}
        assert fmt.decode(tags[write.TAG])[0] == "radt-ext comparison"  # what the UI reads, served
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(60)
    assert code == 0


def test_ui_on_a_tracking_server_prints_the_links_on_its_address(mlflow_sqlite_server, monkeypatch):  # noqa: F811
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_sqlite_server.url)
    done = radt("run", "--listeners", "top", "--experiment-name", "v", "--", sys.executable, "-c", "pass")
    assert done.returncode == 0, done.stderr
    assert f"comparison view: {mlflow_sqlite_server.url}/#/experiments/" in done.stderr
    shown = radt("ui")
    assert shown.returncode == 0, shown.stderr
    assert "is a tracking server" in shown.stderr
    assert LINK.search(shown.stdout).group(1).startswith(f"{mlflow_sqlite_server.url}/#/experiments/")


def test_ui_on_a_port_in_use_is_one_line(tracking_uri):
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = radt("ui", "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Error: port ") and "pass --port" in done.stderr
