"""`radt-ext compare` through the real CLI on the shared store of real runs."""
from __future__ import annotations

import os
import subprocess
import sys

from mlflow.tracking import MlflowClient

from tests.radt_ext.report import page as shown
from tests.radt_ext.report.store import store  # noqa: F401


def compare(store, *args, tmp=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RADT_EXT_"))}
    env.update(MLFLOW_TRACKING_URI=store.uri, COLUMNS="250")
    return subprocess.run([sys.executable, "-m", "radt_ext.cli", "compare", *args], capture_output=True,
                          text=True, timeout=120, env=env, cwd=tmp)


def row(out: str, metric: str) -> str:
    """The line of the plain table (stdout is a pipe here) whose first cell is the metric."""
    return next(ln for ln in out.splitlines() if ln.split("  ")[0].strip() == metric)


def test_experiment_compared_to_the_run_its_runs_name_as_baseline(store):
    proc = compare(store, "--experiment", "variants")
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "chosen by tag baseline_run_id" in out
    assert store.baseline[:8] in out and store.amp[:8] in out
    runs = {r.info.run_id: r for r in MlflowClient(store.uri).search_runs(
        [MlflowClient(store.uri).get_experiment_by_name("variants").experiment_id])}
    base, amp = runs[store.baseline].data.metrics, runs[store.amp].data.metrics
    line = row(out, "e2e_duration_s")
    assert f"({amp['summary/e2e_duration_s'] / base['summary/e2e_duration_s']:.2f}×)" in line
    line = row(out, "gpu_total_energy_j")
    assert f"({amp['summary/gpu_total_energy_j'] / base['summary/gpu_total_energy_j']:.2f}×)" in line
    # the active phase comes first, with its share of the run
    assert out.index("\nactive_s ") < out.index("\nstartup_share_pct ") < out.index("\ne2e_duration_s ")


def test_runs_recorded_with_the_old_names_compare_with_new_ones(store, tmp_path):
    """A run recorded before the active phase existed (whole-run figures under the old names) is compared
    with today's runs on the same figures: its duration_s reads as e2e_duration_s, and so on."""
    client = MlflowClient(store.uri)
    exp = client.get_experiment_by_name("variants").experiment_id
    new = client.get_run(store.baseline).data.metrics
    old = client.create_run(exp, run_name="recorded-before", tags={"variant": "old"}).info.run_id
    from mlflow.entities import Metric

    from radt_ext.figures.summary_names import OLD_NAMES
    renamed = {v: k for k, v in OLD_NAMES.items()}
    values = {f"summary/{renamed[k[len('summary/'):]]}": 2 * v for k, v in new.items()
              if k.startswith("summary/") and k[len("summary/"):] in renamed}
    assert "summary/duration_s" in values and "summary/gpu_energy_j" in values
    client.log_batch(old, metrics=[Metric(k, v, 0, 0) for k, v in values.items()])
    client.set_terminated(old)
    try:
        proc = compare(store, store.baseline, old, "--baseline", store.baseline)
        assert proc.returncode == 0, proc.stderr[-2000:]
        for name in ("e2e_duration_s", "e2e_gpu_total_energy_j"):
            line = row(proc.stdout, name)
            assert "(2.00×)" in line, line
        line = row(proc.stdout, "active_s")
        assert "×" not in line  # the old run has no active-phase figures
        proc = compare(store, store.baseline, old, "--baseline", store.baseline, "--metric", "duration_s")
        assert proc.returncode == 0 and "e2e_duration_s" in proc.stdout and "(2.00×)" in proc.stdout
    finally:
        client.delete_run(old)


def test_filter_with_explicit_baseline_and_html(store, tmp_path):
    html = tmp_path / "cmp.html"
    proc = compare(store, "--filter", "tags.variant = 'amp'", "--baseline", store.baseline,
                   "--metric", "e2e_duration_s", "--metric", "loss", "--html", str(html))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "chosen by --baseline" in proc.stdout
    assert "loss" in proc.stdout and "throughput_samples_per_s" not in proc.stdout
    page = html.read_text(encoding="utf-8")
    assert store.baseline in shown.text(page) and "<table>" in page
    assert any("Pareto front" in shown.trace_names(fig) for fig in shown.figures(page))


def test_run_ids_in_the_order_given(store):
    proc = compare(store, store.amp, store.baseline, "--metric", "summary/samples")
    assert proc.returncode == 0, proc.stderr[-2000:]
    # amp names the baseline in its tag, so the baseline column comes first whatever the order
    assert proc.stdout.index(store.baseline[:8]) < proc.stdout.index(store.amp[:8])


def test_bad_input_is_one_line(store):
    cases = [
        ((), "nothing to compare"),
        (("0123456789abcdef0123456789abcdef",), "is not in this tracking store"),
        (("--experiment", "no-such-experiment"), "no experiment named"),
        (("--filter", "tags.variant === 'x'"), "is not valid MLflow search syntax"),
        (("--filter", "tags.variant = 'nope'"), "no run matches"),
        (("--experiment", "variants", "--baseline", "feedface"), "--baseline 'feedface' is not a run"),
    ]
    for args, text in cases:
        proc = compare(store, *args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("Error:")]
        assert len(lines) == 1 and text in lines[0], (args, proc.stderr)
        assert "Traceback" not in proc.stderr


def _repeated(uri: str) -> dict[str, list[str]]:
    """Three settings run three times each (same command and variant tag: repeats), their throughput
    and energy as logged: 'same' lies within the baseline's noise, 'fast' well outside it."""
    from mlflow.entities import Metric

    client = MlflowClient(uri)
    exp = client.create_experiment("repeats")
    figures = {"base": [(100.0, 50.0), (102.0, 49.0), (98.0, 51.0)],
               "same": [(101.0, 50.5), (99.0, 49.5), (103.0, 50.0)],
               "fast": [(150.0, 40.0), (152.0, 40.5), (149.0, 39.5)]}
    ids: dict[str, list[str]] = {}
    for variant, values in figures.items():
        for i, (throughput, energy) in enumerate(values):
            run = client.create_run(exp, run_name=f"{variant}-{i}", tags={
                "variant": variant, "radt_ext.command": f"python train.py --variant {variant}"})
            client.log_batch(run.info.run_id, metrics=[
                Metric("summary/throughput_samples_per_s", throughput, 0, 0),
                Metric("summary/gpu_total_energy_j", energy, 0, 0)])
            client.set_terminated(run.info.run_id)
            ids.setdefault(variant, []).append(run.info.run_id)
    return ids


def _by_setting(records: list[dict], metric: str) -> dict[str, dict]:
    return {r["setting"].split(" ")[1]: r for r in records if r["metric"] == metric}


def test_repeats_of_a_setting_are_one_column_with_their_interval_and_noise_marked(tracking_uri):
    import csv
    import io
    import json
    import statistics

    from scipy.stats import t

    ids = _repeated(tracking_uri)
    store = type("S", (), {"uri": tracking_uri})
    base = ids["base"][0]
    proc = compare(store, "--experiment", "repeats", "--baseline", base, "--output", "json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = json.loads(proc.stdout)
    thr = _by_setting(records, "throughput_samples_per_s")
    assert set(thr) == {"base", "same", "fast"} and all(r["value_n"] == 3 for r in thr.values())
    values = [100.0, 102.0, 98.0]
    half = t.ppf(0.975, 2) * statistics.stdev(values) / 3 ** 0.5
    assert thr["base"]["value"] == statistics.mean(values) and thr["base"]["baseline"] is True
    assert abs(thr["base"]["value_ci95_high"] - (100.0 + half)) < 1e-9
    assert sorted(thr["fast"]["run_ids"].split(",")) == sorted(ids["fast"])
    assert thr["same"]["value_within_noise"] is True and thr["same"]["verdict"] == "same"
    assert thr["fast"]["value_within_noise"] is False and thr["fast"]["verdict"] == "better"
    energy = _by_setting(records, "gpu_total_energy_j")
    assert energy["fast"]["verdict"] == "better" and energy["same"]["value_within_noise"] is True  # less is better

    as_csv = compare(store, "--experiment", "repeats", "--baseline", base, "--output", "csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert len(rows) == len(records) and {r["value_within_noise"] for r in rows} == {"", "True", "False"}

    table = compare(store, "--experiment", "repeats", "--baseline", base)  # stdout is a pipe: a plain table
    assert table.returncode == 0, table.stderr[-2000:]
    line = row(table.stdout, "throughput_samples_per_s")
    assert line.count("±") == 3 and line.count("≈") == 1 and "(n=3)" in table.stdout
    assert "within the noise" in table.stdout.splitlines()[0]
    wide = max(len(ln) for ln in table.stdout.splitlines()[1:])
    assert wide > 80  # every column whole, not squeezed into 80

    per_run = compare(store, "--experiment", "repeats", "--baseline", base, "--per-run", "--output", "json")
    assert len({r["setting"] for r in json.loads(per_run.stdout)}) == 9
