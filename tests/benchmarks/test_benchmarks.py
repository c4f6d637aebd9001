"""The benchmark scripts' plumbing, each run in a tiny mode on the NVML replay (no GPU needed).

Real child processes, a real SQLite MLflow store, the real monitor and writer. No timing is
asserted: these tests prove each script measures every configuration and writes its table
and JSON, not what the numbers are.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

TRACE = os.path.join(REPO, "listeners", "traces", "h200_matmul.json")
pytestmark = pytest.mark.slow


def run_script(module: str, out, uri: str, *args: str, timeout: float = 240, trace: str = TRACE,
               name: str | None = None) -> dict:
    """`python -m benchmarks.<group>.<name>` in a tiny mode; its <name>.json read back."""
    env = dict(os.environ, RADT_EXT_NVML_REPLAY=trace, MLFLOW_TRACKING_URI=uri,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", "--out", str(out), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    name = name or module.rsplit(".", 1)[-1]
    assert (out / f"{name}.md").read_text().startswith("###")
    result = json.loads((out / f"{name}.json").read_text())
    assert result["environment"]["nvml_replay"] == trace
    return result


def buffer_trace(tmp_path) -> str:
    """A hand-made trace with the driver's power sample buffer (the fake NVML, recorded by the real recorder)."""
    sys.path.insert(0, os.path.join(REPO, "tests", "listeners"))
    from nvml_fake import record_fake

    path = tmp_path / "buffer.json"
    path.write_text(json.dumps(record_fake(samples=4)))
    return str(path)


def test_overhead_measures_each_configuration_and_the_monitor_logs(tmp_path, tracking_uri):
    pytest.importorskip("torch")
    result = run_script("sampling.overhead", tmp_path, tracking_uri, "--configs", "none,radt-ext-10hz,mlflow-0.1s",
                        "--rounds", "1", "--min-rounds", "1", "--window", "0.2", "--settle", "0.1",
                        "--warmup", "0.1", "--batch", "4", "--width", "4")
    configs = result["configs"]
    assert set(configs) == {"none", "radt-ext-10hz", "mlflow-0.1s"}
    for name, entry in configs.items():
        assert "error" not in entry, (name, entry)
        assert entry["throughput_img_s"]["n"] == 1 and entry["throughput_img_s"]["median"] > 0
    assert configs["radt-ext-10hz"]["metric_points"] > 0  # the monitor really logged into the run
    assert configs["radt-ext-10hz"]["loss_pct"]["n"] == 1


def test_overhead_paired_freezes_the_monitor_in_off_and_null_windows(tmp_path, tracking_uri):
    pytest.importorskip("torch")
    result = run_script("sampling.overhead_paired", tmp_path, tracking_uri, "--cycles", "2", "--window", "0.2",
                        "--settle", "0.05", "--warmup", "0.1", "--batch", "4", "--width", "4")
    kinds = [w["kind"] for w in result["windows"]]
    assert kinds == ["off", "on", "off", "null"] * 2 + ["off"]
    assert all(w["throughput"] > 0 for w in result["windows"])
    assert result["loss"]["on"]["windows"] == result["loss"]["null"]["windows"] == 2
    frozen = [w for w in result["windows"] if w["kind"] != "on"]
    # SIGSTOPped: every process of the monitor's tree stopped, no CPU time and no point stamped inside
    assert all(w["frozen"] and w["monitor_cpu_s"] == 0 and w["points_inside"] == 0 for w in frozen), frozen
    assert result["run_status"] == "FINISHED" and result["metric_points"] > 0


@pytest.mark.parametrize("workload", ["infer", "loader"])
def test_progress_cost_counts_every_on_window_and_sets_the_hooks_host_time_against_the_loop(
        tmp_path, tracking_uri, workload):
    pytest.importorskip("torch")
    result = run_script("progress.progress_cost", tmp_path, tracking_uri, "--workload", workload, "--device", "cpu",
                        "--cycles", "2", "--window", "0.1", "--settle", "0.02", "--warmup", "0.2", "--batch", "8",
                        "--workers", "1", "--host-blocks", "4", "--host-calls", "20",
                        name=f"progress_cost_{workload}")
    assert [w["kind"] for w in result["windows"]].count("on") == 2 and result["progress_source"] == "torch"
    counted = result["counted"]
    if workload == "infer":  # every call of the on windows, none of the off ones, none of the stand-in's
        assert counted["forwards"] == counted["calls_in_on_windows"] > 1
    else:
        assert counted["train_samples"] == counted["samples_in_on_windows"] > 8 and counted["steps"] > 0
    host = result["host_side"]
    assert host["blocks"] == 4 and host["calls_per_block"] == 20
    per_iter = 1e6 * 8 / result["off_throughput_samples_s"]["median"]
    assert host["gpu_loop_us_per_iteration"] == pytest.approx(per_iter)
    assert host["bound_pct"] == pytest.approx(100 * host["added_us_median"] / per_iter)


def test_overhead_refuses_a_configuration_list_without_the_baseline(tmp_path, tracking_uri):
    proc = subprocess.run([sys.executable, "-m", "benchmarks.sampling.overhead", "--configs", "radt-ext-1hz",
                           "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "--configs must include none" in proc.stderr
    assert not (tmp_path / "overhead.json").exists()


def test_sampling_reports_rates_and_monitor_cpu(tmp_path, tracking_uri):
    result = run_script("sampling.sampling", tmp_path, tracking_uri, "--max-rate-seconds", "0.2", "--seconds", "0.5",
                        "--settle", "0.1", "--rates", "20", "--process-listeners", "nvml",
                        "--power-energy-rates", "20", "--gpm-rates", "20")
    by_name = {a["listener"]: a for a in result["max_rate"]}
    assert set(by_name) == {"nvml power+energy", "nvml", "gpm"}
    for entry in by_name.values():
        assert "error" not in entry and entry["calls"] > 0
    # power and energy only (the listener's one field-values call may add average power, memory temperature)
    assert 2 <= by_name["nvml power+energy"]["values_per_reading"] < by_name["nvml"]["values_per_reading"]
    kinds = [c["what"].split(" (")[0] for c in result["cpu"]]
    assert kinds == ["nvml power+energy", "gpm", "monitor process, listeners nvml"]
    assert all("error" not in c for c in result["cpu"]), result["cpu"]
    assert all(c["achieved_hz"] > 0 for c in result["cpu"][:2])
    process = result["cpu"][2]
    assert process["points_stored"] > 0 and process["achieved_hz"]["nvml"] > 0


def test_energy_fidelity_runs_both_loads(tmp_path, tracking_uri):
    result = run_script("energy.energy_fidelity", tmp_path, tracking_uri, "--seconds", "0.5")
    loads = {load["load"]: load for load in result["loads"]}
    assert set(loads) == {"steady", "bursty"}
    for load in loads.values():
        assert "error" not in load, load
        assert load["base_samples"] > 0
        assert [c["interval_s"] for c in load["by_interval"]] == [0.02, 0.1, 0.5, 1.0]
        assert len(load["by_interval_avg_power"]) == 4


def test_energy_fidelity_integrates_the_listeners_timeline_against_the_counter(tmp_path, tracking_uri):
    result = run_script("energy.energy_fidelity", tmp_path, tracking_uri, "--seconds", "0.5", "--loads", "steady")
    load = result["loads"][0]
    # this trace holds no sample buffer: the listener's timeline is its point reads, and says why
    assert load["timeline_source"].startswith("point reads every 0.1 s")
    assert load["timeline"]["points"] >= 2 and load["timeline"]["counter_j"] >= 0
    assert "integrated_j" in load["timeline"] and load["timeline_energy_reads"] >= 2


def test_timeline_integral_is_exact_for_a_linear_series():
    from benchmarks.energy.energy_fidelity import compare_timeline, integrate

    power = [(10.0 + 0.02 * i, 100.0 + i) for i in range(501)]  # 100 → 600 W over 10 s, every 20 ms
    assert integrate(power, 10.0, 20.0) == pytest.approx(3500.0)
    assert integrate(power, 10.01, 19.99) == pytest.approx(3500.0 - 0.01 * 100.25 - 0.01 * 599.75)
    counter = [(10.0 + 0.5 * k, 0.0, 100.0 * (0.5 * k) + 25.0 * (0.5 * k) ** 2, 0.0) for k in range(21)]
    c = compare_timeline(power, counter, 10.0, 20.0)
    assert c["error_pct"] == pytest.approx(0.0, abs=1e-9) and c["points"] == 501


def test_nvml_call_cost_measures_each_listeners_calls(tmp_path, tracking_uri):
    trace = buffer_trace(tmp_path)
    result = run_script("sampling.nvml_call_cost", tmp_path, tracking_uri, "--calls", "3", "--smi-seconds", "0",
                        "--phases", "idle", trace=trace)
    (phase,) = result["phases"]
    rows = {(r["listener"], r["call"].split(" ")[0]): r for r in phase["calls"]}
    assert {listener for listener, _ in rows} == {"nvml", "gpm", "gpu_procs"}
    drains = [r for r in phase["calls"] if r["call"].startswith("nvmlDeviceGetSamples")]
    assert len(drains) == 3 and all(r["calls"] == 3 and r["cpu_ms_mean"] >= 0 for r in drains)
    for r in phase["calls"]:  # measured, or the one line of what the replay could not answer
        assert ("cpu_ms_mean" in r) != ("error" in r), r
    assert phase["buffer"]["backlog_samples"] == 100 and phase["buffer"]["spacing_ms_median"] == 20.0


def test_monitor_cost_measures_the_monitor_process_and_its_threads(tmp_path, tracking_uri):
    trace = buffer_trace(tmp_path)
    result = run_script("sampling.monitor_cost", tmp_path, tracking_uri, "--seconds", "0.5", "--settle", "0.2",
                        "--phases", "idle", "--listeners", "nvml", trace=trace)
    process, by_thread = result["rows"]
    assert "error" not in process and process["listeners"] == "nvml" and process["points_stored"] > 0
    assert process["children_cpu_pct_of_core"] == 0.0  # nvml starts no tool process
    assert "error" not in by_thread and set(by_thread["cpu_pct_by_thread"]) == {"monitor", "writer"}


def test_monitor_threads_splits_the_monitor_process_by_thread(tmp_path, tracking_uri):
    trace = buffer_trace(tmp_path)
    result = run_script("sampling.monitor_threads", tmp_path, tracking_uri, "--seconds", "0.5", "--settle", "0.2",
                        "--sets", "nvml", trace=trace)
    sleeping, nvml_init, monitor = result["rows"]
    assert sleeping["what"] == "python, sleeping" and len(sleeping["threads"]) >= 1
    assert "error" in nvml_init or nvml_init["threads"]  # without a driver NVML cannot initialise: one line
    assert "error" not in monitor and monitor["what"] == "monitor process, nvml"
    assert len(monitor["threads"]) >= 4  # main, writer, the monitor's, stdin and signal threads
    assert monitor["cpu_pct_of_core"] == pytest.approx(sum(monitor["threads"].values()), abs=0.01)


def test_energy_fidelity_error_is_zero_for_an_exact_series():
    from benchmarks.energy.energy_fidelity import compare

    # 100 W for 10 s, the counter advancing exactly 2 J per 20 ms: the integral matches at every interval
    samples = [(i * 0.02, 100.0, i * 2.0, 100.0) for i in range(501)]
    for interval in (0.02, 0.1, 0.5, 1.0):
        c = compare(samples, 0.0, 10.0, interval)
        assert c["phases"] == round(interval / 0.02)
        assert c["abs_error_pct_max"] == pytest.approx(0.0, abs=1e-9)
        assert compare(samples, 0.0, 10.0, interval, column=3)["abs_error_pct_max"] == pytest.approx(0.0, abs=1e-9)


def test_logging_throughput_hour_is_read_back_complete(tmp_path, tracking_uri):
    result = run_script("store.logging_throughput", tmp_path, tracking_uri, "--no-server", "--points", "3000",
                        "--ceiling-batches", "2", "--hour-seconds", "10", "--paced-seconds", "1",
                        "--log-batch-points", "1500")
    sqlite = result["stores"]["sqlite"]
    assert sqlite["writer"]["stored"] == 3000 and sqlite["writer"]["spooled"] == 0
    assert sqlite["writer_log_batch"]["stored"] == 1500
    hour = result["hour"]
    assert hour["points"] == 10 * 10 * 30 and hour["stored"] == hour["points"]
    assert hour["read_back"]["complete"] is True
    assert result["paced"]["stored"] == result["paced"]["points"] > 0


def test_listener_cost_measures_each_part_after_a_sleep_and_back_to_back(tmp_path, tracking_uri):
    result = run_script("sampling.listener_cost", tmp_path, tracking_uri, "--samples", "3", "--spacing", "0.01",
                        "--listeners", "nvml,top")
    rows = {r["what"]: r for r in result["rows"]}
    measured = [r for r in rows.values() if "error" not in r]
    assert {"a thread waking only (Event.wait)", "recorder path, one reading of 20 values",
            "nvml: whole sample()", "top: whole sample()"} <= set(rows)
    assert any(w.startswith("nvml: gpu0_") for w in rows)  # each of the nvml listener's readings
    for r in measured:
        assert r["spaced_us"] > 0 and r["pct_of_core"] >= 0
    assert all(r["error"] for r in rows.values() if "error" in r)  # a part the trace cannot answer: one line


def test_tick_floor_measures_each_variant_in_a_process_of_its_own(tmp_path, tracking_uri):
    trace = os.path.join(REPO, "listeners", "traces", "h100_power_samples.json")
    result = run_script("sampling.tick_floor", tmp_path, tracking_uri, "--seconds", "0.5", "--settle", "0.2",
                        "--repeats", "1", "--variants", "idle,wake,reads,listener,monitor_pinned", trace=trace)
    runs = {r["variant"]: r for r in result["runs"]}
    assert set(runs) == {"idle", "wake", "reads", "listener", "monitor_pinned"}
    for name, r in runs.items():
        assert r["wall_s"] >= 0.5 and r["cpu_s"] >= 0, r
        assert (r["ticks"] > 0) == (name != "idle"), r  # idle wakes no thread
    assert runs["monitor_pinned"]["pinned_cpu"] in os.sched_getaffinity(0)
    assert not runs["monitor_pinned"].get("error")
    power = next(b for b in result["buffers"] if b["buffer"] == "NVML_TOTAL_POWER_SAMPLES")
    assert power["samples"] > 0 and power["median_spacing_ms"] > 0  # the recorded H100 buffer


def test_ops_spread_measures_a_networks_rounds_back_to_back(tmp_path, tracking_uri):
    pytest.importorskip("torch")
    result = run_script("ops.ops_spread", tmp_path, tracking_uri, "--configs", "mlp:8:fp32:training", "--rounds", "3",
                        "--window", "0.02", "--device", "cpu")
    rows = result["rows"]
    assert {(r["variant"], r["phase"]) for r in rows} == {("timed", "forward"), ("timed", "backward")}
    for r in rows:  # metered variants need the GPU's counter: on the CPU only the timed rounds
        assert r["rounds"] == 3 and len(r["times_ms"]) == 3 and r["spread"] >= 0


def test_ops_repeat_compares_two_runs_of_one_grid(tmp_path, tracking_uri):
    runs = os.path.join(REPO, "docs", "ops", "runs", "h100_gpu_bound")
    result = run_script("ops.ops_repeat", tmp_path, tracking_uri, "--a", os.path.join(runs, "run1", "profiles.csv.gz"),
                        "--b", os.path.join(runs, "run2", "profiles.csv.gz"))
    rows, summary = result["rows"], result["summary"]
    assert summary["profiles"] == len(rows) == 24  # every profile of the recorded H100 grid, in both runs
    same = [r for r in rows if r["model"] == "resnet50" and r["precision"] == "bf16" and r["mode"] == "training"]
    assert len(same) == 1 and abs(same[0]["network_time_change_pct"]) < 100
    assert 0 <= summary["time_within_goal"][0] <= 24 and summary["time_ratio"]["n"] == 48


def test_ops_metering_measures_each_metering_in_turn(tmp_path, tracking_uri):
    pytest.importorskip("torch")
    result = run_script("ops.ops_metering", tmp_path, tracking_uri, "--configs", "mlp:8:fp32:training", "--repeats", "2",
                        "--ops", "2", "--window", "0.02", "--net-window", "0.02", "--device", "cpu")
    rows = result["rows"]
    assert not [r for r in rows if r.get("error")], rows
    networks = {(r["phase"], r["variant"]) for r in rows if r["what"] == "network"}
    assert networks == {(p, v) for p in ("forward", "backward") for v in ("polled", "threaded")}
    ops = [r for r in rows if r["what"] != "network"]
    assert len(ops) == 4 and {r["phase"] for r in ops} == {"forward"}  # two operations, each metering
    for r in rows:  # on the CPU a window times only; every window's chunks ran back to back
        assert r["windows"] == 2 and r["time_ms"] > 0 and 0 < r["busy"] <= 1
    assert result["ramps"] == []  # the ramp needs the GPU's counter


def test_ops_repeat_picks_one_gpu_and_checks_the_power_timeline(tmp_path, tracking_uri):
    ops = os.path.join(REPO, "docs", "ops")
    repeat = os.path.join(ops, "runs", "h100_repeat", "profiles.csv.gz")
    result = run_script("ops.ops_repeat", tmp_path, tracking_uri, "--a", os.path.join(ops, "dataset.csv.gz"),
                        "--b", repeat, "--gpu", "H100")
    summary = result["summary"]
    assert summary["profiles"] == len(result["rows"]) == 8  # the repeat's profiles, found in the H100's half
    timeline = summary["timeline_vs_counter_abs_pct"]
    assert timeline["n"] > 0 and timeline["within_5"] <= timeline["n"] and timeline["median"] >= 0
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ops.ops_repeat", "--a", os.path.join(ops, "dataset.csv.gz"),
                           "--b", repeat, "--gpu", "H200", "--out", str(tmp_path / "none")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "share no profile" in proc.stderr  # the repeat holds no H200 profile


def test_ops_findings_prints_the_figures_the_docs_quote():
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ops.ops_findings", "--out", os.path.join(REPO, "docs", "ops")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in ("profiles per GPU {'H100': 72, 'H200': 72}", "busy share of windows", "summed within 10 % on time",
                 "network rows above the limit", "largest time errors"):
        assert line in proc.stdout, line


def test_ops_heldout_report_prints_the_committed_figures():
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ops.ops_heldout", "report", "--out", os.path.join(REPO, "docs", "ops")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in ("one machine: time, fastest round", "two machines: energy, fastest round",
                 "at full SM clock with no throttle reason", "Summed operations against the network on the suite",
                 "after (roofline ratios): H200->H100", "before (fitted regressors): H100->H200",
                 "predicted H200 time against the H100's"):
        assert line in proc.stdout, line
    # what docs/ops.md quotes is what the committed data gives
    committed = open(os.path.join(REPO, "docs", "ops", "heldout", "report.txt")).read()
    assert proc.stdout == committed


def test_ops_heldout_report_scores_the_suite_on_the_committed_h200_measurements(tmp_path):
    """The H200 machine's suite files committed beside the H100's: every prediction is scored both ways."""
    import shutil

    ops = os.path.join(REPO, "docs", "ops")
    shutil.copytree(ops, tmp_path / "ops", ignore=shutil.ignore_patterns("*.png", "runs", "launch_bound"))
    assert (tmp_path / "ops" / "heldout" / "h200" / "suite.csv.gz").exists()
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ops.ops_heldout", "report", "--out", str(tmp_path / "ops")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "== 5. The suite measured on both GPUs" in proc.stdout
    assert "== 1. Repeatability (H200" in proc.stdout  # its repeat and the dataset's H200 rows
    assert "H100->H200 (32 cases)" in proc.stdout and "H200->H100 (32 cases)" in proc.stdout
    assert "measured inside the interval: time" in proc.stdout


def test_ops_coverage_prints_the_committed_table():
    """The intervals' coverage docs/ops.md quotes: both suites, both directions, before and after the host-bound rule."""
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ops.ops_coverage"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in ("== 1. The rule (radt_ext/ops/host_spread.json) ==", "== 3. Coverage", "both suites, both directions",
                 "first suite, profiles without a host record: H100->H200 (32 cases): time 1.8% / 4.4%"):
        assert line in proc.stdout, line
    assert proc.stdout == open(os.path.join(REPO, "docs", "ops", "coverage.txt")).read()


def test_startup_times_every_step_of_a_run(tmp_path, tracking_uri):
    result = run_script("startup.startup", tmp_path / "out", tracking_uri, "--repeats", "1", "--sleep-s", "0.2",
                        "--no-mlflow-import", "--matmul-s", "0.2", "--no-matmul-alone",
                        "--store", f"sqlite:///{tmp_path / 'startup.db'}")
    assert len(result["start_latency_s"]) == 3  # the run that ends at once, the sleep, the matmul
    assert result["return_overhead"][0]["under_radt_ext_s"] > 0.2
    steps = result["split"]
    assert list(steps)[:4] == ["imported", "checked", "workload_started", "listeners_started"]
    assert "store_connected" in steps and "report_logged" in steps  # the store was reached after the start
    assert "under_radt_ext_s" in result["matmul"]


@pytest.mark.new_store
def test_first_run_splits_readme_command_1_on_a_fresh_store(tmp_path, tracking_uri):
    result = run_script("startup.first_run", tmp_path / "out", tracking_uri, "--repeats", "1", "--seconds", "0.5")
    (run,) = result["runs"]
    assert run["wall_s"] > 0.5 and run["beyond_load_s"] == pytest.approx(run["wall_s"] - 0.5)
    spans = run["spans"]
    for label in ("radt-ext start → workload started", "workload: the load", "alongside: MLflow import",
                  "alongside: a fresh store's tables made", "after: report", "after: exit"):
        assert spans[label] >= 0, label
    assert spans["workload: the load"] >= 0.5
    assert (tmp_path / "out" / "first_run.md").read_text().count("beyond the") == 2


def test_store_growth_relogs_a_recorded_run_before_and_after_the_shape(tmp_path, tracking_uri):
    """benchmarks/store/store_growth.sh's analysis on a run recorded here on the replay: the run's full-rate
    artifact logged again through the old path and through the shape (SQLite only here)."""
    env = dict(os.environ, RADT_EXT_NVML_REPLAY=TRACE, MLFLOW_TRACKING_URI=tracking_uri,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "radt_ext.cli", "run", "-l", "nvml,top", "--", sys.executable, "-c",
                           "import time; time.sleep(3)"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (artifact,) = tmp_path.glob("mlruns/*/*/artifacts/timelines/system.parquet")
    out = tmp_path / "out"
    result = run_script("store.store_growth", out, tracking_uri, "--store", tracking_uri, "--timelines", str(artifact),
                        "--no-postgres")
    sqlite = result["sqlite"]
    assert sqlite["before"]["rows"] > sqlite["after"]["rows"] > 0 and sqlite["before"]["bytes"] > 0
    assert result["measured"]["shape_matches_store"]  # the shape made here is what the run stored
    assert abs(result["energy"]["stored_vs_summary_pct"]) < 0.1 and abs(result["energy"]["full_rate_vs_summary_pct"]) < 0.1
    synthetic = run_script("store.store_growth", tmp_path / "synthetic", tracking_uri, "--synthetic", "60,2", "--no-postgres")
    assert synthetic["sqlite"]["before"]["rows"] > 10 * synthetic["sqlite"]["after"]["rows"]


def test_attribution_pairs_reads_the_driver_ticks_of_the_h100_recording(tmp_path):
    """The tick table of the recording docs/collocation.md quotes: one process a tick, every 200 ms."""
    raw = os.path.join(REPO, "docs", "validation", "collocation", "energy_attribution_logs", "proc_samples.jsonl.gz")
    proc = subprocess.run([sys.executable, "-m", "benchmarks.collocation.attribution_pairs", "--raw", raw, "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    ticks = json.loads((tmp_path / "attribution_pairs.json").read_text())["ticks"]["proc_samples.jsonl.gz"]
    assert ticks["tick_ms"] == pytest.approx(200, abs=5) and ticks["most_processes_in_one_tick"] == 1
    stretches = ticks["shared_stretches"]
    assert len(stretches) == 3  # the three naive groups
    for s in stretches:
        assert sum(s["named"].values()) == s["busy_ticks_while_all_busy"]
        assert sum(int(k) * v for k, v in s["run_lengths"].items()) == s["busy_ticks_while_all_busy"]
    assert "at most 1 process(es) named in one tick" in (tmp_path / "attribution_pairs.md").read_text()


def test_pack_heldout_checks_the_bound_with_its_tolerance_and_shows_the_guards_account():
    from benchmarks.packing.pack_heldout import markdown, verdict

    def job(name, slowdown, paused=0.0):
        return {"name": name, "alone": {"active_s": 6.0, "duration_s": 14.0, "energy_j": 900.0},
                "packed": {"slowdown": slowdown, "mode": "mps", "gpu": "0", "guard_paused_s": paused,
                           "predicted_slowdown": 1.2, "launch_bound": name == "infer4"}}
    steps = {"alone": {"makespan_s": 100.0, "groups": 10, "jobs": 10, "finished": 10, "gpu_energy_j": 9000.0,
                       "modes": ["exclusive"]},
             "packed": {"makespan_s": 65.0, "groups": 5, "jobs": 10, "finished": 10, "gpu_energy_j": 7000.0,
                        "modes": ["exclusive", "mps"],
                        "guard": {"mps 2 jobs: infer4-5 + cnn128-3": "max slowdown 1.5: 2.3s over infer4-5 live 2.41"}}}
    fig = {"steps": steps, "jobs": {"a": job("infer4", 1.64), "b": job("cnn128", 1.1, paused=4.0)},
           "makespan_ratio": 0.65, "max_slowdown_measured": 1.64}
    v = verdict(fig, 1.5)
    assert v["bound_kept"] and v["makespan_goal_met"] and v["paused_jobs"] == 1  # 1.64 <= 1.1 x 1.5
    fig["jobs"]["a"]["packed"]["slowdown"] = 1.7
    fig["verdict"] = v = verdict(fig, 1.5)
    assert not v["bound_kept"] and v["over_tolerance"] == [("infer4", 1.7)]
    text = markdown(fig, 1.5)
    assert "NOT kept: infer4 1.70" in text and "- mps 2 jobs: infer4-5 + cnn128-3: max slowdown 1.5: 2.3s over" in text
    assert "| infer4 | mps (0) | yes |" in text


def test_ops_host_moves_by_a_ratio_of_two_hosts_measured_the_same_way():
    """The second suite's host-aware predictions take both machines' hosts from one kind of measurement: the
    command's (`radt-ext ops host`) or the profiles' own records, never one over the other; each ratio applied
    is the hosts' ratio, and the two directions' ratios are each other's inverse."""
    import math

    import pandas as pd

    from benchmarks.ops.ops_host import move
    from radt_ext.ops import dataset as ds, host, predict

    data = ds.load(os.path.join(REPO, "tests", "radt_ext", "ops", "data", "slice.csv.gz"))
    vit = data[(data.model == "vit") & (data.precision == "bf16") & (data["mode"] == "inference")]
    command = {"H100": {"cpu_model": "Xeon", "cpus": 16, "launch_us": 5.6, "dispatch_us": 10.2, "module_us": 27.0,
                        "autograd_us": 310.0, "copy_us": 21.8},
               "H200": {"cpu_model": "Xeon", "cpus": 32, "launch_us": 3.7, "dispatch_us": 6.1, "module_us": 16.4,
                        "autograd_us": 160.4, "copy_us": 18.1}}
    # the profiles' records: taken in a warm process, they differ from the command's on the same machine
    records = {g: {**h, **{k: h[k] * f for k in host.FIGURES}} for (g, h), f in zip(command.items(), (0.65, 0.9))}
    both = []
    for g in ("H100", "H200"):
        rows = vit[vit.gpu == g].assign(**host.columns(records[g]))
        net = rows.op == "network"
        rows.loc[net, "host_ms"] = rows.loc[net, "time_ms"]  # host-bound: the host issues the whole step
        both.append(rows)
    both = pd.concat(both, ignore_index=True)
    res = move(predict.fit(data), both, (0.05, 0.06), command, records)
    assert set(res.predictor) == {"aware", "records", "assumed", "blind"}
    for name, hosts_used in (("aware", command), ("records", records)):
        ratio = {(r.source, r.target): r.host_ratio for r in res[res.predictor == name].itertuples()}
        assert ratio[("H100", "H200")] == pytest.approx(host.ratio(hosts_used["H100"], hosts_used["H200"], "inference"))
        assert ratio[("H100", "H200")] * ratio[("H200", "H100")] == pytest.approx(1.0)
    # one kind over the other would have applied neither machine's ratio
    mixed = host.ratio(records["H100"], command["H200"], "inference")
    assert not math.isclose(mixed, host.ratio(command["H100"], command["H200"], "inference"), rel_tol=0.05)


def test_ops_host_report_prints_the_committed_figures():
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run([sys.executable, "-m", "benchmarks.ops.ops_host", "report"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for line in ("== 1. The hosts ==", "by the profiles' records", "host-aware, target's host measured: H200->H100",
                 "second suite, host-aware:", "H200: repeat set, time per step, two fresh processes"):
        assert line in proc.stdout, line
    # what docs/ops.md quotes is what the committed data gives
    assert proc.stdout == open(os.path.join(REPO, "docs", "ops", "host", "report.txt")).read()


def test_one_job_profile_profiles_a_sweep_of_one_job_in_fresh_interpreters(tmp_path, tracking_uri):
    env = dict(os.environ, RADT_EXT_NVML_REPLAY=TRACE, MLFLOW_TRACKING_URI=tracking_uri,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.startup.one_job_profile", "--out", str(tmp_path / "p"),
                           "--seconds", "1", "--repeats", "1", "--device", "cpu"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = (tmp_path / "p" / "summary.txt").read_text()
    assert "packages with modules lacking bytecode" in summary and "## repeat 0: job started" in summary
    timings = json.loads((tmp_path / "p" / "0.timings.json").read_text())
    assert {"planned", "ended", "groups", "lock_waits_s"} <= set(timings) and timings["groups"][0]["freed"]
    assert (tmp_path / "p" / "0.main.prof").stat().st_size > 0 and "### 0 main" in summary


def test_gc_pauses_counts_the_collectors_full_passes_with_and_without_the_quiet_heap(tmp_path):
    env = dict(os.environ, RADT_EXT_NVML_REPLAY=TRACE, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "benchmarks.startup.gc_pauses", "--out", str(tmp_path / "g"),
                           "--seconds", "1", "--repeats", "1"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads((tmp_path / "g" / "gc_pauses.json").read_text())
    assert set(result) == {"as-is", "quiet"} and all(len(runs) == 1 for runs in result.values())
    assert result["as-is"][0]["passes"] and result["quiet"][0]["total_s"] < result["as-is"][0]["total_s"]
    assert (tmp_path / "g" / "gc_pauses.md").read_text().startswith("| collector |")
