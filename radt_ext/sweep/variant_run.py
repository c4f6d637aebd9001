"""Run one variant of a plan: find its exclusive baselines in the store, build its collocation group,
apply its host settings (restored after it, by a watchdog if radt-ext is killed), run it. The one body
every executor runs (a local lane, a Slurm job on the node Slurm picked)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from radt_ext.collocation.group import GroupRunner
from radt_ext.collocation.modes import Group
from radt_ext.errors import UsageError
from radt_ext.run.watchdog import Watchdog
from radt_ext.sweep.plan import Variant


@dataclass
class Outcome:
    variant: Variant
    status: str  # FINISHED / FAILED / KILLED / SKIPPED (done before) / REFUSED / PLANNED (dry run)
    run_id: str | None = None
    summary: dict[str, float] = field(default_factory=dict)
    exit_code: int = 0
    device: str = ""  # the device(s) it ran on (a pooled variant's are chosen at dispatch)


def check_devices(variants: list[Variant]) -> None:
    """A one-line UsageError, before anything runs, for a GPU of the variants that this machine lacks."""
    from radt_ext.collocation.group import check_devices as check

    check([d for v in variants for d in (v.pool or [w.device for w in v.workloads])], where="devices:")


def experiment_ids(client, name: str) -> list[str]:
    exp = client.get_experiment_by_name(name)
    return [exp.experiment_id] if exp is not None and exp.lifecycle_stage == "active" else []


def baseline(client, experiment: str, workload_key: str, model: str | None = None) -> tuple[str, float] | None:
    """The latest FINISHED exclusive run of the workload; with `model`, one measured on that GPU model
    (any device of a pool)."""
    ids = experiment_ids(client, experiment)
    if not ids:
        return None
    query = (f"tags.`sweep.workload_hash` = '{workload_key}' and "
             "tags.`collocation.mode` = 'exclusive' and attributes.status = 'FINISHED'")
    if model:
        query += " and tags.`sweep.gpu_model` = '{}'".format(model.replace("'", "''"))
    runs = client.search_runs(ids, query, order_by=["attributes.start_time DESC"], max_results=1)
    for r in runs:
        duration = r.data.metrics.get("summary/e2e_duration_s", r.data.metrics.get("summary/duration_s"))
        if duration:
            return r.info.run_id, duration
    return None


def baselines_of(client, v: Variant, model: str | None = None) -> dict[str, tuple[str, float]]:
    """{workload name: (run id, duration s)} of the latest FINISHED exclusive run of each workload
    (same command, device and env; for a pooled variant, same pool and GPU model) in the variant's
    experiment; none for exclusive variants."""
    found = {}
    if v.mode != "exclusive":
        for w in v.workloads:
            b = baseline(client, v.experiment, w.key, model if v.pool else None)
            if b:
                found[w.name] = b
    return found


def runner_for(client, v: Variant, uri: str, supersedes: str | None = None, echo=print,
               tags: dict[str, str] | None = None, device_map: dict[str, str] | None = None,
               devices: list[str] | None = None, model: str | None = None) -> GroupRunner:
    """`device_map` moves workloads to other devices (a Slurm job's allocated GPUs) and `devices` puts a
    pooled variant's workloads on the devices it was given (its CUDA_VISIBLE_DEVICES, its listeners),
    without touching the variant: its `sweep.hash` stays the plan's. `model`: those devices' GPU model,
    a tag its exclusive runs are found by."""
    return GroupRunner(group_for(client, v, uri, supersedes, tags, device_map, devices, model), echo=echo)


def group_for(client, v: Variant, uri: str, supersedes: str | None = None, tags: dict[str, str] | None = None,
              device_map: dict[str, str] | None = None, devices: list[str] | None = None,
              model: str | None = None) -> Group:
    """The variant's collocation group placed on its devices (runner_for's arguments)."""
    group = v.group(baselines_of(client, v, model), uri, devices)
    if supersedes:
        group.tags["sweep.supersedes"] = supersedes
    group.tags.update(tags or {})
    group.tags["sweep.place"] = v.device
    for w in group.workloads:
        w.device = ",".join(devices) if devices else (device_map or {}).get(w.device, w.device)
    group.tags["sweep.device"] = ",".join(group.devices)
    if model:
        group.child_tags["sweep.gpu_model"] = model
    return group


def result_line(v: Variant, result, device: str | None = None) -> str:
    s = result.summary
    where = f" (on {device})" if v.pool and device else ""
    line = f"[{v.index}] {v.title}{where}: {result.status}, makespan {result.makespan_s:.2f} s"
    if "throughput_samples_per_s" in s:
        line += f", {s['throughput_samples_per_s']:.1f} samples/s"
    if "avg_slowdown_ratio" in s:
        line += f", slowdown avg {s['avg_slowdown_ratio']:.2f}"
    return line


def run_variant(client, v: Variant, uri: str, supersedes: str | None = None, echo=print,
                start: Callable[[GroupRunner], bool] | None = None, tags: dict[str, str] | None = None,
                device_map: dict[str, str] | None = None, devices: list[str] | None = None,
                model: str | None = None, runner: GroupRunner | None = None):
    """The variant's Outcome. `start(runner)` is asked first (an executor registers the runner so a
    signal reaches it; False: the sweep is stopping, nothing runs, None comes back). `runner`: one made
    already, its first workload running (head_start.py); it runs whatever `start` says, so that it ends."""
    device = ",".join(devices) if devices else v.device
    try:
        if runner is None:
            runner = runner_for(client, v, uri, supersedes, echo, tags, device_map, devices, model)
            if start is not None and not start(runner):
                return None
            if not v.system:  # its first job starts before its runs are made, as the sweep's first does
                runner.head_start()  # (head_start.py); False: the usual way
        else:  # running already: registered, then run to its end whatever `start` says
            runner.echo = echo
            if supersedes:
                runner.group.tags["sweep.supersedes"] = supersedes
            if start is not None:
                start(runner)
        device = runner.group.tags["sweep.device"]
        result = with_host_settings(client, v, runner, uri, echo) if v.system else runner.run()
    except UsageError as exc:  # refused at run time (e.g. another MPS daemon owns the GPU): the sweep goes on
        echo(f"[{v.index}] {v.title}: REFUSED: {exc}")
        return Outcome(v, "REFUSED", exit_code=2, device=device)
    echo(result_line(v, result, device))
    return Outcome(v, result.status, result.parent_run_id, result.summary, result.exit_code, device)


def with_host_settings(client, v: Variant, runner: GroupRunner, uri: str, echo=print):
    """Run the group with the variant's host settings applied; restored after it whatever happens, and by
    a watchdog (given the restore file before anything changes) when radt-ext is killed outright."""
    from radt_ext.hostsettings.around import HostSettings  # a variant with host settings only
    from radt_ext.hostsettings.base import Where
    from radt_ext.hostsettings.restore import NOTHING

    group = runner.group
    settings = HostSettings(v.system, v.optional, Where(group.devices, f"v{v.index}"))
    path = settings.open()
    try:
        watchdog = Watchdog(None, uri, restore=path)
        runner.on_parent = watchdog.run  # the watchdog ends the group run too, and says there what it restored
    except OSError as exc:  # no process to spare: restored after the variant, or by the next sweep after a kill
        echo(f"[{v.index}] {v.title}: no watchdog for its host settings ({exc.strerror or exc})")
        watchdog = None
    restored: dict[str, str] = {}
    try:
        settings.apply()
        for w in group.workloads:
            w.launch = settings.launch()
            w.env = {**w.env, **settings.env()}
        group.tags.update(settings.tags())
        group.child_tags.update(settings.tags())
        result = runner.run()
    finally:
        final = settings.tags()  # what the kernel told the workload's processes, read before its file goes
        try:
            restored = settings.restore()
        finally:
            if watchdog is not None:
                watchdog.release()
        changed = {k[len("system."):-len(".restored")]: said for k, said in restored.items()
                   if said != NOTHING}
        if changed:
            echo(f"[{v.index}] {v.title}: host settings restored: "
                 + "; ".join(f"{k}: {said}" for k, said in changed.items()))
        if runner.parent_run_id:
            _tag(client, runner.parent_run_id, {**final, **restored})
    return result


def _tag(client, run_id: str, tags: dict[str, str]) -> None:
    """Tags onto a run that may have ended; a store that fails here does not fail the variant."""
    from mlflow.entities import RunTag

    try:
        client.log_batch(run_id, tags=[RunTag(k, str(v)[:5000]) for k, v in tags.items()])
    except Exception as exc:
        print(f"radt-ext: warning: run {run_id} did not get its host settings' tags ({type(exc).__name__})")
