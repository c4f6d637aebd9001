"""The MLflow UI's System metrics tab of a long multi-GPU run on PostgreSQL: time to the first charts,
with the store's default shape and with the full rate (`--full-rate-store`, what every run stored
before the shape).

    python -m benchmarks.store.store_ui --out docs/benchmarks/cpu/store_ui --hours 1 --gpus 8

A synthetic training run (benchmarks/store/synthetic_run.py: the default listeners' metrics and rates, 8 GPUs,
one hour) goes through radt-ext's own path to the store (radt_ext/store/run_points.py: the point filter,
then the shape or every point) into a database of a throwaway PostgreSQL cluster (tests/servers.py),
loaded with COPY, then VACUUM ANALYZE (what autovacuum does on a server soon after; without it the
planner works from an empty table's statistics). A real `mlflow server` serves it; Debian's chromium, driven by
Playwright, opens each run's System metrics tab: the time from the request to the first chart with its
line drawn, and to every chart of the first screen drawn; then the search box narrowed to GPU 0's power
(the largest timelines: 50 Hz) until those charts are drawn; with the metric-history requests' times and
sizes; three times each (a fresh page each time, the two runs in turn).
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from benchmarks.common import fmt, spread, table, write_results

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LINE = ".scatterlayer .trace path.js-line"
PANEL = ".js-plotly-plot"
DRAWN = f"{PANEL} {LINE}"
POWER = "gpu0_power_w"  # the search: its charts are these
POWER_KEYS = ("gpu0_power_w", "smi_gpu0_power_w")


def record(pg, dbname: str, client, experiment_id: str, name: str, full_rate: bool, hours: float, gpus: int) -> dict:
    """One synthetic run: its readings through RunPoints (the point filter, then the shape or every point);
    the rows that path hands the writer are loaded with PostgreSQL's COPY (the load's speed is not
    what is measured here), with each metric's latest value."""
    import io

    import psycopg2

    from benchmarks.store.synthetic_run import points
    from radt_ext.store.run_points import RunPoints

    run = client.create_run(experiment_id, run_name=name)
    run_id = run.info.run_id
    conn = psycopg2.connect(host=pg.host, port=pg.port, user=pg.user, password=pg.password, dbname=dbname)
    buf, count, latest = io.StringIO(), [0], {}

    def load() -> None:
        buf.seek(0)
        with conn.cursor() as cur:
            cur.copy_expert("COPY metrics (key, value, timestamp, run_uuid, step, is_nan) FROM STDIN", buf)
        buf.seek(0)
        buf.truncate()

    def emit(key, value, ts, step):
        buf.write(f"{key}\t{value!r}\t{ts}\t{run_id}\t{step}\tf\n")
        count[0] += 1
        if (step, ts, value) > latest.get(key, (-1, -1, 0.0)):
            latest[key] = (step, ts, value)
        if count[0] % 200_000 == 0:
            load()

    t0 = run.info.start_time / 1000.0
    start = time.perf_counter()
    rp = RunPoints(emit, full_rate=full_rate)
    readings = 0
    for key, value, ts, step in points(hours * 3600, gpus, t0):
        rp.add(key, value, ts, step)
        readings += 1
    rp.flush()
    load()
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO latest_metrics (key, value, timestamp, step, is_nan, run_uuid) "
                        "VALUES (%s, %s, %s, %s, false, %s)",
                        [(k, v, ts, step, run_id) for k, (step, ts, v) in latest.items()])
    conn.commit()
    conn.close()
    rp.timeline.discard()
    client.set_terminated(run_id, "FINISHED", end_time=int((t0 + hours * 3600) * 1000))
    client.set_tag(run_id, "radt_ext.store_shape", rp.tags()["radt_ext.store_shape"])
    return {"run_id": run_id, "readings": readings, "rows": count[0], "write_s": time.perf_counter() - start}


def analyze(pg, dbname: str) -> None:
    """VACUUM ANALYZE the metric tables, as PostgreSQL's autovacuum does on a server soon after a load."""
    import psycopg2

    conn = psycopg2.connect(host=pg.host, port=pg.port, user=pg.user, password=pg.password, dbname=dbname)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute("VACUUM ANALYZE metrics")
            cur.execute("VACUUM ANALYZE latest_metrics")
    finally:
        conn.close()


def open_tab(context, url: str, timeout_ms: int) -> dict:
    """One load of the tab: seconds to the first chart with its line, to every chart of the first screen,
    and the metric-history requests the page made meanwhile (MLflow's get-history-bulk-interval: count,
    median and largest time to the response's end, bytes)."""
    page = context.new_page()
    history = []
    page.on("requestfinished", lambda req: history.append(req) if "get-history-bulk-interval" in req.url else None)
    start = time.perf_counter()
    page.goto(url)
    page.wait_for_selector(DRAWN, state="attached", timeout=timeout_ms)
    first = time.perf_counter() - start
    # every chart panel the first screen holds, each with its line
    page.wait_for_function(
        """([panel, line]) => {
             const visible = [...document.querySelectorAll(panel)].filter(p => {
               const r = p.getBoundingClientRect(); return r.bottom > 0 && r.top < window.innerHeight; });
             return visible.length > 0 && visible.every(p => p.querySelector(line));
           }""", arg=[PANEL, LINE], timeout=timeout_ms)
    screen = time.perf_counter() - start
    charts = page.locator(PANEL).count()
    times = sorted(req.timing["responseEnd"] for req in history)
    size = sum(req.sizes()["responseBodySize"] for req in history)
    # the biggest timeline: the search box narrowed to GPU 0's power (the 50 Hz driver samples, and smi's)
    seen = len(history)
    t = time.perf_counter()
    page.get_by_placeholder("Search metric charts").fill(POWER)
    wanted = {quote(f"system/{key}", safe="") for key in POWER_KEYS}
    while not wanted <= {w for req in history[seen:] for w in wanted if w in req.url}:  # both series' data came
        if time.perf_counter() - t > timeout_ms / 1000:
            raise TimeoutError(f"no history of {POWER_KEYS} within {timeout_ms / 1000:g} s")
        page.wait_for_timeout(20)
    page.wait_for_function(
        """([panel, line, limit]) => {
             const all = [...document.querySelectorAll(panel)];
             return all.length > 0 && all.length <= limit && all.every(p => p.querySelector(line));
           }""", arg=[PANEL, LINE, len(POWER_KEYS)], timeout=timeout_ms)
    power = time.perf_counter() - t
    power_times = sorted(req.timing["responseEnd"] for req in history[seen:])
    return {"first_chart_s": first, "first_screen_s": screen, "charts_in_dom": charts,
            "history_requests": len(times), "history_median_ms": times[len(times) // 2] if times else None,
            "history_max_ms": times[-1] if times else None, "history_bytes": size,
            "power_charts_s": power, "power_history_max_ms": power_times[-1] if power_times else None,
            "power_history_bytes": sum(req.sizes()["responseBodySize"] for req in history[seen:]), "page": page}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=300.0, help="per page load")
    parser.add_argument("--shots", default=None, help="directory for a screenshot of each tab")
    args = parser.parse_args(argv)

    from mlflow.tracking import MlflowClient
    from playwright.sync_api import sync_playwright

    from tests.servers import start_mlflow_server, start_postgres

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("chromium is not installed (Debian: apt-get install -y chromium)")
    pg = start_postgres()
    work = Path(tempfile.mkdtemp(prefix="radt-store-ui-"))
    results = {"hours": args.hours, "gpus": args.gpus, "runs": {}}
    try:
        uri = pg.create_database("store_ui")
        client = MlflowClient(uri)
        exp = client.create_experiment("store-ui")
        for shape, full in (("default", False), ("full_rate", True)):
            label = f"synthetic {args.gpus}-GPU {args.hours:g} h ({shape})"
            results["runs"][shape] = record(pg, "store_ui", client, exp, label, full, args.hours, args.gpus)
            print(shape, {k: v for k, v in results["runs"][shape].items() if k != "run_id"}, flush=True)
        analyze(pg, "store_ui")  # a server's database has its planner statistics; a fresh load has none yet
        server = start_mlflow_server(uri, work / "server")
        profile = tempfile.mkdtemp(prefix="radt-chromium-")
        try:
            with sync_playwright() as p:
                context = p.chromium.launch_persistent_context(profile, executable_path=exe, headless=True, args=FLAGS,
                                                               viewport={"width": 1400, "height": 1000})
                # the UI keeps its view state (the search box's text among it) in the browser's storage: cleared
                # before every page, so each load starts from the same tab
                context.add_init_script("try { localStorage.clear(); sessionStorage.clear(); } catch (e) {}")
                warm = context.new_page()  # the UI's scripts into the browser's cache: not counted
                warm.goto(f"{server.url}/#/experiments/{exp}")
                warm.wait_for_timeout(3000)
                warm.close()
                for i in range(args.repeats):  # the shapes in turn, so both see the same machine
                    order = list(results["runs"].items())
                    for shape, run in (order if i % 2 == 0 else order[::-1]):
                        url = f"{server.url}/#/experiments/{exp}/runs/{run['run_id']}/system-metrics"
                        loads = run.setdefault("loads", [])
                        try:
                            got = open_tab(context, url, int(args.timeout_s * 1000))
                        except Exception as exc:  # a timeout is a result too
                            loads.append({"error": str(exc).splitlines()[0]})
                            continue
                        page = got.pop("page")
                        if args.shots and i == 0:
                            Path(args.shots).mkdir(parents=True, exist_ok=True)
                            page.screenshot(path=str(Path(args.shots) / f"store_ui_{shape}.png"))
                        page.close()
                        loads.append(got)
                        print(shape, got, flush=True)
                context.close()
        finally:
            shutil.rmtree(profile, ignore_errors=True)
            server.stop()
    finally:
        pg.stop()
        shutil.rmtree(work, ignore_errors=True)

    rows = []
    for shape, run in results["runs"].items():
        ok = [x for x in run.get("loads", []) if "error" not in x]
        first, screen = spread([x["first_chart_s"] for x in ok]), spread([x["first_screen_s"] for x in ok])
        request = spread([x["history_median_ms"] for x in ok if x.get("history_median_ms") is not None])
        slowest = spread([x["history_max_ms"] for x in ok if x.get("history_max_ms") is not None])
        size = spread([x["history_bytes"] / max(1, x["history_requests"]) for x in ok if x.get("history_requests")])
        power = spread([x["power_charts_s"] for x in ok])
        power_ms = spread([x["power_history_max_ms"] for x in ok if x.get("power_history_max_ms") is not None])
        run["first_chart_s"], run["first_screen_s"], run["history_ms"] = first, screen, request
        run["power_charts_s"], run["power_history_max_ms"] = power, power_ms
        fails = len(run.get("loads", [])) - len(ok)
        rows.append([shape, f"{run['rows']:,}", fmt(run["rows"] / (args.hours * 3600) / args.gpus),
                     fmt(first["median"]), fmt(screen["median"]), fmt(request["median"], 0), fmt(slowest["median"], 0),
                     fmt(size["median"] / 1000, 1), fmt(power["median"]), fmt(power_ms["median"], 0),
                     f"{len(ok)}/{len(run.get('loads', []))}"
                     + (f" ({fails} past {args.timeout_s:g} s)" if fails else "")])
    md = ["### The System metrics tab of a long multi-GPU run on PostgreSQL", "",
          f"The System metrics tab of a synthetic {args.gpus}-GPU, {args.hours:g}-hour run on PostgreSQL, opened in "
          "headless Chromium through `mlflow server` (median of the loads):", "",
          table(["store shape", "system rows", "rows/s per GPU", "first chart (s)", "first screen of charts (s)",
                 "history request, median (ms)", "slowest history request (ms)", "KB per history request",
                 f"search `{POWER}`: charts drawn (s)", "its slowest history request (ms)", "loads"], rows)]
    write_results(args.out, "store_ui", results, "\n".join(md))


if __name__ == "__main__":
    main()
