"""A real single-node Slurm cluster for tests: munged, slurmctld and slurmd from Debian's `munge` and
`slurm-wlm` packages, on this machine, with every file in a temporary directory.

Nothing is mocked: `sbatch`, `squeue`, `scancel` and `srun` talk to these daemons. The slurm.conf
names this host, has no cgroups (proctrack/linuxproc, task/none), one CPU-only node with this
machine's CPUs and memory (`slurmd -C`), and its own ports and munge socket, so it never meets
another Slurm on the machine. Client commands find it through SLURM_CONF.

    from tests.slurm_cluster import slurm_cluster  # noqa: F401  (fixture)

The fixture skips, saying why, where the binaries are missing, where it is not root (slurmd runs
jobs as their user and must be root), or where the daemons do not come up.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import ServerUnavailable, started_or_skip

DAEMONS = {"munged": "munge", "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm"}
CLIENTS = ("sbatch", "squeue", "scancel", "srun", "sinfo")
PARTITION = "ci"


class SlurmUnavailable(ServerUnavailable):
    pass


def _which(name: str) -> str | None:
    return shutil.which(name) or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)),
                                      None)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_hardware(slurmd: str) -> str:
    """`CPUs=.. Boards=.. SocketsPerBoard=.. CoresPerSocket=.. ThreadsPerCore=.. RealMemory=..` of this
    machine, as slurmd itself sees it."""
    out = subprocess.run([slurmd, "-C"], capture_output=True, text=True, timeout=30).stdout
    first = out.splitlines()[0] if out else ""
    words = [w for w in first.split() if not w.startswith("NodeName=")]
    if not any(w.startswith("CPUs=") for w in words):
        raise SlurmUnavailable(f"slurmd -C printed no node description: {out[:200]!r}")
    return " ".join(words)


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    node: str
    procs: dict[str, subprocess.Popen]

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def log_tail(self, chars: int = 1500) -> str:
        parts = []
        for name in ("slurmctld.log", "slurmd.log", "munged.log"):
            path = self.root / "log" / name
            if path.exists():
                parts.append(f"--- {name}\n{path.read_text(errors='replace')[-chars:]}")
        return "\n".join(parts)

    def queue(self) -> list[str]:
        out = subprocess.run(["squeue", "--array", "--noheader", "--format=%i %T"], capture_output=True, text=True,
                             env={**os.environ, **self.env()}, timeout=30)
        return [line.strip() for line in out.stdout.splitlines() if line.strip()]

    def stop(self) -> None:
        env = {**os.environ, **self.env()}
        with contextlib.suppress(Exception):
            subprocess.run(["scancel", f"--partition={PARTITION}"], env=env, timeout=30, capture_output=True)
            deadline = time.monotonic() + 30
            while self.queue() and time.monotonic() < deadline:
                time.sleep(0.5)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


def start_slurm(timeout: float = 90) -> SlurmCluster:
    missing = [f"{n} ({pkg})" for n, pkg in DAEMONS.items() if _which(n) is None]
    missing += [n for n in CLIENTS if shutil.which(n) is None]
    if missing:
        raise SlurmUnavailable(f"Slurm is not installed here (missing {', '.join(missing)}); "
                               "apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        raise SlurmUnavailable("a single-node Slurm needs root to start slurmd; run the tests as root")
    root = Path(tempfile.mkdtemp(prefix="radt-slurm-", dir="/tmp"))  # short: the munge socket path has a limit
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir()
    os.chmod(root, 0o755)
    os.chmod(root / "munge", 0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o400)
    socket_path = root / "munge" / "munge.socket"
    node = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=radtci",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        f"AuthInfo=socket={socket_path}",
        "CredType=cred/munge",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "MpiDefault=none",
        "ReturnToService=2",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SwitchType=switch/none",
        "MinJobAge=300",
        "KillWait=30",
        f"NodeName={node} NodeAddr=127.0.0.1 {node_hardware(_which('slurmd'))} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
        "",
    ]))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    cluster = SlurmCluster(root, conf, node, {})

    def spawn(name: str, argv: list[str]) -> None:
        log = open(root / "log" / f"{name}.out", "wb")
        cluster.procs[name] = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, start_new_session=True)

    try:
        spawn("munged", [_which("munged"), "-F", "-f", f"--socket={socket_path}", f"--key-file={key}",
                         f"--log-file={root / 'log' / 'munged.log'}", f"--pid-file={root / 'munge' / 'munged.pid'}",
                         f"--seed-file={root / 'munge' / 'munged.seed'}"])
        _wait(lambda: socket_path.exists(), timeout, "munged made no socket", cluster)
        spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", str(conf)])
        spawn("slurmd", [_which("slurmd"), "-D", "-f", str(conf)])
        _wait(lambda: _node_state(env) == "idle", timeout, "the node never became idle in sinfo", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _node_state(env: dict[str, str]) -> str:
    out = subprocess.run(["sinfo", "--noheader", "--format=%t"], capture_output=True, text=True, env=env, timeout=30)
    return re.sub(r"[^a-z]", "", out.stdout.strip().splitlines()[0]) if out.stdout.strip() else ""


def _wait(ready, timeout: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                raise SlurmUnavailable(f"{name} exited with code {proc.returncode}: {cluster.log_tail(600)}")
        if ready():
            return
        time.sleep(0.5)
    raise SlurmUnavailable(f"{what} after {timeout:.0f} s: {cluster.log_tail(600)}")


@pytest.fixture(scope="module")
def slurm_cluster():
    """A running single-node Slurm for the module's tests (SLURM_CONF set while it runs)."""
    cluster = started_or_skip(start_slurm)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
        cluster.stop()
