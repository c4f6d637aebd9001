"""The local executor. Pooled variants (the default `device_mode: pool`) go to a DevicePool: each, in
plan order, waits for its `gpus` free devices of its pool, runs on them on a thread of its own, and
gives them back; every exclusive variant ends before a collocated one starts, so the collocated
ones find their baselines whichever device measured them. Variants fixed to a device
(`device_mode: each`, radT CSV rows) run one lane per device: a lane runs its device's variants one
after another, lanes at the same time. With `parallel=False` one variant runs at a time: the
sequential executor.

SIGINT/SIGTERM stop every lane: the running groups stop their workloads (their runs end KILLED, so a
re-run resumes them) and no lane starts another variant.
"""
from __future__ import annotations

import threading

from radt_ext.run.signals import SignalRelay, join
from radt_ext.sweep import console as out
from radt_ext.sweep.plan import CPU, Variant
from radt_ext.sweep.pool import DevicePool
from radt_ext.sweep.variant_run import Outcome, run_variant


def pool_of(variants: list[Variant]) -> DevicePool:
    """One pool over the devices the pooled variants may use, with their GPU models where NVML answers."""
    from listeners.devices import identities

    devices = list(dict.fromkeys(d for v in variants for d in v.pool))
    models = {d: name for d, (_uuid, name) in identities([d for d in devices if d != CPU]).items()}
    return DevicePool(devices, models)


def lanes_of(variants: list[Variant], parallel: bool = True) -> dict[str, list[Variant]]:
    """{lane: its variants in plan order}: a lane per device, or one lane "all" when not parallel."""
    if not parallel:
        return {"all": list(variants)} if variants else {}
    lanes: dict[str, list[Variant]] = {}
    for v in variants:
        lanes.setdefault(v.device, []).append(v)
    return lanes


def lane_label(lane: str) -> str:
    return lane if lane in (CPU, "all") else f"gpu {lane}"


class LocalExecutor:
    name = "local"
    local = True  # devices are this machine's: checked before anything runs

    def __init__(self, parallel: bool = True):
        self.parallel = parallel
        self._lock = threading.Lock()
        self._active: dict[str, object] = {}  # lane -> its running GroupRunner
        self.stopping: int | None = None
        self._error: BaseException | None = None

    def stop(self, signum: int) -> None:
        with self._lock:
            self.stopping = self.stopping or signum
            runners = list(self._active.values())
        for runner in runners:
            runner.stop(signum)

    def run(self, todo: list[Variant], ctx) -> list[Outcome]:
        pooled = [v for v in todo if v.pool]
        lanes = lanes_of([v for v in todo if not v.pool], self.parallel)
        outcomes: dict[int, Outcome] = {}
        head = getattr(ctx, "head", None)
        if head is not None and not head.taken:
            with self._lock:
                self._active["head"] = head.runner  # a stop reaches its running workload before its turn
        with out.progress(ctx.console) as progress, SignalRelay(self.stop):
            tasks = {lane: progress.add_task(lane_label(lane), total=len(vs)) for lane, vs in lanes.items()}
            threads = [threading.Thread(target=self._lane, args=(lane, vs, ctx, progress, tasks[lane], outcomes),
                                        name=f"radt-sweep-lane-{lane}", daemon=True) for lane, vs in lanes.items()]
            if pooled:
                task = progress.add_task("pool", total=len(pooled))
                threads.append(threading.Thread(target=self._pool, args=(pooled, ctx, progress, task, outcomes),
                                                name="radt-sweep-pool", daemon=True))
            for t in threads:
                t.start()
            for t in threads:
                join(t, 0.2)
        if self._error is not None:
            raise self._error
        return [outcomes[i] for i in sorted(outcomes)]

    def _pool(self, variants: list[Variant], ctx, progress, task, outcomes: dict[int, Outcome]) -> None:
        pool = pool_of(variants)

        def echo(message: str) -> None:
            progress.console.print(message, highlight=False)

        def halted() -> bool:
            return bool(self.stopping or self._error is not None)

        def run_one(v: Variant, devices: list[str]) -> None:
            key = f"pool:{v.index}:{','.join(devices)}"  # its own: the next variant may start before it ends
            released, once = False, threading.Lock()

            def release() -> None:  # from the group's thread (on_free) and this one's end: the devices once
                nonlocal released
                with once:
                    if released:
                        return
                    released = True
                pool.release(devices)

            def start(runner) -> bool:
                with self._lock:
                    if halted():
                        return False
                    self._active[key] = runner
                if not v.system:  # the next variant may start while this one's runs are closed; host
                    runner.on_free = release  # settings are restored only once the group has ended
                return True

            try:
                outcome = self._variant(v, ctx, echo, start, devices=devices, model=pool.model(devices))
                if outcome is not None:
                    outcomes[v.index] = outcome
                    progress.advance(task)
            except BaseException as exc:
                with self._lock:
                    self._error = self._error or exc
            finally:
                with self._lock:
                    self._active.pop(key, None)
                release()

        try:
            phases = [[v for v in variants if v.mode == "exclusive"], [v for v in variants if v.mode != "exclusive"]]
            for phase in phases:  # the baselines end before the collocated variants that need them start
                threads = []
                for v in phase:
                    head = getattr(ctx, "head", None)
                    if head is not None and head.is_for(v):  # running already: run to its end and recorded
                        devices = pool.acquire(v.gpus, head.devices)
                    else:
                        devices = pool.acquire(v.gpus, v.pool, halted)
                    if devices is None:
                        break
                    progress.update(task, description=f"pool: [{v.index}] {v.title} on {','.join(devices)}")
                    if not self.parallel:
                        run_one(v, devices)
                        continue
                    t = threading.Thread(target=run_one, args=(v, devices), name=f"radt-sweep-{v.index}", daemon=True)
                    t.start()
                    threads.append(t)
                for t in threads:
                    t.join()  # on the pool's own thread: the main thread waits in ticks below
                if halted():
                    break
            progress.update(task, description=f"pool: {'stopped' if self.stopping else 'done'}")
        except BaseException as exc:  # an internal error: nothing new starts, the sweep raises it
            with self._lock:
                self._error = self._error or exc

    def _variant(self, v: Variant, ctx, echo, start, **where) -> Outcome | None:
        """Run one variant (None: the sweep was stopping); a KILLED one stops the sweep (a re-run resumes it)."""
        supersedes = ctx.changed.get((v.experiment, v.hash))
        if supersedes:  # resume matches content: say why this place of the plan runs again
            echo(f"[{v.index}] {v.title}: spec changed since FINISHED run {supersedes} "
                 f"({ctx.what_changed(supersedes, v)}); running it again")
        head = getattr(ctx, "head", None)
        runner = None
        if head is not None and head.is_for(v):
            runner = head.take()
            with self._lock:
                self._active.pop("head", None)
                self.stopping = self.stopping or runner.stopping  # stopped before its turn: nothing after it
        outcome = run_variant(ctx.client, v, ctx.uri, supersedes, echo=echo, start=start, runner=runner, **where)
        if outcome is not None and outcome.status == "KILLED":
            with self._lock:
                self.stopping = self.stopping or 15
        return outcome

    def _lane(self, lane: str, variants: list[Variant], ctx, progress, task, outcomes: dict[int, Outcome]) -> None:
        def echo(message: str) -> None:
            progress.console.print(message, highlight=False)

        def start(runner) -> bool:
            with self._lock:
                if self.stopping or self._error is not None:
                    return False
                self._active[lane] = runner
                return True

        try:
            head = getattr(ctx, "head", None)
            for v in variants:
                if (self.stopping or self._error is not None) and not (head is not None and head.is_for(v)):
                    break
                progress.update(task, description=f"{lane_label(lane)}: [{v.index}] {v.title}")
                try:
                    outcome = self._variant(v, ctx, echo, start)
                finally:
                    with self._lock:
                        self._active.pop(lane, None)
                if outcome is None:
                    break
                outcomes[v.index] = outcome
                progress.advance(task)
                if outcome.status == "KILLED":
                    break
            progress.update(task, description=f"{lane_label(lane)}: {'stopped' if self.stopping else 'done'}")
        except BaseException as exc:  # an internal error: the other lanes start nothing new, the sweep raises it
            with self._lock:
                if self._error is None:
                    self._error = exc
