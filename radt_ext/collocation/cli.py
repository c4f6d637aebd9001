"""`radt-ext collocate`: run workloads together on one GPU as one parent run with child runs."""
from __future__ import annotations

import shlex
import sys

import click

from radt_ext.collocation.group import run_group
from radt_ext.collocation.modes import MODES, Group, Workload
from radt_ext.errors import UsageError
from radt_ext.run.progress_env import no_progress_here
from radt_ext.store.client import tracking_uri
from radt_ext.view import link_line


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--mode", "-m", type=click.Choice(MODES), default="naive", show_default=True)
@click.option("--workload", "-w", "workloads", multiple=True, required=True,
              help='a command line, quoted; repeat for each workload, e.g. -w "python a.py --bs 64"')
@click.option("--name", "names", multiple=True, help="a name per workload, in order (default w0, w1, ...)")
@click.option("--device", "-d", default="0", show_default=True, help="GPU index or GPU-<uuid> (cpu: no GPU)")
@click.option("--listeners", "-l", default=None, help="device-level listeners on the parent run")
@click.option("--child-listeners", default=None, help="per-workload listeners (default: top,gpu_procs)")
@click.option("--interval", "-i", type=float, default=None)
@click.option("--experiment-name", default=None)
@click.option("--run-name", default=None)
@click.option("--mps-thread-percentage", type=click.IntRange(1, 100), multiple=True,
              help="CUDA_MPS_ACTIVE_THREAD_PERCENTAGE: one value for all, or one per workload")
@click.option("--mps-mem-limit", multiple=True, help="pinned device memory limit such as 20G: one, or one per workload")
@click.option("--mig", "migs", multiple=True, help="MIG profile (3g.71gb) or MIG-<uuid>: one, or one per workload")
@click.option("--allow-mig-reconfigure", is_flag=True, help="create missing MIG instances (prints the plan first)")
@click.option("--no-progress", is_flag=True, help="do not count the workloads' samples, steps and epochs through "
              "the start-up hook (also RADT_EXT_NO_PROGRESS=1)")
def collocate(mode, workloads, names, device, listeners, child_listeners, interval, experiment_name, run_name,
              mps_thread_percentage, mps_mem_limit, migs, allow_mig_reconfigure, no_progress):
    """Run several workloads together (or one after another: --mode exclusive) on one GPU."""
    if no_progress:
        no_progress_here()
    n = len(workloads)

    def per(values, what):
        if not values:
            return [None] * n
        if len(values) == 1:
            return list(values) * n
        if len(values) != n:
            raise UsageError(f"{what}: give one value or one per workload ({n}), not {len(values)}")
        return list(values)

    names = per(names, "--name") if names else [f"w{i}" for i in range(n)]
    threads, limits, mig = per(mps_thread_percentage, "--mps-thread-percentage"), per(mps_mem_limit, "--mps-mem-limit"), per(migs, "--mig")
    items = []
    for i, line in enumerate(workloads):
        try:
            command = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"--workload {line!r}: {exc}") from None
        items.append(Workload(names[i], command, device=device, mps_thread_percentage=threads[i],
                              mps_pinned_mem_limit=limits[i], mig=mig[i]))
    group = Group(mode=mode, workloads=items, experiment_name=experiment_name, run_name=run_name,
                  listeners=listeners, child_listeners=child_listeners, interval=interval,
                  allow_mig_reconfigure=allow_mig_reconfigure)
    result = run_group(group, echo=lambda m: click.echo(m, err=True))
    for c in result.children:
        click.echo(f"radt-ext: {c.name} {c.status} (exit {c.returncode}) run {c.run_id}", err=True)
    click.echo(f"radt-ext: group {result.status}, makespan {result.makespan_s:.2f} s", err=True)
    if result.experiment_id is not None:
        click.echo(link_line(tracking_uri(group.tracking_uri), result.experiment_id), err=True)
    sys.exit(result.exit_code)
