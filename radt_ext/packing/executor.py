"""Run a queue packed: whenever a device of the sweep's pool (radt_ext/sweep/pool.py) frees, read what
the store knows, plan the jobs not started yet, and run the plan's first group there. Each group run
carries its decision and prediction as tags, and the device and GPU model it ran on, as any pooled
variant's run does; a shared group's jobs run on disjoint CPU sets (cpusets.py), and when it ends its
parent says whether it was kept together or split by the guard, and what a split cost.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import replace

from radt_ext.collocation import guard as guard_mod
from radt_ext.collocation.group import GroupRunner
from radt_ext.collocation.modes import CPU, Group
from radt_ext.errors import UsageError
from radt_ext.packing import against_plain, cpusets, explain, profiles
from radt_ext.packing.options import PackOptions
from radt_ext.packing.planner import Decision, Planner
from radt_ext.packing.queue import jobs_of
from radt_ext.run.session import exit_code
from radt_ext.run.signals import SignalRelay, join
from radt_ext.sweep import console as out
from radt_ext.sweep.lanes import pool_of
from radt_ext.sweep.variant_run import Outcome, baseline, group_for, result_line


def group_of(d: Decision, device: str, uri: str, client, max_slowdown: float, model: str | None = None,
             guard: bool = True, cpus: list[list[int]] | None = None) -> Group:
    """The collocation group of a decision on a device; the jobs' own variants keep their hashes.
    `model`: the device's GPU model, the tag exclusive runs are found by across the pool; `guard`: a
    shared group runs with the guard at max_slowdown (collocation/guard.py); `cpus`: each job's CPU set
    (tag `pack.cpus`), applied by PackedGroupRunner."""
    variants = [j.ref for j in d.jobs]
    first = variants[0]
    if len(variants) == 1:  # alone: the job's own exclusive variant, so resume finds it by `sweep.hash`
        group = group_for(client, first, uri, devices=[device], model=model)
        group.workloads[0].tags.update({profiles.JOB_TAG: first.hash, **explain.job_tags(d, 0)})
        group.tags.update(explain.group_tags(d, max_slowdown))
        return group
    workloads, baselines = [], {}
    for i, (job, v) in enumerate(zip(d.jobs, variants)):
        w = v.workloads[0]
        tags = {profiles.JOB_TAG: v.hash, **{f"sweep.param.{k}": x for k, x in v.setting.items()},
                **explain.job_tags(d, i), **({"pack.cpus": cpusets.text(cpus[i])} if cpus else {})}
        workload = w.workload(d.mode, job.name, device, tags, None)
        workload.start_offset_s = d.offset_s(i)
        workload.start_work_left_s = d.work_left_s(i)
        workloads.append(workload)
        # measured on this GPU model where the store has it, else the profile the planner read
        found = baseline(client, v.experiment, w.key, model) or baseline(client, v.experiment, w.key)
        if found:
            baselines[job.name] = found
    names = "+".join(j.name for j in d.jobs)
    tags = {"sweep.id": first.sweep_id, "sweep.group": names, "sweep.device": device,
            **explain.group_tags(d, max_slowdown, guard)}
    child_tags = {"sweep.id": first.sweep_id, **({"sweep.gpu_model": model} if model else {})}
    return Group(mode=d.mode, workloads=workloads, experiment_name=first.experiment,
                 run_name=f"{first.sweep_id}:pack {d.mode} {names} on {device}", listeners=first.listeners,
                 child_listeners=first.child_listeners, interval=first.interval, tags=tags,
                 child_tags=child_tags, tracking_uri=uri, baselines=baselines,
                 guard_slowdown=max_slowdown if guard else None)


class PackedGroupRunner(GroupRunner):
    """A shared group whose jobs each run on their own CPU set, applied the moment each has started."""

    def __init__(self, group: Group, cpus: list[list[int]] | None = None, echo=print):
        super().__init__(group, echo=echo)
        self.cpus = {w.name: c for w, c in zip(group.workloads, cpus)} if cpus else {}

    def _start(self, s, result, t0: float) -> bool:
        started = super()._start(s, result, t0)
        want = self.cpus.get(result.name)
        if started and want:
            got = cpusets.apply(guard_mod.tree_pids(s.proc, getattr(s, "tree", None)), want)
            if got != sorted(want):
                self.echo(f"radt-ext: {result.name}: CPU set {cpusets.text(want)} not applied (it has "
                          f"{cpusets.text(got) or 'ended'})")
                with contextlib.suppress(Exception):
                    self.client.set_tag(s.run_id, "pack.cpus", f"not applied: {cpusets.text(got) or 'ended'}")
        return started


def outcome_tags(d: Decision, guard, bound: float) -> dict[str, str]:
    """Whether a shared group ran as planned or the guard split it, and the seconds the splits cost (each
    protected job's time beside the others less what its work then took alone); its basis as planned
    beside it (what was measured side by side is what the next plan reads back)."""
    if guard is None or len(d.jobs) < 2:
        return {}
    overs = [e for e in guard.events if e.action == "over"]
    kept = [e for e in guard.events if e.action == "kept"]
    if not overs:
        live = [guard.state[n].live_max for n in guard.state if guard.state[n].live_max not in (None, float("inf"))]
        top = f" (highest live {max(live):.2f})" if live else ""
        ran = f"; {len(kept)} times beyond it, let run on as cheaper than a pause" if kept else ""
        return {"pack.outcome": f"as planned: no pause{top}{ran}", "pack.lost_s": "0"}
    splits = "; ".join(f"{e.t - guard.t0:.1f}s {e.name} live {e.live_slowdown:.2f} > {bound:g} ({e.why})"
                       for e in overs)
    return {"pack.outcome": f"split: {splits}", "pack.lost_s": f"{guard.lost_s():.2f}"}


GPU_FIGURES = ("energy_per_sample_j", "gpu_mean_avg_sm_active_pct", "gpu_total_energy_j", "gpu_total_avg_power_w")


def job_summary(result, child) -> dict[str, float]:
    """A job's row in the sweep's results: its own figures, its wall time as its makespan, its own
    slowdown; the GPU's figures (from the group's run) only where it had the GPU to itself."""
    out = dict(child.summary)
    wall = child.summary.get("e2e_duration_s") or ((child.ended - child.started) if child.ended else None)
    if wall is not None:
        out["makespan_s"] = wall
    if child.slowdown is not None:
        out["avg_slowdown_ratio"] = child.slowdown
    if len(result.children) == 1:
        out.update({k: result.summary[k] for k in GPU_FIGURES if k in result.summary and k not in out})
    return out


class PackExecutor:
    name = "pack"
    local = True  # the pool's devices are checked before anything runs (sweep.executor.check_devices)

    def __init__(self, options: PackOptions, pool=None):
        self.options = options
        self.pool = pool  # a radt_ext.sweep.pool.DevicePool; default: the one over the jobs' pool
        self._lock = threading.Lock()
        self._active: dict[str, GroupRunner | None] = {}
        self.stopping: int | None = None
        self._error: BaseException | None = None
        self._ended = 0  # groups ended so far: a plan made before the last one ended is stale
        self.plain = None  # the newest plain pass of these jobs in the store (against_plain.py)
        self._ran: list[against_plain.Ran] = []

    def stop(self, signum: int) -> None:
        with self._lock:
            self.stopping = self.stopping or signum
            runners = list(self._active.values())
        for r in runners:
            if r is not None:
                r.stop(signum)

    def _halted(self) -> bool:
        return bool(self.stopping or self._error is not None)

    def planner(self, knowledge: profiles.Knowledge) -> Planner:
        return Planner(knowledge, self.options, gpu_mode_ok=CPU not in self.pool.devices)

    def run(self, todo, ctx) -> list[Outcome]:
        outcomes: dict[int, Outcome] = {}
        experiment = todo[0].experiment
        self.pool = self.pool or pool_of(todo)
        model = self.pool.model(self.pool.devices)  # None on a pool of mixed (or unknown) GPU models
        # what pack.pairs_from's experiments measured does not change while this runs: read once
        others = profiles.measured_in(ctx.client, self.options.pairs_from, model, own=experiment)
        # the first plan's too: nothing has run since
        known = profiles.with_measured(profiles.read(ctx.client, experiment, model), others)
        self.plain = against_plain.find(ctx.client, experiment, todo)
        done = known.packed_done
        remaining = []
        for v in todo:
            if v.hash in done:
                ctx.console.print(f"[{v.index}] {v.title}: FINISHED before in a packed group (run {done[v.hash]}), "
                                  "skipped", highlight=False)
                outcomes[v.index] = Outcome(v, "SKIPPED", done[v.hash])
            else:
                remaining.append(v)
        threads: list[threading.Thread] = []
        planned, planned_at = [], 0
        with out.progress(ctx.console) as progress, SignalRelay(self.stop):
            task = progress.add_task("pack", total=len(remaining))
            echo = lambda m: progress.console.print(m, highlight=False, soft_wrap=True)  # noqa: E731
            while remaining and not self._halted():
                got = self.pool.acquire(1, stopping=self._halted)  # wakes often: signals reach the main thread
                if got is None:
                    break
                device = got[0]
                with self._lock:
                    if self._halted():
                        self.pool.release(got)
                        break
                    if not planned or self._ended != planned_at:  # the store learned something: plan again
                        planned_at = self._ended
                        if known is None:
                            known = profiles.with_measured(profiles.read(ctx.client, experiment, model), others)
                        planned = self.planner(known).plan(
                            jobs_of(remaining), self.pool.devices,
                            free=len(self.pool.devices) - len(self._active)).decisions
                        known = None  # the next plan reads what the store has learned by then
                    d = planned.pop(0)
                    taken = {id(j.ref) for j in d.jobs}
                    remaining = [v for v in remaining if id(v) not in taken]
                    self._active[device] = None  # taken: a later plan counts this GPU busy
                echo(f"gpu {device}: {d.summary}: {d.reason}")
                t = threading.Thread(target=self._run_group,
                                     args=(d, device, self.pool.model([device]), ctx, echo, progress, task, outcomes),
                                     name=f"radt-pack-{device}", daemon=True)
                threads.append(t)
                t.start()
            for t in threads:
                join(t, 0.2)
        if self._error is not None:
            raise self._error
        self._against_plain(ctx, todo[0])
        return [outcomes[i] for i in sorted(outcomes)]

    def _against_plain(self, ctx, first) -> None:
        if self.plain is None or not self._ran:
            return
        from radt_ext.sweep import report as sweep_report

        try:
            report = sweep_report.report_run(ctx.client, first.sweep_id, first.experiment)
        except Exception:
            report = None
        line = against_plain.ended(ctx.client, self.plain, self._ran, report)
        if line:
            ctx.console.print(line, highlight=False, soft_wrap=True)

    def _run_group(self, d: Decision, device: str, model, ctx, echo, progress, task, outcomes) -> None:
        variants = [j.ref for j in d.jobs]
        try:
            cpus = None
            if len(d.jobs) > 1 and self.options.cpu_sets:
                cpus, why = cpusets.assign(device, self.pool.devices, [j.profile.cpu_pct if j.profile else None
                                                                       for j in d.jobs])
                if why:
                    echo(f"gpu {device}: {d.summary}: {why}")
            group = group_of(d, device, ctx.uri, ctx.client, self.options.max_slowdown, model, self.options.guard,
                             cpus)
            runner = PackedGroupRunner(group, cpus, echo=echo)
            with self._lock:
                if self._halted():
                    return
                self._active[device] = runner
            try:
                runner.head_start()  # an exclusive group's job starts before its runs are made (else False)
                result = runner.run()
            except UsageError as exc:  # refused at run time (another MPS daemon owns the GPU): the queue goes on
                echo(f"gpu {device}: {d.summary}: REFUSED: {exc}")
                for v in variants:
                    outcomes[v.index] = Outcome(replace(v, mode=d.mode), "REFUSED", exit_code=2, device=device)
                return
            tags = outcome_tags(d, runner.guard, self.options.max_slowdown)
            if tags:
                with contextlib.suppress(Exception):
                    for k, v in tags.items():
                        ctx.client.set_tag(result.parent_run_id, k, v[:5000])
                echo(f"gpu {device}: {d.summary}: {tags['pack.outcome']}")
            shown = replace(variants[0], mode=d.mode, device=device, pool=[], label="+".join(j.name for j in d.jobs))
            echo(result_line(shown, result))
            for job, v, child in zip(d.jobs, variants, result.children):
                code = exit_code(child.returncode or 0) or (result.exit_code if child.status != "FINISHED" else 0)
                summary = job_summary(result, child)
                outcomes[v.index] = Outcome(replace(v, mode=d.mode), child.status, result.parent_run_id,
                                            summary, code, device)
                if child.status == "FINISHED" and summary.get("makespan_s") and child.ended:
                    ran = against_plain.Ran(job.name, against_plain.job_of(v), child.run_id, child.started, child.ended,
                                            summary["makespan_s"])
                    with self._lock:
                        self._ran.append(ran)
                    against_plain.log_job(ctx.client, self.plain, ran)
            for _ in variants:
                progress.advance(task)  # one step a call: rich's and the plain progress alike
            if result.status == "KILLED":
                with self._lock:
                    self.stopping = self.stopping or 15  # a stopped group stops the queue; a re-run resumes
        except BaseException as exc:  # an internal error: nothing new starts, the sweep raises it
            with self._lock:
                if self._error is None:
                    self._error = exc
        finally:
            with self._lock:
                self._active.pop(device, None)
                self._ended += 1
            with contextlib.suppress(Exception):
                self.pool.release([device])
