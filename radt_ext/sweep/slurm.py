"""The Slurm executor (through submitit): each variant is one Slurm job that runs the variant's group
on the node Slurm picked (`slurm_job.run`), logging to the tracking server the submitting shell names.

Variants go in job arrays: the exclusive ones first, the collocated ones in a second array that
waits for them (`afterany`), so they find their baselines. Which job runs which variant is kept in
`<folder>/jobs.json` (with submitit's scripts and logs); together with `squeue` and the store that
gives each variant's state: queued, running, FINISHED, FAILED. A re-run submits only variants
neither FINISHED in the store nor still queued or running. A foreground sweep waits for its jobs;
SIGINT/SIGTERM there, or `radt-ext sweep SPEC --cancel`, cancels them (running ones get SIGTERM
first, so their groups stop and their runs end KILLED).
"""
from __future__ import annotations

import getpass
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from radt_ext.errors import UsageError
from radt_ext.run.signals import SignalRelay
from radt_ext.figures.summary_names import upgrade
from radt_ext.sweep import console as out
from radt_ext.sweep.plan import Variant
from radt_ext.sweep.slurm_options import SlurmOptions
from radt_ext.sweep.variant_run import Outcome

QUEUED = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING", "SUSPENDED"}
RUNNING = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT", "STOPPED"}
LOCAL_STORES = ("sqlite:", "file:")


def refuse_local_store(uri: str) -> None:
    scheme = uri.split("://", 1)[0] + ":" if "://" in uri else ""
    if uri.startswith(LOCAL_STORES) or not scheme:
        raise UsageError(f"--executor slurm: the tracking store {uri} is a file on this machine that jobs on other "
                         "nodes cannot write; set MLFLOW_TRACKING_URI to the team server (docs/team-server.md)")


def _run(argv: list[str], what: str) -> str:
    try:
        # a session of its own: Ctrl-C reaches the sweep (which then cancels its jobs), not squeue/scancel
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, start_new_session=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"{what}: {argv[0]} failed: {exc}") from None
    if done.returncode != 0:
        first = (done.stderr.strip() or done.stdout.strip() or f"exit code {done.returncode}").splitlines()[0]
        raise UsageError(f"{what}: {' '.join(argv[:2])} failed: {first[:300]}")
    return done.stdout


def queue() -> dict[str, str]:
    """{job id: Slurm state} of this user's jobs in the queue; array tasks one by one ("123_4")."""
    if shutil.which("squeue") is None:
        raise UsageError("--executor slurm: squeue not found; run on a machine of the Slurm cluster (a login node)")
    text = _run(["squeue", "--array", "--noheader", "--format=%i|%T", f"--user={getpass.getuser()}"], "Slurm queue")
    states = {}
    for line in text.splitlines():
        job, _, state = line.strip().partition("|")
        if job:
            states[job] = state.strip()
    return states


def state_word(slurm_state: str | None) -> str | None:
    if slurm_state in QUEUED:
        return "queued"
    if slurm_state in RUNNING:
        return "running"
    return None


class JobBook:
    """`jobs.json`: {experiment/hash: {"job": id, "index": i, "title": ..., "log": path}} of this folder."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.path = folder / "jobs.json"
        try:
            self.jobs: dict[str, dict] = json.loads(self.path.read_text())
        except FileNotFoundError:
            self.jobs = {}
        except (OSError, ValueError) as exc:
            raise UsageError(f"{self.path}: cannot read ({exc}); move it away to forget the jobs it lists") from None

    @staticmethod
    def key(v: Variant) -> str:
        return f"{v.experiment}/{v.hash}"

    def job(self, v: Variant) -> str | None:
        entry = self.jobs.get(self.key(v))
        return entry["job"] if entry else None

    def put(self, v: Variant, job_id: str, log: str) -> None:
        self.jobs[self.key(v)] = {"job": job_id, "index": v.index, "title": v.title, "log": log,
                                  "submitted": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.jobs, indent=1, sort_keys=True))
        os.replace(tmp, self.path)


def default_folder() -> str:
    return str(Path.cwd() / "radt-ext-slurm")


def job_pythonpath() -> str:
    """The job imports this radt_ext and this submitit (whatever installed them), then what this shell's
    PYTHONPATH holds: written into the job script, so it holds even under sbatch --export=NONE."""
    import submitit

    import radt_ext

    roots = [str(Path(m.__file__).resolve().parent.parent) for m in (radt_ext, submitit)]
    roots += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(roots))


class SlurmExecutor:
    name = "slurm"
    local = False  # devices name GPUs of each job's allocation, not of this machine

    def __init__(self, options: SlurmOptions | None = None, wait: bool = True, poll_s: float = 5.0):
        self.options = options or SlurmOptions()
        self.folder = Path(self.options.folder or default_folder()).resolve()
        self.wait = wait
        self.poll_s = poll_s
        self._stop = threading.Event()
        self.stopping: int | None = None

    def check(self, uri: str) -> None:
        refuse_local_store(uri)
        if shutil.which("sbatch") is None or shutil.which("srun") is None:
            raise UsageError("--executor slurm: sbatch/srun not found; run on a machine of the Slurm cluster "
                             "(a login node)")

    # -- submitting --------------------------------------------------------------------
    def _submitit(self, name: str):
        try:
            import submitit
        except ImportError:
            raise UsageError("--executor slurm needs submitit: pip install 'radt-ext[slurm]'") from None
        o = self.options
        ex = submitit.SlurmExecutor(folder=str(self.folder / "%j"), python=shlex.quote(sys.executable))
        setup = [f"export PYTHONPATH={shlex.quote(job_pythonpath())}"]
        params = {"job_name": name, "time": o.time_limit, "setup": setup, "stderr_to_stdout": True,
                  "additional_parameters": {k: (v if v != "" else True) for k, v in o.sbatch.items()}}
        for key, value in (("partition", o.partition), ("account", o.account), ("cpus_per_task", o.cpus_per_job),
                           ("gpus_per_node", o.gpus_per_job or None), ("mem", o.mem)):
            if value is not None:
                params[key] = value
        ex.update_parameters(**params)
        return ex

    def _submit(self, ex, variants: list[Variant], uri: str, changed: dict, after: list[str]) -> list:
        from radt_ext.sweep import slurm_job

        ex.update_parameters(dependency=f"afterany:{':'.join(after)}" if after else None)
        if ex.parameters.get("dependency") is None:
            ex.parameters.pop("dependency", None)
        jobs = []
        with ex.batch():
            for v in variants:
                jobs.append(ex.submit(slurm_job.run, v, uri, changed.get((v.experiment, v.hash))))
        return jobs

    def run(self, todo: list[Variant], ctx) -> list[Outcome]:
        book = JobBook(self.folder)
        live = {job: state_word(s) for job, s in queue().items() if state_word(s)}
        submit, waiting = [], []
        for v in todo:
            job = book.job(v)
            if job in live:
                ctx.console.print(f"[{v.index}] {v.title}: {live[job]} as Slurm job {job}, not submitted again",
                                  highlight=False)
                waiting.append(v)
            else:
                submit.append(v)
        name = f"radt-ext-{todo[0].sweep_id}" if todo else "radt-ext"
        ex = self._submitit(name) if submit else None
        excl = [v for v in submit if v.mode == "exclusive"]
        rest = [v for v in submit if v.mode != "exclusive"]

        def submit_array(variants: list[Variant], after: list[str]) -> list:
            try:
                jobs = self._submit(ex, variants, ctx.uri, ctx.changed, after)
            except Exception as exc:  # sbatch refused (bad partition, account, time limit): one line
                lines = str(exc).strip().splitlines() or [type(exc).__name__]
                raise UsageError(f"--executor slurm: sbatch refused the jobs: {lines[-1][:400]}") from None
            for v, job in zip(variants, jobs):
                book.put(v, job.job_id, str(job.paths.stdout))
                ctx.console.print(f"[{v.index}] {v.title}: submitted as Slurm job {job.job_id}", highlight=False)
            book.save()  # at once: --status, --cancel and a re-run know these jobs whatever happens next
            return jobs

        excl_jobs = submit_array(excl, []) if excl else []
        # collocated variants wait for the exclusive ones (new, or still queued from before): baselines
        after = sorted({j.job_id.split("_")[0] for j in excl_jobs} |
                       {book.job(v).split("_")[0] for v in waiting if v.mode == "exclusive"})
        if rest:
            submit_array(rest, after)
        mine = {v.index: book.job(v) for v in todo}
        if not self.wait:
            return [Outcome(v, "QUEUED") for v in todo]
        self._follow(todo, mine, ctx.console)
        return self.outcomes(todo, ctx.client, book)

    # -- following ---------------------------------------------------------------------
    def stop(self, signum: int) -> None:
        self.stopping = self.stopping or signum
        self._stop.set()

    def _follow(self, todo: list[Variant], mine: dict[int, str], console) -> None:
        with out.progress(console) as progress, SignalRelay(self.stop):
            task = progress.add_task("slurm", total=len(todo))
            left, misses = len(todo), 0
            while True:
                try:
                    states = queue()
                    misses = 0
                except UsageError as exc:  # slurmctld busy for a moment: ask again, give up after a few tries
                    misses += 1
                    if self._stop.is_set():
                        break  # stopping: cancel below without knowing the queue
                    if misses >= 5:
                        raise
                    progress.console.print(f"{exc}; asking again", highlight=False)
                    self._stop.wait(self.poll_s)
                    continue
                live = {i: state_word(states.get(j)) for i, j in mine.items() if state_word(states.get(j))}
                running = sum(s == "running" for s in live.values())
                progress.update(task, description=f"slurm: {len(live) - running} queued, {running} running",
                                advance=left - len(live))
                left = len(live)
                if not live or self._stop.wait(self.poll_s):
                    break
        if self.stopping:
            jobs = sorted({j for j in mine.values() if j})
            console.print(f"stopping: cancelling Slurm jobs {' '.join(jobs)}", highlight=False)
            cancel(jobs)

    def outcomes(self, todo: list[Variant], client, book: JobBook) -> list[Outcome]:
        found = latest_runs(client, todo)
        result = []
        for v in todo:
            run = found.get((v.experiment, v.hash))
            if run is None:
                status = "KILLED" if self.stopping else "FAILED"
                result.append(Outcome(v, status, exit_code=128 + self.stopping if self.stopping else 1))
                continue
            summary = upgrade({k[len("summary/"):]: val for k, val in run.data.metrics.items()
                               if k.startswith("summary/")}, prefix="")
            status = run.info.status
            if self.stopping and status != "FINISHED":
                status = "KILLED"
            code = 0 if status == "FINISHED" else (128 + self.stopping if self.stopping else 1)
            result.append(Outcome(v, status, run.info.run_id, summary, code))
        return result


STOP_GRACE_S = 90.0


def cancel(jobs: list[str], grace_s: float = STOP_GRACE_S, poll_s: float = 1.0) -> None:
    """Stop jobs so their runs end KILLED, not RUNNING: a queued job is cancelled; a running one gets
    SIGTERM in its step only (not its batch shell, whose end would end the job before the group has
    written its runs), the way Ctrl-C stops a local sweep; what is still in the queue after `grace_s`
    is cancelled outright."""
    if not jobs:
        return
    states = queue()
    queued = [j for j in jobs if state_word(states.get(j)) == "queued"]
    running = [j for j in jobs if state_word(states.get(j)) == "running"]
    if queued:
        _run(["scancel", *queued], "cancelling")
    if running:
        _run(["scancel", "--signal=TERM", *running], "stopping")
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        left = [j for j in jobs if state_word(queue().get(j))]
        if not left:
            return
        time.sleep(poll_s)
    _run(["scancel", *left], "cancelling")


def latest_runs(client, variants: list[Variant]) -> dict[tuple[str, str], object]:
    """{(experiment, hash): the newest parent run of that variant, any status}."""
    from radt_ext.sweep.variant_run import experiment_ids

    found: dict[tuple[str, str], object] = {}
    for exp in {v.experiment for v in variants}:
        ids = experiment_ids(client, exp)
        if not ids:
            continue
        hashes = {v.hash for v in variants if v.experiment == exp}
        for r in client.search_runs(ids, "tags.`sweep.hash` != ''", max_results=50000,
                                    order_by=["attributes.start_time DESC"]):
            h = r.data.tags.get("sweep.hash")
            if h in hashes and "mlflow.parentRunId" not in r.data.tags:
                found.setdefault((exp, h), r)
    return found


def status_rows(variants: list[Variant], client, folder: str | None,
                done: dict[tuple, str]) -> list[tuple[Variant, str, str, str]]:
    """(variant, state, Slurm job or "", run id or "") for each variant: FINISHED in the store (`done`,
    {(experiment, hash): run id}) wins; then queued/running from Slurm; then the store's last status; a
    job that left the queue without a run is FAILED; "not run" where nothing is known."""
    book = JobBook(Path(folder or default_folder()).resolve())
    states = queue() if book.jobs else {}
    runs = latest_runs(client, variants)
    rows = []
    for v in variants:
        job = book.job(v) or ""
        run = runs.get((v.experiment, v.hash))
        if (v.experiment, v.hash) in done:
            rows.append((v, "FINISHED", job, done[(v.experiment, v.hash)]))
        elif state_word(states.get(job)):
            rows.append((v, state_word(states.get(job)), job, run.info.run_id if run else ""))
        elif run is not None:
            rows.append((v, run.info.status, job, run.info.run_id))
        elif job:
            rows.append((v, "FAILED", job, ""))  # the job ended without a run: its log says why
        else:
            rows.append((v, "not run", "", ""))
    return rows


def cancel_sweep(variants: list[Variant], folder: str | None) -> list[str]:
    """Cancel the queued or running Slurm jobs of these variants; the job ids cancelled."""
    book = JobBook(Path(folder or default_folder()).resolve())
    states = queue() if book.jobs else {}
    jobs = sorted({j for j in (book.job(v) for v in variants) if j and state_word(states.get(j))})
    cancel(jobs)
    return jobs
