"""A steady matrix-multiply load: the README's main job and the GPU proof's workload.

    radt-ext run -- python -m radt_ext.workloads.matmul --seconds 10

bf16 on a CUDA GPU through torch; float32 numpy on the CPU where there is no GPU
(or no torch). Logs params and reports progress (one "sample" = one product).
"""
from __future__ import annotations

import time

T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402

import mlflow  # noqa: E402

from radt_ext.workload_api.markers import monitor_run_id
from radt_ext.workload_api.progress import log_progress  # noqa: E402

ENV_TIMINGS = "RADT_EXT_WORKLOAD_TIMINGS"  # a file: the time.time() of each step (benchmarks/first_run.py)
TIMES = {"started": T0}


def _mark(step: str) -> None:
    TIMES[step] = time.time()


def _write_times() -> None:
    path = os.environ.get(ENV_TIMINGS)
    if path:
        with open(path, "w") as fh:
            json.dump(TIMES, fh)


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


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
    # the run it is handed (mlflow run's, else the one radt-ext records this command into), else its own
    with mlflow.start_run(run_id=os.environ.get("MLFLOW_RUN_ID") or monitor_run_id() or None):
        _mark("run_joined")
        device = torch.cuda.get_device_name(0) if torch else "cpu"
        mlflow.log_params({"workload": "matmul", "size": size, "seconds": args.seconds,
                           "dtype": "bfloat16" if torch else "float32", "device": device})
        if not torch:
            print("radt-ext matmul: no CUDA GPU, running float32 matmuls on the CPU")
        time.sleep(args.idle)
        flops_each = 2.0 * size**3
        if torch:
            a = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
            mm, sync = (lambda: a @ b), torch.cuda.synchronize
        else:
            import numpy as np

            rng = np.random.default_rng(0)
            a = rng.standard_normal((size, size), dtype=np.float32)
            b = rng.standard_normal((size, size), dtype=np.float32)
            mm, sync = (lambda: a @ b), (lambda: None)
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
        mlflow.log_metrics({"matmuls": done, "tflops": done * flops_each / elapsed / 1e12})
        time.sleep(args.idle)
    _mark("logged")
    _write_times()


if __name__ == "__main__":
    main()
