"""What ends a run whose radt-ext process was killed outright (SIGKILL: the OOM killer, a preempted job).

Two safeguards, both ending such a run as KILLED with the points already stored:

- `Watchdog` starts a small process before the workload exists, in a session of its own so that a kill
  of radt-ext's process group does not reach it. radt-ext tells it the workload's pid, the run's id once
  the run exists (the workload may start first), then `done` once the run has its status. When its stdin closes without `done`, radt-ext died: it stops the workload's
  whole process tree (SIGTERM, SIGKILL after a grace period; processes that left the tree are found by
  the run's marker in their environment) and ends radt-ext's run and the runs the workload started that
  are still RUNNING. Then each run it ended gets the full-rate timeline its spill file holds on disk as
  its artifact (radt_ext.run.spills; told the session's spill folder when it starts), and the folder goes.
- When the watchdog died too (a whole control group killed), the next `radt-ext run` on the same host
  and store ends them: every run records the host, pid and start time of the radt-ext process that
  follows it (`end_orphans`).

A sweep's variant with host settings (radt_ext.hostsettings) has a watchdog of its own, given the
variant's restore file (`restore=`) and its group run: when radt-ext dies it puts the host settings back,
ends the group run as KILLED and tags it with what it restored (`system.<key>.restored`).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from radt_ext.run.signals import wait_child
from radt_ext.run.spills import log_all_spilled
from radt_ext.run.streams import say
from radt_ext.workload_api.markers import ENV_MONITOR_RUN, ENV_RUN_ID_FILE, ENV_STARTS_FILE, TAG_MONITOR_RUN

TAG_HOST = "radt_ext.host"
TAG_PID = "radt_ext.pid"
TAG_PID_STARTED = "radt_ext.pid_started"  # the process's create time: a reused pid is not mistaken for it
TAG_ENDED_BY = "radt_ext.ended_by"
GRACE_S = 5.0


def host_id() -> str:
    """This host, and the pid namespace (containers sharing a host name do not see each other's pids)."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    import socket

    return f"{socket.gethostname()}/pidns:{namespace}".replace("'", "")


def owner_tags() -> dict[str, str]:
    """Tags naming this radt-ext process, so an orphaned run is recognised later."""
    import psutil

    me = psutil.Process()
    return {TAG_HOST: host_id(), TAG_PID: str(me.pid), TAG_PID_STARTED: repr(me.create_time())}


def _alive(pid: str | None, started: str | None) -> bool:
    import psutil

    try:
        return psutil.Process(int(pid)).create_time() == float(started)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, TypeError, ValueError):
        return False
    except psutil.AccessDenied:
        return True  # cannot tell: leave it alone


class Watchdog:
    """The radt-ext side: start before the workload, `watch(pid)` after, `release()` at the very end."""

    def __init__(self, run_id: str | None, tracking_uri: str, marker: str | None = None,
                 spill_dir: str | None = None, restore: str | None = None):
        """`marker`: the workload's RADT_EXT_ACTIVE (default: the run id); `run_id` None: told by `run()`;
        `spill_dir`: the session's spill folder (radt_ext.run.spills), its runs' timelines; `restore`: a
        host settings restore file (radt_ext.hostsettings.restore), put back when radt-ext dies."""
        env = {k: v for k, v in os.environ.items() if k not in (ENV_MONITOR_RUN, ENV_STARTS_FILE, ENV_RUN_ID_FILE)}
        argv = [sys.executable, "-m", "radt_ext.run.watchdog", "--tracking-uri", tracking_uri]
        if marker or run_id:
            argv += ["--marker", marker or run_id]
        if restore:
            argv += ["--restore", restore]
        if run_id:
            argv += ["--run-id", run_id]
        if spill_dir:
            argv += ["--spill-dir", spill_dir]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                     start_new_session=True, env=env)

    def _send(self, line: str) -> None:
        try:
            self.proc.stdin.write(f"{line}\n".encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            pass  # it is gone; nothing to tell

    def watch(self, pid: int) -> None:
        self._send(str(pid))

    def run(self, run_id: str) -> None:
        self._send(f"run {run_id}")

    def release(self, timeout: float = 10.0) -> None:
        """The run has its status: the watchdog exits without doing anything."""
        self.let_go()
        self.reap(timeout)

    def let_go(self) -> None:
        """`done` sent: it exits without doing anything, whenever it reads it (`reap` waits for that)."""
        if self.proc.stdin.closed:
            return
        self._send("done")
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    def reap(self, timeout: float = 10.0) -> None:
        """Its exit waited for (killed after `timeout`) once it was let go; still watching: nothing."""
        if not self.proc.stdin.closed:
            return
        try:
            wait_child(self.proc, timeout)  # its exit seen when it comes, not at Popen.wait's next poll
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def stop_tree(pid: int | None, marker: str, grace: float = GRACE_S) -> list[int]:
    """SIGTERM the workload's tree, SIGKILL what is left after `grace`; returns the pids found.
    `marker`: the workload's RADT_EXT_ACTIVE."""
    import psutil

    from radt_ext.run.reaper import ProcessTree

    tree = ProcessTree(pid, (ENV_MONITOR_RUN, marker))
    tree.start()
    tree.stop()
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    procs = tree.survivors()
    for proc in procs:
        try:
            proc.terminate()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    _, alive = psutil.wait_procs(procs, timeout=grace)
    if pid is not None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in alive + tree.survivors():
        try:
            proc.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return [p.pid for p in procs]


def _retry(fn, patience: float = 60.0):
    """A call into the store, waiting out a locked SQLite file."""
    start = time.monotonic()
    while True:
        try:
            return fn()
        except Exception as exc:
            if "locked" not in str(exc).lower() or time.monotonic() - start > patience:
                raise
            time.sleep(0.2)


def _all_experiment_ids(client) -> list[str]:
    from mlflow.entities import ViewType

    out, token = [], None
    while True:
        page = client.search_experiments(view_type=ViewType.ALL, max_results=1000, page_token=token)
        out += [e.experiment_id for e in page]
        token = page.token
        if not token:
            return out


def _search(client, query: str):
    experiments = _all_experiment_ids(client)
    found = []
    for i in range(0, len(experiments), 100):
        found += client.search_runs(experiments[i:i + 100], filter_string=query, max_results=50_000)
    return found


def _end_running(client, runs: list[str], status: str, reason: str) -> list[str]:
    now = int(time.time() * 1000)
    ended = []
    for rid in runs:
        if _retry(lambda: client.get_run(rid)).info.status != "RUNNING":
            continue
        _retry(lambda: client.set_tag(rid, TAG_ENDED_BY, reason[:4000]))
        _retry(lambda: client.set_terminated(rid, status, now))
        ended.append(rid)
    return ended


def end_workload_runs(client, run_id: str, status: str, reason: str) -> list[str]:
    """The runs the workload of radt-ext's run `run_id` started and left RUNNING, ended with `status`."""
    runs = [r.info.run_id for r in _search(
        client, f"tags.`{TAG_MONITOR_RUN}` = '{run_id}' and attributes.status = 'RUNNING'")]
    return _end_running(client, runs, status, reason)


def end_killed(client, run_id: str, reason: str) -> list[str]:
    """End radt-ext's run and the workload's runs still RUNNING as KILLED; returns the runs ended."""
    return _end_running(client, [run_id], "KILLED", reason) + end_workload_runs(client, run_id, "KILLED", reason)


def end_orphans(client) -> list[str]:
    """Runs on this host left RUNNING by a radt-ext process that no longer exists: end them KILLED."""
    ended = []
    for run in _search(client, f"tags.`{TAG_HOST}` = '{host_id()}' and attributes.status = 'RUNNING'"):
        tags = run.data.tags
        if _alive(tags.get(TAG_PID), tags.get(TAG_PID_STARTED)):
            continue
        ended += end_killed(client, run.info.run_id,
                            f"radt-ext (pid {tags.get(TAG_PID)}) was gone; ended by a later radt-ext run")
    return ended


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--run-id", default=None)
    ap.add_argument("--marker", default=None)
    ap.add_argument("--tracking-uri", required=True)
    ap.add_argument("--spill-dir", default=None)
    ap.add_argument("--restore", default=None)
    args = ap.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # radt-ext decides; only its death makes us act
    parent = os.getppid()
    pid, run_id = None, args.run_id
    for raw in sys.stdin.buffer:
        line = raw.decode(errors="replace").strip()
        if line == "done":
            return 0
        if line.isdigit():
            pid = int(line)
        elif line.startswith("run "):
            run_id = line[4:].strip()
    stopped = stop_tree(pid, args.marker or run_id) if pid is not None or args.marker else []
    ended = []
    if run_id:  # else radt-ext died before its run existed: the next run ends it if it was made after all
        from mlflow.tracking import MlflowClient

        reason = f"radt-ext (pid {parent}) was killed; its watchdog stopped the workload and ended the run"
        ended = end_killed(MlflowClient(tracking_uri=args.tracking_uri), run_id, reason)
    say(f"radt-ext: the radt-ext process {parent} was killed: stopped {len(stopped)} workload processes, "
         f"ended {len(ended)} runs as KILLED ({', '.join(ended)})")
    if args.spill_dir:
        _log_spilled(args.tracking_uri, args.spill_dir, run_id, ended)
    if args.restore:
        _restore(args.tracking_uri, args.restore, run_id)
    return 0


def _restore(tracking_uri: str, path: str, run_id: str | None) -> None:
    """The host settings of the restore file put back, said in a line and on the run (when there is one)."""
    from radt_ext.hostsettings.restore import restore_file

    said = restore_file(path)
    if not said:
        return
    say("radt-ext: host settings restored after the kill: " + "; ".join(f"{k}: {v}" for k, v in said.items()))
    if run_id:
        from mlflow.entities import RunTag
        from mlflow.tracking import MlflowClient

        from radt_ext.hostsettings import TAG

        tags = [RunTag(f"{TAG}{k}.restored", f"{v} (by the watchdog after radt-ext was killed)"[:5000])
                for k, v in said.items()]
        try:
            _retry(lambda: MlflowClient(tracking_uri=tracking_uri).log_batch(run_id, tags=tags))
        except Exception as exc:
            say(f"radt-ext: warning: run {run_id} was not told what was restored ({type(exc).__name__})")


def _log_spilled(tracking_uri: str, spill_dir: str, run_id: str | None, ended: list[str]) -> None:
    """After the runs are ended: their spilled timelines as their artifacts; a failure is one line."""
    try:
        from mlflow.tracking import MlflowClient

        logged = log_all_spilled(MlflowClient(tracking_uri=tracking_uri), spill_dir, run_id, ended, _retry)
    except Exception as exc:
        why = (str(exc).splitlines() or [""])[0]
        say(f"radt-ext: warning: the killed runs' spilled timelines were not logged ({type(exc).__name__}: {why})")
        return
    if logged:
        say(f"radt-ext: logged the timelines spilled before the kill ({sum(logged.values())} points) as "
            f"timelines/system.parquet of {', '.join(logged)}; the points after the last flushed chunk are missing")


if __name__ == "__main__":
    sys.exit(main())
