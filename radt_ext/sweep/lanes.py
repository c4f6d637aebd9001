"""The local executor: one lane per device. A lane runs its device's variants one after another (in
plan order, so exclusive baselines come before the collocated variants that need them); the lanes of
different devices run at the same time, each on a thread of this process (a group's workloads and
monitor are child processes and threads already). With `parallel=False` every variant is in one lane:
the sequential executor.

SIGINT/SIGTERM stop every lane: the running groups stop their workloads (their runs end KILLED, so a
re-run resumes them) and no lane starts another variant.
"""
from __future__ import annotations

import threading

from radt_ext.signals import SignalRelay
from radt_ext.sweep import console as out
from radt_ext.sweep.plan import CPU, Variant
from radt_ext.sweep.variant_run import Outcome, run_variant


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
        lanes = lanes_of(todo, self.parallel)
        outcomes: dict[int, Outcome] = {}
        with out.progress(ctx.console) as progress, SignalRelay(self.stop):
            tasks = {lane: progress.add_task(lane_label(lane), total=len(vs)) for lane, vs in lanes.items()}
            threads = [threading.Thread(target=self._lane, args=(lane, vs, ctx, progress, tasks[lane], outcomes),
                                        name=f"radt-sweep-lane-{lane}", daemon=True) for lane, vs in lanes.items()]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)  # short joins keep the main thread free for signals
        if self._error is not None:
            raise self._error
        return [outcomes[i] for i in sorted(outcomes)]

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
            for v in variants:
                if self.stopping or self._error is not None:
                    break
                progress.update(task, description=f"{lane_label(lane)}: [{v.index}] {v.title}")
                supersedes = ctx.changed.get((v.experiment, v.hash))
                if supersedes:  # resume matches content: say why this place of the plan runs again
                    echo(f"[{v.index}] {v.title}: spec changed since FINISHED run {supersedes} "
                         f"({ctx.what_changed(supersedes, v)}); running it again")
                try:
                    outcome = run_variant(ctx.client, v, ctx.uri, supersedes, echo=echo, start=start)
                finally:
                    with self._lock:
                        self._active.pop(lane, None)
                if outcome is None:
                    break
                outcomes[v.index] = outcome
                progress.advance(task)
                if outcome.status == "KILLED":
                    with self._lock:
                        self.stopping = self.stopping or 15  # a stopped group stops the sweep; a re-run resumes
                    break
            progress.update(task, description=f"{lane_label(lane)}: {'stopped' if self.stopping else 'done'}")
        except BaseException as exc:  # an internal error: the other lanes start nothing new, the sweep raises it
            with self._lock:
                if self._error is None:
                    self._error = exc
