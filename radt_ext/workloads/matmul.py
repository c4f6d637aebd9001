"""A steady matrix-multiply load: the README's main job and the GPU proof's workload.

    radt-ext run -- python -m radt_ext.workloads.matmul --seconds 10

bf16 on a CUDA GPU through torch; float32 numpy on the CPU where there is no GPU
(or no torch). Logs params and reports progress (one "sample" = one product).

Its load starts as soon as its device is ready: MLflow's import, joining the run (radt-ext may still be
making a new store) and logging the params happen on a thread of their own meanwhile, and the metrics
go into the run when the load is done.
"""
from __future__ import annotations

import time

T0 = time.time()

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402

from radt_ext.workload_api.markers import monitor_run_id  # noqa: E402
from radt_ext.workload_api.progress import log_progress  # noqa: E402

ENV_TIMINGS = "RADT_EXT_WORKLOAD_TIMINGS"  # a file: the time.time() of each step (benchmarks/startup/first_run.py)
TIMES = {"started": T0}


def _mark(step: str) -> None:
    TIMES[step] = time.time()


def _write_times() -> None:
    path = os.environ.get(ENV_TIMINGS)
    if path:
        with open(path, "w") as fh:
            json.dump(TIMES, fh)


def _nvidia_gpu() -> bool:
    """Whether an NVIDIA driver is there and CUDA_VISIBLE_DEVICES leaves a GPU: known before importing
    torch, which takes seconds."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return False
    return os.path.exists("/proc/driver/nvidia/version") or os.path.exists("/dev/nvidiactl")


def _torch_cuda():
    if not _nvidia_gpu():
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


class RunLog(threading.Thread):
    """The run (the one it is handed: mlflow run's, else the one radt-ext records this command into; else
    its own) joined and the params logged while the load runs; `finish(metrics)` logs the metrics and
    ends it. One thread throughout, since MLflow's active run belongs to the thread that started it."""

    def __init__(self, params: dict):
        super().__init__(name="matmul-mlflow", daemon=True)
        self.params = params
        self.metrics: dict | None = None
        self.error: BaseException | None = None
        self._load_done = threading.Event()

    def run(self) -> None:
        try:
            import mlflow

            _mark("mlflow_imported")
            with mlflow.start_run(run_id=os.environ.get("MLFLOW_RUN_ID") or monitor_run_id() or None):
                _mark("run_joined")
                mlflow.log_params(self.params)
                self._load_done.wait()
                mlflow.log_metrics(self.metrics)
        except BaseException as exc:  # raised again by finish(), in the main thread
            self.error = exc

    def finish(self, metrics: dict) -> None:
        self.metrics = metrics
        self._load_done.set()
        self.join()
        if self.error is not None:
            raise self.error


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--size", type=int, default=None, help="matrix side (default 8192 on GPU, 512 on CPU)")
    ap.add_argument("--idle", type=float, default=0.0, help="seconds idle before and after the load")
    args = ap.parse_args(argv)
    _mark("imported")
    torch = _torch_cuda()
    _mark("device_found")
    size = args.size or (8192 if torch else 512)
    flops_each = 2.0 * size**3
    if torch:
        a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        mm, sync = (lambda: a @ b), torch.cuda.synchronize
        device = torch.cuda.get_device_name(0)
    else:
        import numpy as np

        print("radt-ext matmul: no CUDA GPU, running float32 matmuls on the CPU")
        rng = np.random.default_rng(0)
        a = rng.standard_normal((size, size), dtype=np.float32)
        b = rng.standard_normal((size, size), dtype=np.float32)
        mm, sync, device = (lambda: a @ b), (lambda: None), "cpu"
    run = RunLog({"workload": "matmul", "size": size, "seconds": args.seconds,
                  "dtype": "bfloat16" if torch else "float32", "device": device})
    run.start()
    time.sleep(args.idle)
    _mark("load_started")  # on a GPU: after CUDA's start and the first allocations
    start = time.time()
    done = 0
    while time.time() - start < args.seconds:
        for _ in range(10):
            mm()
        sync()
        done += 10
        log_progress(samples=10, flops=10 * flops_each)
    elapsed = time.time() - start
    _mark("load_ended")
    time.sleep(args.idle)
    run.finish({"matmuls": done, "tflops": done * flops_each / elapsed / 1e12})
    _mark("logged")
    _write_times()


if __name__ == "__main__":
    main()
    gc.disable()  # the exit skips a last collection over MLflow's and torch's objects (~1 s)
    gc.freeze()
