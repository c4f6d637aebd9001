"""Monitoring overhead: throughput of one launch-bound training loop with and without monitors.

    python -m benchmarks.sampling.overhead --out docs/benchmarks/gpu --budget-s 300

The workload is a CIFAR-style ResNet-18 (32×32 inputs, bf16 autocast on CUDA) on synthetic
data, trained in this process; it calls `radt_ext.log_progress` every step in every
configuration. The monitors are switched on and off around it in one process, so every
configuration sees the same warmed-up model, GPU clocks and CUDA context:

  none            no monitoring (the baseline)
  none-b          no monitoring again, at another place in the round: its "loss" is the noise floor
  radt-ext-1hz    `radt_ext.track(interval=1.0)`: every available listener, separate process
  radt-ext-10hz   `radt_ext.track(interval=0.1)`
  radt-ext-10hz:nvml+top   (not in the default list) only those listeners, to find which one costs
  mlflow-1s       MLflow's built-in system metrics (a thread in this process), sampling every 1 s
  mlflow-0.1s     the same at 0.1 s
  radt            radT (PyPI `radt`) with its SMI and TOP listeners (fixed 1 s: `nvidia-smi -l 1`, `top -d 1`)

A round runs every monitored configuration once in a shuffled order, each between two
baseline (`none`) windows: none, A, none, B, none, ... Every window (baseline too) trains
`--settle` seconds untimed after its monitor started, then a timed window. Its loss in a
round is 1 - its throughput / the mean of the two baseline windows beside it (slow drift of
the machine cancels); the table reports the median and quartiles over rounds. `none-b`
(nothing started) measures the noise floor of that comparison.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import random
import re
import signal
import statistics
import sys
import tempfile
import time
import traceback
import types

from benchmarks.common import fmt, spread, table, write_results

class Stop(Exception):
    """SIGTERM (a `timeout` around the script): stop measuring and write what was measured."""


# radt-ext-<rate>hz, optionally with a listener list: radt-ext-10hz:nvml,top (to find which listener costs)
RADT_EXT_CONFIG = re.compile(r"^radt-ext-\d+(\.\d+)?hz(:[a-z_]+(\+[a-z_]+)*)?$")
_MAIN_PID = os.getpid()


def _stop(signum, _frame):
    if os.getpid() != _MAIN_PID:  # a child forked by a monitor (radT's listeners): die as by default
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    raise Stop()


CONFIGS = ["none", "none-b", "radt-ext-1hz", "radt-ext-10hz", "mlflow-1s", "mlflow-0.1s", "radt"]


# --------------------------------------------------------------------------- workload

def build_model(torch, width: int = 64, num_classes: int = 10):
    """ResNet-18 for 32×32 inputs (3×3 stem, no max-pool; stages of 2 BasicBlocks)."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.short = nn.Sequential()
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = torch.relu(self.b1(self.c1(x)))
            return torch.relu(self.b2(self.c2(out)) + self.short(x))

    layers = [nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU()]
    cin = width
    for i, mult in enumerate((1, 2, 4, 8)):
        cout = width * mult
        layers += [Block(cin, cout, 1 if i == 0 else 2), Block(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, num_classes)]
    return nn.Sequential(*layers)


MODELS = {"cifar-resnet18": "CIFAR ResNet-18 (32×32)", "resnet50": "ResNet-50 (torchvision, 224×224)"}


class Trainer:
    def __init__(self, batch: int, width: int, device: str, model: str = "cifar-resnet18",
                 image_size: int | None = None):
        import torch

        from radt_ext.workload_api.progress import log_progress

        self.torch, self.log_progress, self.batch, self.device = torch, log_progress, batch, device
        torch.manual_seed(0)
        torch.backends.cudnn.benchmark = True
        fmt_ = torch.channels_last if device == "cuda" else torch.contiguous_format
        if model == "resnet50":  # a steadier, GPU-bound loop: few, long kernels per step
            import torchvision

            net, classes, size = torchvision.models.resnet50(weights=None), 1000, image_size or 224
        else:
            net, classes, size = build_model(torch, width), 10, image_size or 32
        self.model = net.to(device, memory_format=fmt_)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.x = torch.randn(batch, 3, size, size, device=device).to(memory_format=fmt_)
        self.y = torch.randint(0, classes, (batch,), device=device)
        self.dtype = torch.bfloat16
        self.description = f"{MODELS[model].split(' (')[0]} ({size}×{size}"

    def step(self) -> None:
        torch = self.torch
        with torch.autocast(self.device, dtype=self.dtype):
            loss = torch.nn.functional.cross_entropy(self.model(self.x), self.y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.log_progress(samples=self.batch, steps=1)

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def run_for(self, seconds: float) -> tuple[int, float]:
        """Train for about `seconds`; (images, exact seconds between the two syncs)."""
        self.sync()
        start = time.perf_counter()
        steps = 0
        while time.perf_counter() - start < seconds:
            self.step()
            steps += 1
        self.sync()
        return steps * self.batch, time.perf_counter() - start


def log_progress_cost(calls: int = 2000) -> dict:
    """µs per `log_progress` call without a session, and with a progress file as under radt-ext."""
    from radt_ext.workload_api import progress

    out = {}
    previous = os.environ.pop(progress.ENV, None)
    try:
        for label, path in (("no_session_us", None),
                            ("with_progress_file_us", os.path.join(tempfile.mkdtemp(prefix="radt-bench-"), "p.json"))):
            if path:
                os.environ[progress.ENV] = path
            start = time.perf_counter()
            for _ in range(calls):
                progress.log_progress(samples=0, steps=0)
            out[label] = 1e6 * (time.perf_counter() - start) / calls
            os.environ.pop(progress.ENV, None)
    finally:
        if previous is not None:
            os.environ[progress.ENV] = previous
    return out


# --------------------------------------------------------------------------- monitors

_radt = None


def load_radt():
    """radT's run module, and how it was loaded (once per process)."""
    global _radt
    if _radt is None:
        _radt = _load_radt()
    return _radt


def _load_radt():
    """radT's run module, and how it was loaded.

    `import radt` pulls in radT's scheduler (pandas, numpy, migedit); when those are missing
    the `radt.run` package (listeners, RADTBenchmark, metric logger: mlflow only) is loaded
    without running `radt/__init__.py`.
    """
    try:
        import radt.run.benchmark as bench

        return bench, "import radt"
    except ImportError as exc:
        first = f"{type(exc).__name__}: {exc}"
    for name in [m for m in sys.modules if m == "radt" or m.startswith("radt.")]:
        del sys.modules[name]
    spec = importlib.util.find_spec("radt")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("radt is not installed (pip install radt, or the wheel in .whl-extra/)")
    stub = types.ModuleType("radt")
    stub.__path__ = list(spec.submodule_search_locations)
    sys.modules["radt"] = stub
    bench = importlib.import_module("radt.run.benchmark")
    return bench, f"radt.run without radt/__init__ (import radt failed: {first})"


@contextlib.contextmanager
def monitor(config: str, run_name: str, info: dict):
    """Switch `config`'s monitoring on around the block; facts about it go into `info`."""
    import mlflow

    if config in ("none", "none-b"):
        yield
    elif config.startswith("radt-ext-"):
        from radt_ext import track

        rate, _, listeners = config[len("radt-ext-"):].partition(":")
        interval = 1.0 / float(rate[:-2])
        with track(listeners=listeners.replace("+", ",") or None, interval=interval, run_name=run_name) as run:
            info["run_id"] = run.info.run_id
            yield
    elif config.startswith("mlflow-"):
        interval = 1.0 if config == "mlflow-1s" else 0.1
        mlflow.set_system_metrics_sampling_interval(interval)
        mlflow.set_system_metrics_samples_before_logging(1)
        with mlflow.start_run(run_name=run_name, log_system_metrics=True) as run:
            info["run_id"] = run.info.run_id
            yield
    elif config == "radt":
        bench, how = load_radt()
        info["radt_loaded_as"] = how
        env = {"RADT_PRESENT": "1", "RADT_LISTENER_SMI": "True", "RADT_LISTENER_TOP": "True",
               "SMI_GPU_ID": os.environ.get("SMI_GPU_ID", "0")}
        os.environ.update(env)
        os.environ.pop("RADT_RUN_ID", None)
        try:
            with mlflow.start_run(run_name=run_name) as run:
                os.environ["RADT_RUN_ID"] = run.info.run_id
                info["run_id"] = run.info.run_id
                instance = bench._get_benchmark_instance()
                info["radt_processes"] = [type(p).__name__ for p in getattr(instance, "processes", [])]
                try:
                    yield
                finally:
                    info["radt_alive_at_end"] = [type(p).__name__ for p in instance.processes if p.is_alive()]
                    bench.shutdown()
        finally:
            for key in (*env, "RADT_RUN_ID"):
                os.environ.pop(key, None)
    else:
        raise ValueError(f"unknown configuration {config!r}; choose from {', '.join(CONFIGS)}")


def points_logged(client, run_id: str) -> tuple[int, int, float]:
    """(metric keys, metric points, run seconds) of a run: proof the monitor really logged."""
    run = client.get_run(run_id)
    keys = list(run.data.metrics)
    points = sum(len(client.get_metric_history(run_id, k)) for k in keys)
    seconds = ((run.info.end_time or run.info.start_time) - run.info.start_time) / 1000.0
    return len(keys), points, seconds


# --------------------------------------------------------------------------- benchmark

def add_trainer_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--width", type=int, default=64, help="channels of the first stage (64 = ResNet-18)")
    ap.add_argument("--model", choices=sorted(MODELS), default="cifar-resnet18",
                    help="; ".join(f"{k}: {v}" for k, v in MODELS.items()))
    ap.add_argument("--image-size", type=int, default=None, help="input side (default 32 for cifar-resnet18, 224 for resnet50)")
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--out", default="benchmark-results")
    ap.add_argument("--seed", type=int, default=0)


def bench_store(experiment: str):
    """MLFLOW_TRACKING_URI, else a fresh SQLite store in /tmp; a private spool; the experiment set."""
    import mlflow

    if not os.environ.get("MLFLOW_TRACKING_URI"):
        db = os.path.join(tempfile.mkdtemp(prefix="radt-bench-"), "mlflow.db")
        os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{db}"
    os.environ.setdefault("RADT_EXT_SPOOL_DIR", tempfile.mkdtemp(prefix="radt-bench-spool-"))
    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    mlflow.set_experiment(experiment)
    return mlflow.MlflowClient()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default=",".join(CONFIGS), help=f"comma list from {', '.join(CONFIGS)}")
    ap.add_argument("--rounds", type=int, default=1000, help="at most this many rounds")
    ap.add_argument("--min-rounds", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=300.0, help="start no new round after this many seconds")
    ap.add_argument("--window", type=float, default=3.0, help="timed seconds per configuration per round")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds trained after a monitor starts, untimed")
    add_trainer_args(ap)
    args = ap.parse_args(argv)
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    bad = [c for c in configs if c not in CONFIGS and not RADT_EXT_CONFIG.match(c)]
    if bad or "none" not in configs:
        ap.error(f"--configs must include none and only names from {', '.join(CONFIGS)} "
                 f"or radt-ext-<rate>hz:<listener>+<listener> (got {args.configs!r})")

    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    client = bench_store("benchmark-overhead")

    trainer = Trainer(args.batch, args.width, device, args.model, args.image_size)
    print(f"overhead: {device}, batch {args.batch}, width {args.width}, configs {configs}", flush=True)
    trainer.run_for(args.warmup)  # the first step alone can take seconds (CUDA start, cuDNN autotuning)
    images, seconds = trainer.run_for(min(2.0, args.window))
    progress_cost = log_progress_cost()
    progress_cost["steps_per_s"] = images / args.batch / seconds
    progress_cost["pct_of_step_with_file"] = progress_cost["with_progress_file_us"] * 1e-6 * progress_cost["steps_per_s"] * 100

    rng = random.Random(args.seed)
    rounds: list[dict] = []
    errors: dict[str, str] = {}
    infos: dict[str, dict] = {}
    started = time.monotonic()
    signal.signal(signal.SIGTERM, _stop)
    stopped = False
    while not stopped and len(rounds) < args.rounds and (len(rounds) < args.min_rounds
                                                         or time.monotonic() - started < args.budget_s):
        monitored = [c for c in configs if c != "none"]
        rng.shuffle(monitored)
        order = ["none"]
        for config in monitored:
            order += [config, "none"]  # every monitored window between two baseline windows
        result: dict = {"order": order, "windows": [], "throughput": {}, "loss_pct": {}}
        rounds.append(result)
        for config in order:
            info: dict = {}
            try:
                with monitor(config, f"{config}-r{len(rounds) - 1}", info):
                    # every window, the baseline's too, starts `settle` s after a pause: the loop runs
                    # faster just after one (an H200 run without the settle: none-b read 7 % below none)
                    trainer.run_for(args.settle)
                    images, seconds = trainer.run_for(args.window)
            except Stop:
                print("SIGTERM: writing the rounds measured so far", flush=True)
                stopped = True
                break
            except Exception as exc:  # a monitor that cannot run here is reported, the others go on
                errors.setdefault(config, f"{type(exc).__name__}: {exc}".splitlines()[0])
                traceback.print_exc()
                result["windows"].append([config, None])
                continue
            result["windows"].append([config, images / seconds])
            if config != "none":
                infos[config] = info
        windows = result["windows"]
        for i, (config, thr) in enumerate(windows):
            if config == "none" or thr is None:
                continue
            if i + 1 < len(windows) and windows[i - 1][1] and windows[i + 1][1]:
                base = (windows[i - 1][1] + windows[i + 1][1]) / 2.0  # the baseline on both sides
                result["loss_pct"][config] = 100.0 * (1.0 - thr / base)
            result["throughput"][config] = thr
        nones = [t for c, t in windows if c == "none" and t]
        if nones:
            result["throughput"]["none"] = statistics.median(nones)
        line = "  ".join(f"{c} {result['loss_pct'].get(c, float('nan')):+.1f}%" for c in configs if c != "none")
        print(f"round {len(rounds)} ({time.monotonic() - started:.0f} s): none "
              f"{result['throughput'].get('none', float('nan')):,.0f} img/s; loss {line}", flush=True)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)

    per_config = {}
    for config in configs:
        thr = [r["throughput"][config] for r in rounds if config in r["throughput"]]
        losses = [r["loss_pct"][config] for r in rounds if config in r["loss_pct"]]
        entry = {"throughput_img_s": spread(thr), "loss_pct": spread(losses)}
        info = infos.get(config, {})
        if info.get("run_id"):
            try:
                keys, points, seconds = points_logged(client, info["run_id"])
                entry.update(metric_keys=keys, metric_points=points, run_s=seconds,
                             points_per_s=points / seconds if seconds > 0 else float("nan"))
            except Exception as exc:
                entry["points_error"] = str(exc).splitlines()[0]
        entry.update({k: v for k, v in info.items() if k != "run_id"})
        if config in errors:
            entry["error"] = errors[config]
        per_config[config] = entry

    headers = ["configuration", "median img/s", "median loss %", "loss IQR %", "loss min..max %", "rounds",
               "metric keys, points per run second (last round)"]
    rows = []
    for config in configs:
        e = per_config[config]
        t, loss = e["throughput_img_s"], e["loss_pct"]
        rows.append([config, fmt(t["median"], 0), fmt(loss["median"]) if config != "none" else "(baseline)",
                     f"{fmt(loss['q1'])} .. {fmt(loss['q3'])}" if config != "none" else "",
                     f"{fmt(loss['min'])} .. {fmt(loss['max'])}" if config != "none" else "",
                     t["n"], f"{e['metric_keys']}, {fmt(e['points_per_s'], 1)}" if "points_per_s" in e else "–"])
    md = [f"### Overhead: CIFAR ResNet-18 (batch {args.batch}, {'bf16 autocast, ' if device == 'cuda' else ''}"
          f"{device}), {len(rounds)} interleaved rounds, {args.window:g} s timed per configuration", "",
          table(headers, rows), ""]
    md += [f"- {c}: **not measured**: {errors[c]}" for c in configs if c in errors]
    if "radt" in per_config and per_config["radt"].get("radt_loaded_as"):
        r = per_config["radt"]
        md.append(f"- radT loaded as: {r['radt_loaded_as']}; its processes {r.get('radt_processes')}, "
                  f"alive when the window ended {r.get('radt_alive_at_end')} (last round)")
    md.append(f"- `radt_ext.log_progress` per call: {fmt(progress_cost['no_session_us'], 1)} µs without a session, "
              f"{fmt(progress_cost['with_progress_file_us'], 1)} µs with the progress file radt-ext sets; at this "
              f"loop's {fmt(progress_cost['steps_per_s'], 0)} steps/s that is "
              f"{fmt(progress_cost['pct_of_step_with_file'])} % of the loop's time (inside the radt-ext windows)")
    result = {"device": device, "args": vars(args), "log_progress": progress_cost, "configs": per_config,
              "rounds": rounds}
    write_results(args.out, "overhead", result, "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
