"""`radt-ext sweep FILE`: a YAML sweep spec or a radT CSV file."""
from __future__ import annotations

import sys

import click


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--dry-run", is_flag=True, help="print the expanded plan and run nothing")
def sweep(file, dry_run):
    """Run every variant of FILE (YAML spec or radT CSV); variants FINISHED before are skipped."""
    from radt_ext import sweep as api

    variants = api.plan(file)  # every check happens here, before any run
    from radt_ext.sweep.console import console as make_console

    console = make_console()
    outcomes = api.run(variants, dry_run=dry_run, console=console)
    if dry_run:
        todo = sum(o.status == "PLANNED" for o in outcomes)
        click.echo(f"{len(variants)} variants, {todo} to run, {len(variants) - todo} done (dry run: nothing ran)")
        return
    from radt_ext.sweep.executor import results_table

    console.print(results_table(outcomes))
    bad = [o for o in outcomes if o.status not in ("FINISHED", "SKIPPED")]
    if len(outcomes) < len(variants) or any(o.status == "KILLED" for o in outcomes):
        sys.exit(next((o.exit_code for o in outcomes if o.status == "KILLED"), 130) or 130)
    sys.exit(1 if bad else 0)
