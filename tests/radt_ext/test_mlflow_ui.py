"""MLflow's own UI, in a real headless Chromium, shows what radt-ext recorded.

A real `mlflow server` serves the shared store of real runs (tests/radt_ext/report/store.py);
Playwright drives Debian's chromium (no browser download). Screenshots go to $RADT_EXT_SCREENSHOTS (docs/screenshots/ to refresh the committed ones:
`RADT_EXT_SCREENSHOTS=docs/screenshots python -m pytest tests/radt_ext/test_mlflow_ui.py --basetemp=/tmp/radt-ext-docs`,
so the artifact path the Artifacts tab shows is that neutral one).
Skipped, with the reason, where chromium or the playwright package is absent.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.radt_ext.report.store import store  # noqa: F401
from tests.servers import ServerUnavailable, start_mlflow_server

# RADT_EXT_SCREENSHOTS=docs/screenshots refreshes the committed screenshots; by default they go to /tmp
SHOTS = Path(os.environ.get("RADT_EXT_SCREENSHOTS", Path(tempfile.gettempdir()) / "radt-ext-screenshots"))
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 90_000


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser():
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium is not installed (Debian: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    profile = tempfile.mkdtemp(prefix="radt-chromium-")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=exe, headless=True, args=FLAGS, viewport={"width": 1400, "height": 1000})
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def server(store, tmp_path_factory):  # noqa: F811
    try:
        srv = start_mlflow_server(store.uri, tmp_path_factory.mktemp("ui-server"))
    except ServerUnavailable as exc:
        pytest.fail(f"mlflow server did not start on the test store: {exc}")
    yield srv
    srv.stop()


def _wait_text(page, text: str) -> None:
    page.wait_for_function("t => document.body && document.body.innerText.includes(t)", arg=text,
                           timeout=WAIT_MS)


def _metrics_table(body: str) -> tuple[list[str], list[float]]:
    """The compare view's Metrics section as text: every metric name, then every value row by row."""
    lines = body[body.index("Metrics\nShow diff only\n"):].splitlines()[2:]
    names, values = [], []
    for line in lines:
        try:
            values.append(float(line))
        except ValueError:
            if values:
                break
            names.append(line)
    return names, values


def _rendered_table(page, last: str) -> str:
    """The page's text once the metrics table shows the row named `last` and every value up to it."""
    deadline = time.time() + WAIT_MS / 1000
    while True:
        body = page.inner_text("body")
        try:
            names, values = _metrics_table(body)
            if last in names and len(values) >= 2 * (names.index(last) + 1):
                return body
        except ValueError:  # the table is not there yet
            pass
        if time.time() > deadline:
            return body  # the assertions then say what is missing
        page.wait_for_timeout(250)


def _close_assistant(page) -> None:
    """MLflow 3 opens an assistant side panel; close it so the screenshot shows the charts."""
    close = page.locator("button[aria-label='Close']")
    if close.count():
        try:
            close.first.click(timeout=2000)
        except Exception:
            pass


def test_system_metrics_tab_shows_our_listener_metrics(store, server, browser):  # noqa: F811
    client = MlflowClient(store.uri)
    run = client.get_run(store.baseline)
    page = browser.new_page()
    page.goto(f"{server.url}/#/experiments/{run.info.experiment_id}/runs/{store.baseline}/system-metrics")
    _wait_text(page, "gpu0_energy_j")
    body = page.inner_text("body")
    system = sorted(k[len("system/"):] for k in run.data.metrics if k.startswith("system/"))
    assert re.search(rf"System metrics\s*\({len(system)}\)", body), body[:2000]
    _close_assistant(page)
    search = page.get_by_placeholder("Search metric charts")
    search.fill("power")
    _wait_text(page, "gpu0_power_w")
    page.wait_for_timeout(1500)  # let the chart draw its line
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "mlflow_system_metrics.png"))
    assert "gpu0_power_w" in page.inner_text("body")
    page.close()


def test_compare_runs_view_shows_our_summaries(store, server, browser):  # noqa: F811
    client = MlflowClient(store.uri)
    exp = client.get_run(store.baseline).info.experiment_id
    runs = json.dumps([store.baseline, store.amp])
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1800})
    page.goto(f"{server.url}/#/compare-runs?runs={runs}&experiments={json.dumps([exp])}")
    _wait_text(page, "summary/e2e_duration_s")
    body = _rendered_table(page, "summary/e2e_duration_s")
    assert "Comparing 2 Runs" in body
    # the view lists metrics alphabetically and renders only as many rows as fit (that number varies):
    # every name it shows is one we logged, and the summaries up to the one waited for are all there
    logged = set(client.get_run(store.baseline).data.metrics) | set(client.get_run(store.amp).data.metrics)
    names, values = _metrics_table(body)
    assert names and set(names) <= logged, sorted(set(names) - logged)
    for key in ("summary/active_s", "summary/e2e_duration_s"):  # the first two summaries, alphabetically
        assert key in names, key
    # the value MLflow shows for the baseline's duration is the one we logged
    duration = client.get_run(store.baseline).data.metrics["summary/e2e_duration_s"]
    shown = values[2 * names.index("summary/e2e_duration_s")]  # two runs per row, baseline first
    assert shown == pytest.approx(duration, rel=0.01), (shown, duration)
    _close_assistant(page)
    page.wait_for_timeout(1500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "mlflow_compare_runs.png"), full_page=True)
    page.close()


def test_report_artifact_renders_offline(store, browser):  # noqa: F811
    """The per-run report opens from a file with no network and draws its figure."""
    client = MlflowClient(store.uri)
    local = client.download_artifacts(store.baseline, "radt_ext_report.html")
    page = browser.new_page()
    page.set_viewport_size({"width": 1300, "height": 1800})
    page.route("http*://**", lambda route: route.abort())  # nothing from outside
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"file://{local}")
    page.locator("svg.radt-plot").first.wait_for(timeout=WAIT_MS)
    assert page.locator("svg.radt-plot").count() == 1
    assert page.locator("svg.radt-plot .radt-trace polyline").count() >= 7
    assert not errors, errors
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "report_run.png"), full_page=True)
    page.close()


def test_report_renders_in_mlflow_artifact_viewer(store, server, browser):  # noqa: F811
    """MLflow shows an HTML artifact from a blob: URL in a sandboxed frame; the report draws there too."""
    client = MlflowClient(store.uri)
    exp = client.get_run(store.baseline).info.experiment_id
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 1200})
    page.goto(f"{server.url}/#/experiments/{exp}/runs/{store.baseline}/artifacts")
    page.get_by_text("radt_ext_report.html").first.click(timeout=WAIT_MS)
    frame = page.frame_locator("iframe.mlflow-html-iframe")
    frame.locator("svg.radt-plot").first.wait_for(timeout=WAIT_MS)
    assert frame.locator("svg.radt-plot .radt-trace polyline").count() >= 7
    _close_assistant(page)
    page.wait_for_timeout(500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "mlflow_report_artifact.png"))
    page.close()


def _dismiss_tour(page) -> None:
    """The GenAI overview first shows a "Detect Issues" tour popover that blocks clicks elsewhere."""
    try:
        page.get_by_role("button", name="Got it").click(timeout=10_000)
    except Exception:  # not shown in this browser
        pass


def _open_from_experiments_list(page, url: str, experiment_id: str) -> None:
    page.goto(f"{url}/#/experiments")
    page.get_by_text("Time created").first.wait_for(timeout=WAIT_MS)  # the list's table
    # the name's link in the list (the sidebar's link back to the list can carry the same name)
    page.locator(f"a[href='#/experiments/{experiment_id}']").first.click(timeout=WAIT_MS)


def test_a_radt_ext_experiment_opens_in_the_training_view(store, server, browser):  # noqa: F811
    """How a user reaches a radt-ext experiment's runs table and a run's System metrics tab in MLflow 3.17.

    The experiment carries mlflow.experimentKind=custom_model_development, but MLflow 3.17's experiment page
    picks its view from the browser's GenAI / Model training switch (kept in local storage, GenAI when
    unset), not from that tag: a fresh browser lands on the GenAI overview. One click on "Model training"
    is remembered by the browser; from then on the experiments list and the plain experiment URL both
    open the runs table."""
    client = MlflowClient(store.uri)
    run = client.get_run(store.baseline)
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.tags.get("mlflow.experimentKind") == "custom_model_development"
    runs_tab = re.compile(rf".*#/experiments/{experiment.experiment_id}/runs\?.*workflowType=machine_learning.*")
    page = browser.new_page()
    page.goto(f"{server.url}/#/experiments")
    page.evaluate("() => localStorage.clear()")  # a browser that never opened MLflow
    # a fresh browser: the experiments list opens the experiment in the GenAI workspace, tag or not
    _open_from_experiments_list(page, server.url, experiment.experiment_id)
    page.wait_for_url(re.compile(rf".*#/experiments/{experiment.experiment_id}/overview.*workflowType=genai.*"),
                      timeout=WAIT_MS)
    # the user switches the sidebar to "Model training" once; the browser remembers it
    _dismiss_tour(page)
    page.get_by_text("Model training", exact=True).first.click(timeout=WAIT_MS)
    page.wait_for_url(runs_tab, timeout=WAIT_MS)
    # from then on, the experiments list and the plain URL open the runs table
    _open_from_experiments_list(page, server.url, experiment.experiment_id)
    page.wait_for_url(runs_tab, timeout=WAIT_MS)
    page.goto(f"{server.url}/#/experiments/{experiment.experiment_id}")
    page.wait_for_url(runs_tab, timeout=WAIT_MS)
    baseline = page.get_by_role("link", name="baseline", exact=True).first
    baseline.wait_for(timeout=WAIT_MS)  # a run's name in the runs table
    assert "Run Name" in page.inner_text("body")
    _close_assistant(page)
    page.wait_for_timeout(1500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "mlflow_training_view.png"))
    baseline.click()  # the run, from the runs table
    page.wait_for_url(re.compile(rf".*/runs/{store.baseline}.*"), timeout=WAIT_MS)
    page.get_by_role("tab", name="System metrics").or_(page.get_by_text("System metrics")).first.click(
        timeout=WAIT_MS)  # its System metrics tab shows our listeners' metrics
    _wait_text(page, "gpu0_energy_j")
    page.evaluate("() => localStorage.clear()")  # leave the module's browser as it found it
    page.close()


ROWS_JS = """() => {
  const rows = {};
  document.querySelectorAll('.ag-row[row-index]').forEach(r => {
    const i = Number(r.getAttribute('row-index'));
    rows[i] = rows[i] || {};
    r.querySelectorAll('.ag-cell[col-id]').forEach(c => { rows[i][c.getAttribute('col-id')] = c.innerText.trim(); });
  });
  return Object.keys(rows).sort((a, b) => a - b).map(k => rows[k]);
}"""
NAME_COLUMN = "attributes.`Run Name`"
HEADER_JS = """() => {
  const out = {};
  document.querySelectorAll('.ag-header-cell[col-id]').forEach(h => {
    const box = h.getBoundingClientRect();
    out[h.getAttribute('col-id')] = {index: Number(h.getAttribute('aria-colindex')), right: box.right};
  });
  return out;
}"""


def _table_rows(page, names: list[str]) -> list[dict]:
    """The runs table's rows, cell texts by column id, once every run named shows with its values."""
    deadline = time.time() + WAIT_MS / 1000
    while True:
        rows = [r for r in page.evaluate(ROWS_JS) if r.get(NAME_COLUMN)]
        shown = [next((n for n in names if r[NAME_COLUMN].splitlines()[-1] == n), None) for r in rows]
        if sorted(filter(None, shown)) == sorted(names) and all(len(r) > 6 for r in rows):
            return rows
        if time.time() > deadline:
            raise AssertionError(f"the runs table shows {rows}")
        page.wait_for_timeout(500)


def _open_view(page, url: str) -> None:
    page.goto(url)
    page.wait_for_url(re.compile(r".*workflowType=machine_learning.*orderByKey=tags\.%60radt_ext\.view_order%60.*"),
                      timeout=WAIT_MS)  # the view's sort, applied from the experiment's tag
    page.get_by_text("radt-ext comparison").first.wait_for(timeout=WAIT_MS)  # its name in the Views list


def test_the_comparison_view_link_opens_its_columns_in_a_fresh_browser(store, server, browser):  # noqa: F811
    """The link radt-ext prints opens the training view with the comparison columns and their values,
    runs in the view's order: each collocation parent right before its children."""
    from radt_ext.view import content, link

    client = MlflowClient(store.uri)
    page = browser.new_page()
    page.goto(f"{server.url}/#/experiments")
    page.evaluate("() => localStorage.clear()")  # a browser that never opened MLflow
    for experiment_id, names, shot in (
            (client.get_run(store.baseline).info.experiment_id, ["amp", "baseline"], "mlflow_comparison_table.png"),
            (client.get_run(store.parent).info.experiment_id, [client.get_run(store.parent).info.run_name,
                                                               "small", "large"], "mlflow_comparison_group.png")):
        page.set_viewport_size({"width": 6000, "height": 1000})  # every column drawn (the grid draws what shows)
        _open_view(page, link(store.uri, experiment_id, ui_url=server.url))
        rows = _table_rows(page, names)
        assert [r[NAME_COLUMN].splitlines()[-1] for r in rows] == names  # sorted by radt_ext.view_order
        runs = {r.info.run_name: r for r in client.search_runs([experiment_id])}
        for row in rows:
            run = runs[row[NAME_COLUMN].splitlines()[-1]]
            for key in content.METRICS:
                if key in run.data.metrics:
                    shown = row[f"metrics.`{key}`"]
                    assert float(shown) == pytest.approx(run.data.metrics[key], rel=1e-6), (key, shown)
            for key in content.TAGS:
                if key in run.data.tags:
                    assert row[f"tags.`{key}`"] == run.data.tags[key], key
        page.set_viewport_size({"width": 2400, "height": 560})
        _close_assistant(page)
        page.wait_for_timeout(1500)
        # the work figures stand first, before the tag and parameter columns, in view on a 2400-px screen
        header = page.evaluate(HEADER_JS)
        shown = [c for c in sorted(header, key=lambda c: header[c]["index"]) if c in content.columns([])]
        work = [c for c in (f"metrics.`{m}`" for m in content.WORK) if c in shown]
        assert shown[:len(work)] == work and work[0] == "metrics.`summary/throughput_samples_per_s`", shown
        assert header[work[0]]["right"] <= 2400, header[work[0]]
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / shot))
    page.evaluate("() => localStorage.clear()")
    page.close()


def test_the_comparison_view_draws_its_charts(store, server, browser):  # noqa: F811
    """Its Chart view: J/sample and throughput per run (bars), active time against GPU energy (a point per
    run), GPU power over time (a line per run), in a section above the ones MLflow adds."""
    from radt_ext.view import link

    client = MlflowClient(store.uri)
    experiment_id = client.get_run(store.baseline).info.experiment_id
    page = browser.new_page()
    page.set_viewport_size({"width": 1600, "height": 1500})
    page.goto(f"{server.url}/#/experiments")
    page.evaluate("() => localStorage.clear()")
    _open_view(page, link(store.uri, experiment_id, ui_url=server.url) + "&compareRunsMode=CHART")
    _close_assistant(page)
    counts = "() => [document.querySelectorAll('.barlayer .point').length, " \
             "document.querySelectorAll('.scatterlayer .points .point').length, " \
             "document.querySelectorAll('.scatterlayer .js-line').length]"
    page.wait_for_function(f"() => {{ const [bars, points, lines] = ({counts})(); "
                           "return bars >= 4 && points >= 2 && lines >= 2; }", timeout=WAIT_MS)
    bars, points, lines = page.evaluate(counts)
    assert bars >= 4 and points >= 2 and lines >= 2  # two runs: two bar charts, a point each, a line each
    body = page.inner_text("body")
    ours = re.search(r"radt-ext comparison\s*\(4\)", body)  # its section, its four charts
    assert ours, body[:3000]
    assert ours.start() < body.index("Model metrics") < body.index("System metrics")
    page.wait_for_timeout(1500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "mlflow_comparison_charts.png"))
    page.evaluate("() => localStorage.clear()")
    page.close()
