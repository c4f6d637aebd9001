"""A steady GPU load in a child process: back-to-back bf16 8192² matmuls until its stdin closes.

    with gpu_load() as info: ...   # measured under load; info says "cuda" or "cpu (plumbing only)"

Without CUDA the child multiplies small numpy matrices instead, so the plumbing can be checked
on a machine without a GPU.
"""
from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from typing import Callable, Iterator


def matmul(cpu_size: int = 64) -> tuple[Callable[[], object], Callable[[], None], bool]:
    """(one multiply, a sync, cuda?): bf16 8192² on a CUDA GPU, else a small numpy matrix for plumbing checks."""
    try:
        import torch

        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        return (lambda: a @ b), torch.cuda.synchronize, True
    import numpy as np

    c = np.ones((cpu_size, cpu_size), dtype=np.float32)
    return (lambda: c @ c), (lambda: None), False


def _child() -> None:
    mm, sync, cuda = matmul()
    for _ in range(5):
        mm()
    sync()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    print("ready", "cuda" if cuda else "cpu", flush=True)
    while not stop.is_set():
        for _ in range(4):
            mm()
        sync()
        if not cuda:
            stop.wait(0.01)


@contextlib.contextmanager
def gpu_load() -> Iterator[dict]:
    """The load runs inside the block (CUDA started before it is entered)."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.load"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        first = (proc.stdout.readline() or "").split()
        if first[:1] != ["ready"]:
            raise RuntimeError(f"the load process did not start (exit {proc.poll()})")
        yield {"device": first[1] if len(first) > 1 else "?", "pid": proc.pid}
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    _child()
