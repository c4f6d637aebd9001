"""`radt-ext compare RUN_ID... | --experiment NAME | --filter EXPR [--baseline RUN] [--html FILE] [--output csv|json]`."""
from __future__ import annotations

import sys

import click

from radt_ext.errors import UsageError


@click.command()
@click.argument("run_ids", nargs=-1)
@click.option("--experiment", "-e", default=None, help="compare the runs of this experiment (name or id)")
@click.option("--filter", "filter_string", default=None,
              help="MLflow search filter, e.g. \"tags.variant = 'amp'\"")
@click.option("--baseline", "-b", default=None,
              help="run id to divide by (default: the run named by the runs' baseline_run_id tag, else the first)")
@click.option("--metric", "-m", "metrics", multiple=True,
              help="metric to show (summary/ may be left out); repeatable; default: every summary/* metric")
@click.option("--per-run", is_flag=True,
              help="every run a column of its own (default: repeats of one setting are one column: mean ± 95 % "
                   "interval)")
@click.option("--output", "-o", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True,
              help="table: for people (a plain table when stdout is not a terminal); csv, json: one record per "
                   "metric and setting, for scripts")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="also write the comparison as a self-contained HTML report")
def compare(run_ids, experiment, filter_string, baseline, metrics, per_run, output, html_file):
    """Runs side by side: each metric as a ratio to a baseline run; repeats of a setting as their mean and
    95 % interval, a difference within the noise marked."""
    from rich.console import Console

    from radt_ext.compare.render import caption, html_report, plain_table, records, rich_table
    from radt_ext.compare.select import pick_baseline, select_runs
    from radt_ext.compare.table import compare_runs
    from radt_ext.report.tables import emit
    from radt_ext.store.client import connect, tracking_uri

    uri = tracking_uri()
    client = connect(uri)
    runs = select_runs(client, run_ids, experiment, filter_string)
    base, how = pick_baseline(client, runs, baseline)
    comp = compare_runs(runs, base, how, list(metrics) or None, per_run=per_run)
    if not comp.metrics:
        raise UsageError("the selected runs have no summary/* metrics to compare; pick metrics with --metric")
    if output != "table":
        emit(records(comp), output)
    elif sys.stdout.isatty():
        console = Console(width=max(100, 24 + 22 * len(comp.runs)))
        console.print(caption(comp), soft_wrap=True, highlight=False)
        console.print(rich_table(comp))
    else:  # a file or a pipe: every column whole
        click.echo(caption(comp))
        click.echo(plain_table(comp).text(), nl=False)
    if html_file:
        with open(html_file, "w", encoding="utf-8") as fh:
            fh.write(html_report(comp, client))
        click.echo(f"radt-ext: comparison written to {html_file}", err=True)
