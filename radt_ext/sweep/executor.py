"""Run a plan: skip what is already FINISHED (by `sweep.hash`), hand the rest to an executor (a pool
of devices or a lane per device here, or Slurm jobs), then rebuild the sweep report. Resume and
reports do not depend on where the variants ran."""
from __future__ import annotations

import contextlib
import difflib
import shlex
from dataclasses import dataclass

from radt_ext import hostsettings
from radt_ext.errors import UsageError
from radt_ext.hostsettings import around
from radt_ext.hostsettings import restore as host_restore
from radt_ext.hostsettings.base import Where
from radt_ext.store.client import connect, experiment_id_for, tracking_uri
from radt_ext.store.fresh_store import not_made
from radt_ext.sweep import console as out
from radt_ext.sweep import report as sweep_report
from radt_ext.sweep.plan import Variant
from radt_ext.sweep.variant_run import Outcome, baseline, check_devices, experiment_ids  # noqa: F401  (imported from here)
from radt_ext import view


def finished_parents(client, experiment: str) -> list:
    """FINISHED parent runs of sweeps in the experiment (tag `sweep.hash`), newest first."""
    ids = experiment_ids(client, experiment)
    if not ids:
        return []
    runs = client.search_runs(ids, "attributes.status = 'FINISHED'", max_results=50000,
                              order_by=["attributes.start_time DESC"])
    return [r for r in runs if r.data.tags.get("sweep.hash")]


def _identity_of_run(tags: dict[str, str]) -> tuple:
    params = tuple(sorted((k[len("sweep.param."):], v) for k, v in tags.items() if k.startswith("sweep.param.")))
    place = tags.get("sweep.place") or tags.get("collocation.gpu")  # a pooled variant's place is the pool
    return (tags.get("sweep.id"), tags.get("sweep.group"), tags.get("collocation.mode"), place,
            tags.get("sweep.repeat"), params, tuple(sorted(hostsettings.asked(tags).items())))


def _identity(v: Variant) -> tuple:
    """Which place of the plan a variant fills, whatever its content (commands, params, listeners)."""
    return (v.sweep_id, v.label, v.mode, v.device, str(v.repeat), tuple(sorted(v.setting.items())),
            tuple(sorted(v.system.items())))


def key(v: Variant) -> tuple[str, str]:
    """A variant's resume key: a FINISHED run counts only in the variant's own experiment."""
    return v.experiment, v.hash


def resume_state(client, variants: list[Variant]) -> tuple[dict[tuple, str], dict[tuple, str]]:
    """One scan of the sweep's experiments: ({key: run id} of variants already FINISHED, {key: run id}
    of variants not done whose place in the plan has a FINISHED run of another content: the spec (a
    param, a recipe default, listeners...) changed since that run). Keys: `key(variant)`."""
    done: dict[tuple, str] = {}
    latest: dict[tuple, tuple[str, str]] = {}
    for exp in {v.experiment for v in variants}:
        for r in finished_parents(client, exp):
            done.setdefault((exp, r.data.tags["sweep.hash"]), r.info.run_id)
            latest.setdefault((exp, _identity_of_run(r.data.tags)), (r.data.tags["sweep.hash"], r.info.run_id))
    changed = {}
    for v in variants:
        hit = latest.get((v.experiment, _identity(v)))
        if key(v) not in done and hit and hit[0] != v.hash:
            changed[key(v)] = hit[1]
    return done, changed


def system_checks(variants: list[Variant]) -> dict[int, dict[str, str]]:
    """{variant index: {key: why this host cannot apply it}} for the variants with host settings it cannot
    apply, on any device of the variant's pool (each setting, value and device checked once)."""
    seen: dict[tuple, str | None] = {}
    out: dict[int, dict[str, str]] = {}
    for v in variants:
        for key, value in v.system.items():
            places = [[d] for d in v.pool] if v.pool and v.gpus == 1 else [v.pool or [w.device for w in v.workloads]]
            for devices in places:
                at = (key, value, tuple(devices))
                if at not in seen:
                    seen[at] = hostsettings.kind(key).check(value, Where(list(devices)))
                if seen[at]:
                    out.setdefault(v.index, {})[key] = seen[at]
                    break
    return out


def check_system(variants: list[Variant], console) -> None:
    """A one-line UsageError, before anything runs, for a host setting this host cannot apply that is not
    optional; a line for each optional one the variants will run without."""
    said = set()
    for index, refused in system_checks(variants).items():
        v = next(x for x in variants if x.index == index)
        for key, reason in refused.items():
            if key not in v.optional:
                raise UsageError(around.refusal(key, v.system[key], reason))
            if (key, v.system[key]) not in said:
                said.add((key, v.system[key]))
                console.print(f"system.{key}: {v.system[key]}: skipped where it runs (optional): {reason}",
                              highlight=False, soft_wrap=True)


def what_changed(client, run_id: str, v: Variant) -> str:
    """A short account of how a variant differs from an earlier FINISHED run of its place in the plan."""
    try:
        kids = client.search_runs([client.get_run(run_id).info.experiment_id],
                                  f"tags.`mlflow.parentRunId` = '{run_id}'", max_results=1000)
    except Exception:
        kids = []
    by_name = {k.data.tags.get("collocation.workload"): k for k in kids}
    notes = []
    for w in v.workloads:
        old = by_name.get(w.name)
        if old is None:
            notes.append(f"{w.name}: not in that run")
            continue
        diffs = [f"{k} {old.data.params.get(k, '(unset)')} → {val}" for k, val in w.params.items()
                 if old.data.params.get(k) != str(val)]
        if not diffs and old.data.tags.get("radt_ext.command") != shlex.join(w.command)[:5000]:
            diffs = [_command_diff(old.data.tags.get("radt_ext.command", ""), w.command)]
        if diffs:
            notes.append(f"{w.name}: " + ", ".join(diffs))
    return "; ".join(notes) or "listeners, interval, env or MPS/MIG settings"


def _command_diff(old: str, new: list[str]) -> str:
    try:
        before = shlex.split(old)
    except ValueError:
        before = old.split()
    ops = difflib.SequenceMatcher(a=before, b=new, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in ops:
        if tag != "equal":
            return f"command {' '.join(before[i1:i2]) or '(nothing)'} → {' '.join(new[j1:j2]) or '(nothing)'}"
    return "command"


def plan_table(variants: list[Variant], done: dict[str, str], changed: dict[str, str] | None = None):
    system = any(v.system for v in variants)  # the column only where the sweep sets host settings
    table = out.table("#", "hash", "mode", "group", "device", "params", *(["system"] if system else []), "rep",
                      "workloads", "state", title="sweep plan")
    for v in variants:
        table.add_row(v.index, v.hash[:10], v.mode, v.label, v.device, _params(v),
                      *([hostsettings.text(v.system)] if system else []), v.repeat, len(v.workloads),
                      "done, skip" if key(v) in done else
                      "spec changed, rerun" if key(v) in (changed or {}) else "to run")
    return table


@dataclass
class Context:
    """What an executor gets besides the variants to run: the store, the console, the variants whose
    place in the plan has a FINISHED run of other content ({key: that run id})."""
    client: object
    uri: str
    console: object
    changed: dict[tuple, str]
    head: object = None  # a HeadStart (head_start.py): the first variant, running already

    def what_changed(self, run_id: str, v: Variant) -> str:
        return what_changed(self.client, run_id, v)


def executor_for(name_or_executor="local"):
    """An executor by name: local (pooled variants on the next free devices, fixed ones a lane per
    device), sequential (one variant at a time), slurm."""
    if not isinstance(name_or_executor, str):
        return name_or_executor
    from radt_ext.sweep.lanes import LocalExecutor

    if name_or_executor == "local":
        return LocalExecutor(parallel=True)
    if name_or_executor == "sequential":
        return LocalExecutor(parallel=False)
    if name_or_executor == "slurm":
        from radt_ext.sweep.slurm import SlurmExecutor

        return SlurmExecutor()
    raise UsageError(f"executor {name_or_executor!r}: use local, sequential or slurm")


def execute(variants: list[Variant], dry_run: bool = False, uri: str | None = None,
            console=None, executor="local", output: str = "table", head=None) -> list[Outcome]:
    """Skip the variants FINISHED before (by `sweep.hash`), run the rest with the executor (see
    `executor_for`; any object with `run(todo, ctx) -> [Outcome]` and optionally `check(uri)` does),
    then rebuild the sweep reports and the means of its repeated settings. A dry run shows the plan
    (`output`: table, csv or json). `head`: the first variant started already (head_start.py; the local
    executors), run whatever the store says."""
    console = console or out.console()
    uri = tracking_uri(uri)
    if dry_run:
        try:
            if not_made(uri):
                raise FileNotFoundError(uri)  # no store yet: nothing done, and a dry run creates none
            done, changed = resume_state(connect(uri), variants)
        except FileNotFoundError:
            done, changed = {}, {}
        except Exception as exc:  # a dry run works without a reachable store
            console.print(f"{(str(exc).strip() or type(exc).__name__).splitlines()[0][:300]}; "
                          "the plan shows no runs as done", highlight=False, soft_wrap=True)
            done, changed = {}, {}
        out.show(plan_table(variants, done, changed), console, output)
        for index, refused in system_checks(variants).items():
            v = next(x for x in variants if x.index == index)
            for k, reason in refused.items():
                what = "skipped (optional)" if k in v.optional else "refused"
                console.print(f"[{index}] system.{k}: {v.system[k]}: {what} on this host: {reason}",
                              highlight=False, soft_wrap=True)
        for v in variants:
            console.print(f"[{v.index}] {v.title}", highlight=False)
            for w in v.workloads:
                console.print(f"    {w.name}: {' '.join(w.command)}", highlight=False, soft_wrap=True)
        return [Outcome(v, "SKIPPED" if key(v) in done else "PLANNED", done.get(key(v))) for v in variants]
    if executor == "local" and hostsettings.host_wide(k for v in variants for k in v.system):
        console.print("the sweep sets the whole host's CPU governor: its variants run one at a time",
                      highlight=False)
        executor = "sequential"
    runner = executor_for(executor)
    if getattr(runner, "local", True):
        if head is None:  # a head start checked them before its job started
            check_devices(variants)  # before the store is touched: nothing is recorded when a device is wrong
        for line in host_restore.leftovers() if any(v.system for v in variants) else []:
            console.print(f"radt-ext: {line}", highlight=False, soft_wrap=True)
        check_system([v for v in variants], console)
    if hasattr(runner, "check"):
        runner.check(uri)  # e.g. Slurm refuses a local store, before anything is recorded
    client = connect(uri)
    done, changed = resume_state(client, variants)
    if head is not None:
        done.pop(key(head.variant), None)  # finished meanwhile by another sweep: this one runs already
    outcomes: list[Outcome] = []
    for v in variants:
        if key(v) in done:
            console.print(f"[{v.index}] {v.title}: FINISHED before (run {done[key(v)]}), skipped", highlight=False)
            outcomes.append(Outcome(v, "SKIPPED", done[key(v)], summary=summary_of(client, done[key(v)])))
    todo = [v for v in variants if key(v) not in done]
    for experiment in dict.fromkeys(v.experiment for v in todo):
        experiment_id = experiment_id_for(client, experiment)  # made here, once: lanes and jobs would race
        # the comparison view, with the sweep's parameters, before the first run ends
        view.refresh_quietly(client, experiment_id, sorted({k for v in todo if v.experiment == experiment
                                                            for k in [*v.setting, *(hostsettings.TAG + s
                                                                                    for s in v.system)]}))
    ctx = Context(client, uri, console, changed, head)
    outcomes += runner.run(todo, ctx) if todo else []
    outcomes.sort(key=lambda o: o.variant.index)
    every: dict[str, list] = {}
    for sweep_id, experiment in dict.fromkeys((v.sweep_id, v.experiment) for v in variants):
        if sweep_id not in every:  # read once: its report, its report run and its means are made from them
            with contextlib.suppress(Exception):  # unread: each reads them itself, and says why it failed
                every[sweep_id] = sweep_report.sweep_runs(client, sweep_id)
        runs = every.get(sweep_id)
        run_id, path = sweep_report.log(client, sweep_id, experiment, runs)
        if path:
            console.print(f"sweep {sweep_id}: report {path} on run {run_id}", highlight=False, soft_wrap=True)
        if run_id:
            means = sweep_report.log_setting_means(client, sweep_id, experiment, run_id, runs)
            if means:
                console.print(f"sweep {sweep_id}: the means of {means} repeated settings on runs under {run_id}",
                              highlight=False, soft_wrap=True)
    return outcomes


def summary_of(client, run_id: str) -> dict[str, float]:
    """A run's summary/* figures (a variant FINISHED before), by today's names; none when it cannot be read."""
    from radt_ext.figures.summary_names import upgrade

    try:
        metrics = client.get_run(run_id).data.metrics
    except Exception:
        return {}
    return upgrade({k[len("summary/"):]: v for k, v in metrics.items() if k.startswith("summary/")}, prefix="")


# the results table's figures: (header, summary key, format)
FIGURES = (("makespan s", "makespan_s", "{:.2f}"), ("active s", "active_s", "{:.2f}"),
           ("start-up %", "startup_share_pct", "{:.0f}"), ("samples/s", "throughput_samples_per_s", "{:.1f}"),
           ("J/sample", "energy_per_sample_j", "{:.4f}"), ("epoch s", "epoch_time_s", "{:.2f}"),
           ("avg SM active %", "gpu_mean_avg_sm_active_pct", "{:.1f}"),
           ("avg slowdown", "avg_slowdown_ratio", "{:.2f}"))
COUNTED = ("FINISHED", "SKIPPED")  # a setting's figures come from its finished runs (now, or before)


def setting_key(v: Variant) -> tuple:
    """The variant's setting: its content but the repeat (a pooled variant's place is the pool)."""
    return (v.sweep_id, v.experiment, v.setting_hash)


def by_setting(outcomes: list[Outcome]) -> list[list[Outcome]]:
    groups: dict[tuple, list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault(setting_key(o.variant), []).append(o)
    return list(groups.values())


def _params(v: Variant) -> str:
    return " ".join(f"{k}={x}" for k, x in v.setting.items())


def results_table(outcomes: list[Outcome]):
    """One row per variant; where the sweep repeats its settings, one row per setting: each figure's mean
    over its finished repeats with its 95 % interval (Student t), ≈ where it lies within the noise of
    the first setting."""
    title = "sweep results (samples/s, J/sample, SM active: over the active phase)"
    figures = [out.Column(header, fmt, key=name) for header, name, fmt in FIGURES]
    groups = by_setting(outcomes)
    system = any(o.variant.system for o in outcomes)  # the column only where the sweep sets host settings
    extra = ["system"] if system else []

    def settings(v: Variant) -> list[str]:
        return [hostsettings.text(v.system)] if system else []

    if all(len(g) == 1 for g in groups):
        table = out.table("#", "mode", "group", "device", "params", *extra, "status", *figures, title=title)
        for o in outcomes:
            v, s = o.variant, o.summary
            table.add_row(v.index, v.mode, v.label, o.device or v.device, _params(v), *settings(v), o.status,
                          *(s.get(name) for _, name, _ in FIGURES))
        return table
    from radt_ext.figures import repeats

    first = groups[0]
    note = (f"a ± b: the mean over a setting's finished repeats and its 95 % interval (Student t); "
            f"{out.NOISE_MARK}: within the noise of the first setting (#{first[0].variant.index})")
    table = out.table("#", "mode", "group", "device", "params", *extra, out.Column("runs"), "status", *figures,
                      title=title.replace("(", "per setting (", 1), note=note)

    def estimate(group, name):
        return repeats.estimate(o.summary.get(name) for o in group if o.status in COUNTED)

    for group in groups:
        v = group[0].variant
        statuses: dict[str, int] = {}
        for o in group:
            statuses[o.status] = statuses.get(o.status, 0) + 1
        devices = ",".join(dict.fromkeys(o.device or o.variant.device for o in group))
        cells = []
        for _, name, _ in FIGURES:
            est = estimate(group, name)
            noise = repeats.noise(estimate(first, name), est) if group is not first else None
            cells.append(out.Stat(est, noise))
        table.add_row(",".join(str(o.variant.index) for o in group), v.mode, v.label, devices, _params(v),
                      *settings(v), len(group),
                      ", ".join(f"{n} {status}" for status, n in statuses.items()), *cells)
    return table
