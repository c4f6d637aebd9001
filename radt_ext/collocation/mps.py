"""A private MPS control daemon per GPU: its own pipe and log directories, always told to quit.

    with MpsDaemon("1", uuid="GPU-...") as daemon:  # refuses if another MPS daemon already serves GPU 1
        env = daemon.client_env()        # CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY /
        ...                              # CUDA_VISIBLE_DEVICES: the daemon's GPU, by UUID
    # `quit` was sent on the way out, whatever happened inside

The daemon is started with only its GPU visible, and the MPS server re-indexes the devices it was
given: its GPU is device 0 to a client. On a multi-GPU host a client must still be told which GPU
that is: without CUDA_VISIBLE_DEVICES, torch counts the host's GPUs through NVML (which knows
nothing of MPS) while CUDA under MPS has one, and fails (`device >= 0 && device < num_gpus INTERNAL
ASSERT FAILED ... device=1, num_gpus=1`); with the daemon's index (`1`) CUDA finds no such device.
NVIDIA's MPS guide recommends UUIDs on both sides: the daemon and every client get
CUDA_VISIBLE_DEVICES=<the GPU's UUID>, which names the same GPU to NVML, to the server and to the
client. Without a UUID (NVML not answering) the daemon gets the index and the clients "0".
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import psutil

from radt_ext.errors import UsageError

CONTROL = "nvidia-cuda-mps-control"
QUIT_WAIT_S = 15.0


def _is_mps_process(proc: psutil.Process) -> bool:
    try:
        if (proc.name() or "").startswith("nvidia-cuda-mps"):
            return True
        return any(os.path.basename(arg).startswith("nvidia-cuda-mps") for arg in proc.cmdline()[:2])
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def mps_processes() -> list[tuple[psutil.Process, dict[str, str] | None]]:
    """Every MPS control/server process with its environment (None where it cannot be read)."""
    out = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid() or not _is_mps_process(proc):
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            env = proc.environ()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        except psutil.AccessDenied:
            env = None
        out.append((proc, env))
    return out


def owner_of(device: str, own_pipe_dir: str | None = None, uuid: str | None = None) -> str | None:
    """A one-line description of another MPS daemon that serves `device` (by index or UUID), or None."""
    names = {device, uuid} - {None}
    for proc, env in mps_processes():
        if env is not None and own_pipe_dir and env.get("CUDA_MPS_PIPE_DIRECTORY") == own_pipe_dir:
            continue
        pipe = (env or {}).get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
        visible = None if env is None else env.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and not names & {v.strip() for v in visible.split(",")}:
            continue  # it serves other GPUs only
        return f"pid {proc.pid}, pipe directory {pipe}"
    return None


class MpsDaemon:
    def __init__(self, device: str, executable: str | None = None, uuid: str | None = None):
        self.device = device
        self.uuid = uuid  # GPU-<uuid> of `device`, where NVML told it
        self.executable = executable or shutil.which(CONTROL)
        self.root: str | None = None
        self.pipe_dir = self.log_dir = None
        self.started = False
        self.quit_output: str | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"CUDA_VISIBLE_DEVICES": self.visible, "CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir,
                    "CUDA_MPS_LOG_DIRECTORY": self.log_dir})
        return env

    @property
    def visible(self) -> str:
        """The daemon's CUDA_VISIBLE_DEVICES: exactly its one GPU."""
        return self.uuid or self.device

    def start(self) -> "MpsDaemon":
        if not self.executable:
            raise UsageError(f"mode mps needs {CONTROL} on PATH (NVIDIA driver utilities); install them "
                             "or choose mode naive")
        other = owner_of(self.device, uuid=self.uuid)
        if other:
            raise UsageError(f"GPU {self.device} is already served by another MPS daemon ({other}); stop it "
                             "(echo quit | CUDA_MPS_PIPE_DIRECTORY=<its pipe dir> nvidia-cuda-mps-control) "
                             "or choose another GPU")
        self.root = tempfile.mkdtemp(prefix=f"radt-ext-mps-gpu{self.device}-")
        self.pipe_dir = os.path.join(self.root, "pipe")
        self.log_dir = os.path.join(self.root, "log")
        os.makedirs(self.pipe_dir)
        os.makedirs(self.log_dir)
        try:
            done = subprocess.run([self.executable, "-d"], env=self._env(), capture_output=True, text=True,
                                  timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._cleanup()
            raise UsageError(f"cannot start the MPS control daemon for GPU {self.device}: {exc}") from None
        output = (done.stdout + done.stderr).strip()
        if done.returncode != 0 or "already running" in output.lower():
            self._cleanup()
            raise UsageError(f"the MPS control daemon for GPU {self.device} did not start "
                             f"(exit {done.returncode}): {output.splitlines()[0] if output else 'no output'}")
        self.started = True
        return self

    def client_env(self, thread_percentage: int | None = None, pinned_mem_limit: str | None = None) -> dict[str, str]:
        env = {"CUDA_MPS_PIPE_DIRECTORY": self.pipe_dir, "CUDA_MPS_LOG_DIRECTORY": self.log_dir,
               "CUDA_VISIBLE_DEVICES": self.uuid or "0"}
        if thread_percentage is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(int(thread_percentage))
        if pinned_mem_limit is not None:
            env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = f"0={pinned_mem_limit}"
        return env

    def control_log(self) -> str:
        try:
            with open(os.path.join(self.log_dir, "control.log")) as fh:
                return fh.read()
        except (OSError, TypeError):
            return ""

    def _ours(self) -> list[psutil.Process]:
        return [proc for proc, env in mps_processes() if env and env.get("CUDA_MPS_PIPE_DIRECTORY") == self.pipe_dir]

    def quit(self) -> None:
        """Tell the daemon to quit and wait for its processes to go; safe to call twice."""
        if not self.started:
            return
        self.started = False
        try:
            done = subprocess.run([self.executable], input="quit\n", env=self._env(), capture_output=True,
                                  text=True, timeout=30)
            self.quit_output = (done.stdout + done.stderr).strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.quit_output = f"quit failed: {exc}"
        deadline = time.monotonic() + QUIT_WAIT_S
        while self._ours() and time.monotonic() < deadline:
            time.sleep(0.1)
        for proc in self._ours():  # it did not listen: do not leave it serving the GPU
            try:
                proc.kill()
            except psutil.Error:
                pass
        self._cleanup(keep_logs=True)

    def _cleanup(self, keep_logs: bool = False) -> None:
        if self.pipe_dir:
            shutil.rmtree(self.pipe_dir, ignore_errors=True)
        if not keep_logs and self.root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "MpsDaemon":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.quit()
