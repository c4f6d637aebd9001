"""Profiles as MLflow runs in a real SQLite store: what one run holds, the way back, nothing half-written."""
from __future__ import annotations

import pandas as pd
import pytest
import torch
from mlflow.tracking import MlflowClient

from radt_ext.ops import catalog, dataset, grid, profiler, store
from radt_ext.ops.device import CPU_REASON, open_meter

CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def cpu_profile():
    torch.set_num_threads(1)
    net = catalog.build("small_cnn", 2, "fp32", CPU, tiny=True)
    prof = profiler.profile(net, "training", CPU, None, window_s=0.002, net_window_s=0.002)
    meter, facts, reason = open_meter(CPU)
    prof.meta.update(facts, batch=2, precision="fp32", energy_unavailable=reason)
    return prof


def test_profile_run_holds_params_totals_and_table(tracking_uri, cpu_profile):
    client = MlflowClient(tracking_uri)
    run_id = store.log(cpu_profile, client, "0")
    run = client.get_run(run_id)
    p = run.data.params
    assert (p["model"], p["batch"], p["precision"], p["mode"], p["gpu_name"]) == ("small_cnn", "2", "fp32", "training", "cpu")
    assert p["energy_unavailable"] == CPU_REASON
    m = run.data.metrics
    assert m["network_ms"] == pytest.approx(m["network_forward_ms"] + m["network_backward_ms"])
    assert m["ops_over_network_ms"] == pytest.approx(m["ops_sum_ms"] / m["network_ms"])
    # the rounds' spread per phase, and per step weighted by time: the interval every prediction carries
    assert m["network_forward_spread"] >= 0 and m["network_backward_spread"] >= 0
    assert min(m["network_forward_spread"], m["network_backward_spread"]) <= m["network_spread"] <= max(
        m["network_forward_spread"], m["network_backward_spread"])
    assert "network_energy_spread" not in m  # on the CPU there is no energy to spread
    assert m["network_forward_host_ms"] > 0 and m["network_backward_host_ms"] > 0  # the host's issue time per step
    assert "network_mj" not in m  # energy unavailable: no made-up zero
    assert run.info.status == "FINISHED" and run.data.tags[store.TAG] == "profile"
    back = store.load_run(client, run_id)
    pd.testing.assert_frame_equal(back.table, cpu_profile.table, check_dtype=False)
    assert back.meta["model"] == "small_cnn"
    assert [p.meta["run_id"] for p in store.load_experiment(client, "0")] == [run_id]


def test_failed_logging_leaves_no_run(tracking_uri, tmp_path, cpu_profile):
    client = MlflowClient(tracking_uri)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifact folder should be")
    experiment = client.create_experiment("broken-artifacts", artifact_location=str(blocker / "artifacts"))
    with pytest.raises(OSError):
        store.log(cpu_profile, client, experiment)
    runs = client.search_runs([experiment], run_view_type=3)  # active and deleted
    assert all(r.info.lifecycle_stage == "deleted" for r in runs)
    assert client.search_runs([experiment]) == []


def test_grid_files_read_back_and_build_a_dataset(tmp_path):
    code = grid.main(["--out", str(tmp_path), "--tiny", "--device", "cpu", "--models", "mlp", "--extra=",
                      "--precisions", "fp32", "--modes", "inference", "--budget-s", "60", "--window-s", "0.002",
                      "--net-window-s", "0.002"])
    assert code == 0
    names = sorted(p.name for p in tmp_path.glob("*.csv"))
    assert names == ["mlp_b2_fp32_inference.csv", "mlp_b4_fp32_inference.csv", "mlp_b8_fp32_inference.csv"]
    profiles = store.read_dir(tmp_path)
    df = dataset.from_profiles(profiles)
    assert set(df.gpu) == {"cpu"} and sorted(df.batch.unique()) == [2, 4, 8]
    out = dataset.write(df, tmp_path / "d.csv.gz")
    again = dataset.load(out)
    assert len(again) == len(df)
    check = dataset.summed_vs_network(again)
    assert len(check) == 3 and (check.time_ratio > 0).all() and check.energy_ratio.isna().all()


def test_grid_profiles_a_users_module_at_the_batch_sizes_given(tmp_path, capsys):
    spec = "tests.radt_ext.ops.modules:pair_of_inputs"
    with pytest.raises(SystemExit):
        grid.main(["--out", str(tmp_path), "--models", spec, "--extra="])
    assert f"{spec} is your own module: give its batch sizes with --batches {spec}=N" in capsys.readouterr().err
    code = grid.main(["--out", str(tmp_path), "--device", "cpu", "--models", spec, "--extra=", "--batches", f"{spec}=3",
                      "--precisions", "fp32", "--modes", "inference", "--window-s", "0.002", "--net-window-s", "0.002",
                      "--net-rounds", "3"])
    assert code == 0
    prof = store.read(tmp_path / "tests.radt_ext.ops.modules.pair_of_inputs_b3_fp32_inference.csv")
    assert prof.meta["batch"] == 3 and prof.meta["net_rounds"] == 3 and len(prof.meta["round_details"]) == 3


def test_grid_skips_what_does_not_fit(tmp_path):
    code = grid.main(["--out", str(tmp_path), "--tiny", "--device", "cpu", "--models", "mlp", "--extra=",
                      "--precisions", "fp32", "--modes", "inference", "--budget-s", "0"])
    assert code == 1
    assert not list(tmp_path.glob("*.csv"))
    log = pd.read_json(tmp_path / "grid.jsonl", lines=True)
    assert set(log.status) == {"skipped"} and log.why.str.contains("left").all()


def test_grid_run_again_keeps_what_it_wrote_and_measures_the_rest(tmp_path):
    args = ["--out", str(tmp_path), "--tiny", "--device", "cpu", "--models", "mlp", "--extra=", "--precisions", "fp32",
            "--modes", "inference", "--budget-s", "60", "--window-s", "0.002", "--net-window-s", "0.002"]
    assert grid.main(args) == 0
    first = tmp_path / "mlp_b4_fp32_inference.json"
    written = first.read_text()
    (tmp_path / "mlp_b8_fp32_inference.json").unlink()  # as if the last call stopped before its last profile
    assert grid.main(args) == 0
    log = pd.read_json(tmp_path / "grid.jsonl", lines=True).tail(3)
    assert dict(zip(log.profile, log.status)) == {"mlp_b4_fp32_inference": "kept", "mlp_b2_fp32_inference": "kept",
                                                   "mlp_b8_fp32_inference": "done"}
    assert first.read_text() == written and (tmp_path / "mlp_b8_fp32_inference.json").exists()


def test_grid_batches_of_your_own_replace_a_models_and_keep_the_order(tmp_path):
    items = grid.plan(["mlp", "dlrm"], [], ["bf16"], ["inference"], tiny=False,
                      batches={"mlp": (64,), "dlrm": (8, 16, 32, 4)})
    assert [(m, b) for m, b, *_ in items] == [("mlp", 64), ("dlrm", 16), ("dlrm", 8), ("dlrm", 32), ("dlrm", 4)]
    assert grid.parse_batches("mlp=64, dlrm=8:16") == {"mlp": (64,), "dlrm": (8, 16)}
    code = grid.main(["--out", str(tmp_path), "--tiny", "--device", "cpu", "--models", "mlp", "--extra=",
                      "--precisions", "fp32", "--modes", "inference", "--batches", "mlp=3", "--budget-s", "60"])
    assert code == 0
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == ["mlp_b3_fp32_inference.csv"]


@pytest.mark.parametrize("bad", ["mlp=0", "mlp=x", "mlp", "=4", "resnet50=4"])
def test_grid_refuses_bad_batches_in_one_line(bad, capsys):
    with pytest.raises(SystemExit) as exc:
        grid.main(["--out", "unused", "--tiny", "--device", "cpu", "--models", "mlp", "--extra=", "--batches", bad])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "--batches" in err[-1]
