"""`radt-ext sweep FILE --executor pack` (or `schedule: pack` in FILE): plan the queue, print the plan
for a dry run, else run it through the packing executor (resume, report and results as any sweep)."""
from __future__ import annotations


from radt_ext.packing import against_plain, explain, profiles
from radt_ext.packing.executor import PackExecutor
from radt_ext.packing.options import PackOptions, sharing_modes
from radt_ext.packing.planner import Planner
from radt_ext.packing.queue import job_variants, jobs_of
from radt_ext.store.client import connect, tracking_uri
from radt_ext.store.fresh_store import not_made
from radt_ext.sweep import console as out
from radt_ext.sweep.executor import execute, key, resume_state
from radt_ext.sweep.lanes import pool_of
from radt_ext.sweep.spec import Sweep
from radt_ext.sweep.variant_run import Outcome


def options_of(sweep: Sweep) -> PackOptions:
    if sweep.pack is not None:
        return sweep.pack
    return PackOptions(modes=sharing_modes([m for g in sweep.groups for m in g.modes], f"{sweep.source}: modes"))


def _store_state(uri: str, variants, console, model: str | None = None, pairs_from: tuple[str, ...] = ()):
    """(knowledge, {variant key: run id} done alone, the newest plain pass of the jobs or None) for a dry
    run, which never creates a store; profiles measured on `model` (the pool's GPU model) first."""
    from radt_ext.packing.profiles import Knowledge

    try:
        if not_made(uri):
            profiles.check_sources(None, pairs_from, variants[0].experiment)
            return Knowledge(), {}, None
        client = connect(uri)
        done, _ = resume_state(client, variants)
        experiment = variants[0].experiment
        known = profiles.read_with(client, experiment, pairs_from, model)
        return known, done, against_plain.find(client, experiment, variants)
    except profiles.NoPairsSource:
        raise
    except Exception as exc:  # a dry run works without a reachable store
        console.print(f"{(str(exc).strip() or type(exc).__name__).splitlines()[0][:300]}; "
                      "the plan uses no stored profile", highlight=False, soft_wrap=True)
        return Knowledge(), {}, None


def dry_run(sweep: Sweep, console, uri: str | None = None, output: str = "table") -> list[Outcome]:
    variants = job_variants(sweep)
    opts = options_of(sweep)
    uri = tracking_uri(uri)
    pool = pool_of(variants)
    knowledge, done, plain = _store_state(uri, variants, console, pool.model(pool.devices), opts.pairs_from)
    outcomes, todo = [], []
    for v in variants:
        run_id = done.get(key(v)) or knowledge.packed_done.get(v.hash)
        if run_id:
            outcomes.append(Outcome(v, "SKIPPED", run_id))
        else:
            todo.append(v)
            outcomes.append(Outcome(v, "PLANNED"))
    if todo:
        plan = Planner(knowledge, opts, gpu_mode_ok="cpu" not in pool.devices).plan(jobs_of(todo), pool.devices)
        out.show(explain.plan_table(plan), console, output)
        console.print(explain.totals_line(plan, plain), highlight=False, soft_wrap=True)
        for v in todo:
            console.print(f"    {jobs_of([v])[0].name}: {' '.join(v.workloads[0].command)}", highlight=False,
                          soft_wrap=True)
    return outcomes


def run(sweep: Sweep, dry: bool = False, uri: str | None = None, console=None, pool=None,
        output: str = "table") -> list[Outcome]:
    console = console or out.console()
    if dry:
        return dry_run(sweep, console, uri, output)
    opts = options_of(sweep)
    variants = job_variants(sweep)
    if opts.pairs_from:  # a name the store lacks, said before anything runs, jobs to run or not
        uri = tracking_uri(uri)
        profiles.check_sources(None if not_made(uri) else connect(uri), opts.pairs_from, variants[0].experiment)
    executor = PackExecutor(opts, pool=pool)
    return execute(variants, uri=uri, console=console, executor=executor)
