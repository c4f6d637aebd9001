"""`radt-ext ops` end to end in a real SQLite store: runs made only for good input, one line for bad input."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from mlflow.tracking import MlflowClient

from radt_ext.cli import main
from radt_ext.ops import dataset as ds, store

SLICE = Path(__file__).with_name("data") / "slice.csv.gz"


def cli(*args):
    return CliRunner().invoke(main, ["ops", *args], catch_exceptions=False)


def _one_line(result) -> str:
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.strip().splitlines() if ln.startswith("Error:")]
    assert len(lines) == 1, result.output
    return lines[0]


def _profile_runs(uri) -> list:
    client = MlflowClient(uri)
    exps = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(exps, filter_string=f"tags.`{store.TAG}` = 'profile'", run_view_type=3)


def test_profile_on_the_cpu_logs_one_run(tracking_uri, tmp_path):
    r = cli("profile", "mlp", "--device", "cpu", "--batch", "2", "--mode", "inference", "--window-s", "0.002",
            "--net-window-s", "0.002", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    assert "energy unavailable: profiled on the CPU" in r.output
    assert "the host issues a step in" in r.output and "sets the pace" not in r.output  # no GPU to wait on
    runs = _profile_runs(tracking_uri)
    assert len(runs) == 1 and runs[0].data.params["gpu_name"] == "cpu"
    assert (tmp_path / "mlp_b2_fp32_inference.csv").is_file()


def test_profile_of_a_users_module_with_its_own_inputs(tracking_uri, tmp_path):
    r = cli("profile", "tests.radt_ext.ops.modules:TokensAndMask", "--device", "cpu", "--batch", "2", "--mode",
            "inference", "--window-s", "0.002", "--net-window-s", "0.002", "--out", str(tmp_path))
    assert r.exit_code == 0, r.output
    prof = store.read(tmp_path / "tests.radt_ext.ops.modules.TokensAndMask_b2_fp32_inference.csv")
    assert "Embedding" in set(prof.table.op) and prof.meta["model"] == "tests.radt_ext.ops.modules:TokensAndMask"
    assert len(_profile_runs(tracking_uri)) == 1


@pytest.mark.parametrize("args, message", [
    (["nosuch"], "unknown model 'nosuch'"),
    (["tests.radt_ext.ops.modules:TwoLayer"], "give its inputs with an example_inputs(batch) method"),
    (["mlp", "--precision", "int3"], "unknown precision 'int3'"),
    (["mlp", "--mode", "serving"], "unknown mode 'serving'"),
    (["tests.radt_ext.ops.modules:TwoLayer", "--input-shape", "5"], "does not run on these inputs"),
    (["tests.radt_ext.ops.modules:TwoLayer", "--input-shape", "x"], "is not a list of integers"),
])
def test_bad_profile_input_is_one_line_and_no_run(tracking_uri, args, message):
    line = _one_line(cli("profile", *args, "--device", "cpu", "--batch", "2", "--window-s", "0.002",
                         "--net-window-s", "0.002"))
    assert message in line
    assert _profile_runs(tracking_uri) == []


@pytest.fixture
def profile_files(tmp_path):
    """Two profiles of the slice (vit bf16 training on the H100 and on the H200) as the grid writes them."""
    data = ds.load(SLICE)
    for gpu in ("H100", "H200"):
        rows = data[(data.gpu == gpu) & (data.model == "vit") & (data.precision == "bf16") & (data["mode"] == "training")]
        prof = ds.to_profile(rows)
        prof.meta["gpu_name"] = rows.gpu_name.iloc[0]
        folder = tmp_path / gpu
        folder.mkdir()
        store.write(folder, "vit_training", prof)
    return tmp_path


def test_best_gpu_ranks_measured_and_predicted(profile_files):
    r = cli("best-gpu", str(profile_files / "H100" / "vit_training.csv"), "--dataset", str(SLICE), "--by", "edp")
    assert r.exit_code == 0, r.output
    assert "profiled on H100; by edp" in r.output
    assert "measured" in r.output and "predicted" in r.output and "H200" in r.output
    assert "intervals: the profile's measured spread" in r.output and "–" in r.output  # value (low–high)


def test_best_gpu_bad_input_is_one_line(profile_files, tmp_path):
    cpu = tmp_path / "cpu"
    cpu.mkdir()
    prof = store.read(profile_files / "H100" / "vit_training.csv")
    prof.meta["gpu_name"] = "cpu"
    store.write(cpu, "p", prof)
    assert "unknown GPU 'cpu'" in _one_line(cli("best-gpu", str(cpu / "p.csv"), "--dataset", str(SLICE)))
    line = _one_line(cli("best-gpu", str(profile_files / "H100" / "vit_training.csv"), "--dataset", str(SLICE),
                         "--gpus", "A100"))
    assert "A100, which the dataset has no profiles from" in line
    assert "no dataset at" in _one_line(cli("check", "--dataset", str(tmp_path / "none.csv.gz")))


def test_ingest_then_dataset_from_mlflow(tracking_uri, profile_files, tmp_path):
    r = cli("ingest", str(profile_files / "H100"), str(profile_files / "H200"), "--experiment-name", "ops")
    assert r.exit_code == 0, r.output
    out = tmp_path / "from_runs.csv.gz"
    r = cli("dataset", "--experiment-name", "ops", "--out", str(out))
    assert r.exit_code == 0, r.output
    back = ds.load(out)
    assert sorted(back.gpu.unique()) == ["H100", "H200"]
    r = cli("check", "--dataset", str(out))
    assert r.exit_code == 0 and "vit" in r.output


def test_validate_holds_out_a_family_with_either_method(tmp_path):
    out = tmp_path / "lofo.json"
    r = cli("validate", "--dataset", str(SLICE), "--out", str(out), "--hold-out", "family", "--method", "fitted")
    assert r.exit_code == 0, r.output
    assert "held out dlrm" in r.output and "time: median error" in r.output
    assert _one_line(cli("validate", "--dataset", str(SLICE), "--hold-out", "layer")).startswith("Error: Invalid value")


def test_validate_writes_summary_and_cases(tmp_path):
    out = tmp_path / "validation.json"
    r = cli("validate", "--dataset", str(SLICE), "--out", str(out))
    assert r.exit_code == 0, r.output
    assert "time: median error" in r.output and "best GPU by edp: right in" in r.output
    import json

    import pandas as pd

    summary = json.loads(out.read_text())
    cases = pd.read_csv(out.with_suffix(".csv"))
    assert summary["cases"] == len(cases) == 32
    # the cases CSV holds 6 significant digits, so its median agrees to about 5e-6 relative
    assert summary["time"]["median_error"] == pytest.approx(cases.time_error.median(), rel=1e-5)


def test_host_benchmark_then_best_gpu_on_that_host(profile_files, tmp_path):
    import json

    out = tmp_path / "mine.json"
    r = cli("host", "--device", "cpu", "--out", str(out))
    assert r.exit_code == 0, r.output
    bench = json.loads(out.read_text())
    assert bench["dispatch_us"] > 0 and "host of cpu:" in r.output and "autograd" in r.output
    r = cli("best-gpu", str(profile_files / "H100" / "vit_training.csv"), "--dataset", str(SLICE), "--host", str(out))
    assert r.exit_code == 0, r.output
    assert f"host assumed for H200: {bench['cpu_model']}" in r.output
    r = cli("best-gpu", str(profile_files / "H100" / "vit_training.csv"), "--dataset", str(SLICE))
    assert "host assumed for H200: the source's, assumed" in r.output  # the slice predates the host record
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert "not a host benchmark" in _one_line(cli("best-gpu", str(profile_files / "H100" / "vit_training.csv"),
                                                   "--dataset", str(SLICE), "--host", str(bad)))
    assert "--host names A100" in _one_line(cli("best-gpu", str(profile_files / "H100" / "vit_training.csv"),
                                                "--dataset", str(SLICE), "--host", "A100"))


HELD_OUT = Path(__file__).resolve().parents[3] / "docs" / "ops" / "host" / "h100" / "suite2.csv.gz"


def _held_out_profile(model: str, precision: str = "bf16", mode: str = "inference"):
    """A held-out profile the H100 machine measured (with its host record), as `ops profile --out` writes it."""
    from radt_ext.ops import host

    data = ds.load(HELD_OUT)
    rows = data[data.model.str.endswith(f":{model}") & (data.precision == precision) & (data["mode"] == mode)]
    prof = ds.to_profile(rows)
    prof.meta.update(gpu_name=rows.gpu_name.iloc[0], host=host.from_rows(rows), ops_distinct=len(rows) - 1,
                     ops_total=int(rows["count"].sum()) - 1)
    return prof


@pytest.mark.parametrize("model, bound", [("GRUClassifier", True), ("PreNormEncoder", True), ("SmallUNet", False)])
def test_profile_and_best_gpu_say_who_sets_the_pace(tmp_path, model, bound):
    from radt_ext.ops import pace
    from radt_ext.ops.cli import profile_line

    prof = _held_out_profile(model)
    store.write(tmp_path, model, prof)
    host_bound = "the host sets the pace: a faster GPU will not help; " + pace.expectation()
    line = profile_line("RUN", model, prof, None)
    assert line.startswith(f"radt-ext: ops profile run RUN: {model} b") and "ms/step" in line
    r = cli("best-gpu", str(tmp_path / f"{model}.csv"), "--dataset", str(SLICE))
    assert r.exit_code == 0, r.output
    factor = f"divided and multiplied by {1 + pace.figures()['machine_spread']:.2f}"
    if bound:
        assert line.endswith(host_bound)
        assert "on H100: the host issues a step in" in r.output and host_bound in r.output
        assert factor in r.output
    else:
        assert line.endswith("the GPU sets the pace") and host_bound not in line
        assert "the GPU sets the pace" in r.output and host_bound not in r.output and factor not in r.output

