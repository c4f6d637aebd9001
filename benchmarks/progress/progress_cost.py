"""What counting an unmodified script's work costs it: the start-up hook's PyTorch hooks on and off in
paired windows of one process.

    python -m benchmarks.progress.progress_cost --workload infer --budget-s 90 --window 0.1 --settle 0.02 --out <dir>
    python -m benchmarks.progress.progress_cost --workload loader --budget-s 90 --window 0.1 --settle 0.02 --out <dir>

The hooks are installed as in a workload under `radt-ext run` (the post-import finder goes in before
`import torch`, and counts go to a progress file), then switched on and off window by window, in cycles of

    off, on, off, null        (on and null in a random order per cycle; one closing off window)

- `infer`: a launch-bound inference loop (benchmarks/progress/unmodified/infer_loop.py: a small CNN, batch 8, bf16
  on a GPU, thousands of calls a second). One model: on, its calls go through the hook's counting
  wrapper; off, the wrapper is taken away and it is called as torch calls any module.
- `loader`: a DataLoader-fed training loop (benchmarks/progress/unmodified/loader_train.py: 2 loader workers doing
  CPU work per sample, a small CNN, SGD). On: the data-loader and optimizer hooks counting and the
  model's wrapper in place; off and null: the hooks switched off (their patched methods pass straight
  through: an attribute test a call is all that is left of them) and the wrapper taken away.

Every window runs `--settle` s untimed after the switch, then `--window` s timed; its loss is
1 - its throughput / the mean of the two off windows beside it (slow drift cancels). `null` is run like
`off`: its loss is the noise floor. The table gives the median, the mean and a bootstrap 95 % interval of
the mean loss, and what the hooks counted (checked against the batches the loop ran in its on windows).

Beside the windows, what the hooks add to the host's time per iteration, measured where the noise is
smaller than the cost: the same hooks on a CPU stand-in of the loop's Python side (a tiny module called
once per iteration; for `loader`, an in-process loader, the call and an optimizer step per batch), in
`--host-blocks` alternating blocks of `--host-calls` iterations, on and off in a random order per pair.
Its median per-iteration difference set against the GPU loop's own time per iteration (off windows) is
the largest loss counting can cause there: a loop that waits on the GPU hides it, a loop the host paces
(the launch-bound case) pays it in full.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

from benchmarks.common import fmt, spread, table, write_results
from benchmarks.sampling.overhead_paired import loss_summary, losses, schedule


def _hooks_first(progress_file: str) -> None:
    """What the workload's sitecustomize does: the finder before torch is imported."""
    os.environ["RADT_EXT_PROGRESS_FILE"] = progress_file
    os.environ.pop("RADT_EXT_NO_PROGRESS", None)
    if "torch" in sys.modules:
        raise SystemExit("progress_cost: torch was imported before the hooks; run it as a script of its own")
    from radt_ext.workload_api import autoprogress

    if not autoprogress.install():
        raise SystemExit("progress_cost: the hooks did not install")


class Wrapper:
    """The hook's wrapper of one model, taken away for the off windows and put back for the on ones: the
    same model, the same memory, only the counting differs."""

    def __init__(self, model, x):
        from radt_ext.workload_api.autoprogress.torch_forward import SLOT  # imports torch: not before the hooks

        model(x)  # the first call decides that the model is outermost and keeps its counting wrapper
        self.slot, self.model, self.wrapper = SLOT, model, model.__dict__.get(SLOT)
        if self.wrapper is None:
            raise SystemExit("progress_cost: the model carries no counting wrapper (are the hooks installed?)")

    def set(self, on: bool) -> None:
        if on:
            self.model.__dict__[self.slot] = self.wrapper
        else:
            self.model.__dict__.pop(self.slot, None)


class Infer:
    """The inference loop, the same model counted (on) or not (off)."""

    description = "small CNN inference, batch {batch}, {dtype}"

    def __init__(self, device: str, batch: int):
        import torch

        from benchmarks.progress.unmodified import infer_loop

        self.loop = infer_loop
        self.model, self.x = infer_loop.setup(device, batch)
        with torch.inference_mode():
            self.wrapper = Wrapper(self.model, self.x)
        self.batch = batch
        self.dtype = str(self.x.dtype).replace("torch.", "")
        self.done = 1  # calls counted: the deciding call, then the on windows'

    def run_for(self, seconds: float, on: bool) -> tuple[float, float]:
        self.wrapper.set(on)
        calls, took = self.loop.run_for(self.model, self.x, seconds)
        if on:
            self.done += calls
        return calls * self.batch, took

    def counted(self, totals: dict) -> dict:
        return {"forwards": totals.get("forwards", 0), "calls_in_on_windows": self.done}


class Loader:
    """The loader-fed training loop; on: the loader and optimizer hooks counting and the model's wrapper in
    place, off: the hooks passing straight through and the wrapper taken away."""

    description = "small CNN training over a DataLoader ({workers} workers), batch {batch}"

    def __init__(self, device: str, batch: int, workers: int):
        import torch

        from benchmarks.progress.unmodified import loader_train
        from radt_ext.workload_api.autoprogress import torch_loader

        self.torch, self.hooks = torch, (torch_loader.HOOK, torch_loader.STEPS)
        args = argparse.Namespace(samples=1 << 20, size=32, work=4, batch=batch, workers=workers)
        self.data = loader_train.loader(args)
        self.device = torch.device(device)
        self.model = loader_train.small_cnn().to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.it = iter(self.data)
        x, _ = self._next()
        self.wrapper = Wrapper(self.model, x.to(self.device))
        self.batch, self.workers = batch, workers
        self.done = x.shape[0]  # the deciding batch: its pass turns training at the first step, so it counts

    def _next(self):
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.data)
            return next(self.it)

    def run_for(self, seconds: float, on: bool) -> tuple[float, float]:
        torch, nn = self.torch, self.torch.nn
        for hook in self.hooks:
            hook.on = on
        self.wrapper.set(on)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            x, y = self._next()
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"):
                loss = nn.functional.cross_entropy(self.model(x), y)
            loss.backward()
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            n += x.shape[0]
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        if on:
            self.done += n
        return n, time.perf_counter() - t0

    def counted(self, totals: dict) -> dict:
        return {"steps": totals.get("steps", 0), "train_samples": totals.get("train_samples", 0),
                "samples_in_on_windows": self.done}


class HostSide:
    """The hooks' per-iteration host time: a CPU stand-in of the workload's Python side, on against off."""

    def __init__(self, workload: str, batch: int, calls: int):
        import torch

        self.torch, self.workload, self.calls = torch, workload, calls
        torch.manual_seed(0)
        self.model = torch.nn.Linear(4, 2)
        x = torch.randn(batch, 4)
        self.x = x
        # an optimizer first: the stand-in is not the process's first model, and a later top-level module keeps
        # its counting wrapper only once something trains
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-6)
        self.wrapper = Wrapper(self.model, x)
        if workload == "loader":
            from torch.utils.data import DataLoader, TensorDataset

            from radt_ext.workload_api.autoprogress import torch_loader

            self.hooks = (torch_loader.HOOK, torch_loader.STEPS)
            self.data = DataLoader(TensorDataset(torch.randn(batch * calls, 4)), batch_size=batch)
        else:
            self.hooks = ()

    def block(self, on: bool) -> float:
        """Seconds per iteration over one block."""
        for hook in self.hooks:
            hook.on = on
        self.wrapper.set(on)
        model, calls = self.model, self.calls
        if self.workload == "infer":
            x = self.x
            with self.torch.inference_mode():
                t0 = time.perf_counter()
                for _ in range(calls):
                    model(x)
                return (time.perf_counter() - t0) / calls
        opt, n = self.opt, 0
        t0 = time.perf_counter()
        for (x,) in self.data:
            model(x)
            opt.step()
            n += 1
        return (time.perf_counter() - t0) / n

    def measure(self, blocks: int, rng) -> dict:
        self.block(True), self.block(False)  # warm
        diffs, on_s, off_s = [], [], []
        for _ in range(blocks):
            order = [True, False]
            rng.shuffle(order)
            took = {on: self.block(on) for on in order}
            diffs.append(took[True] - took[False])
            on_s.append(took[True])
            off_s.append(took[False])
        for hook in self.hooks:
            hook.on = True
        self.wrapper.set(True)
        us = [1e6 * d for d in diffs]
        return {"blocks": blocks, "calls_per_block": self.calls, "added_us_median": statistics.median(us),
                "added_us_q1_q3": statistics.quantiles(us, n=4)[::2], "off_us_median": 1e6 * statistics.median(off_s),
                "on_us_median": 1e6 * statistics.median(on_s)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("infer", "loader"), required=True)
    ap.add_argument("--budget-s", type=float, default=90.0, help="start no new cycle after this many seconds")
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--window", type=float, default=1.0, help="timed seconds per window")
    ap.add_argument("--settle", type=float, default=0.2, help="seconds run untimed after each switch")
    ap.add_argument("--warmup", type=float, default=6.0)
    ap.add_argument("--batch", type=int, default=None, help="default: 8 (infer), 64 (loader)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--device", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--host-blocks", type=int, default=300, help="on/off pairs of the host-side measurement")
    ap.add_argument("--host-calls", type=int, default=None, help="iterations per host-side block (default: 2000 "
                    "for infer, 200 for loader)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    progress = tempfile.NamedTemporaryFile(prefix="radt-progress-cost-", suffix=".jsonl", delete=False).name
    _hooks_first(progress)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.workload == "infer":
        work = Infer(device, args.batch or 8)
        what = work.description.format(batch=work.batch, dtype=work.dtype)
    else:
        work = Loader(device, args.batch or 64, args.workers)
        what = work.description.format(batch=work.batch, workers=work.workers)
    print(f"progress_cost: {args.workload} on {device}: {what}", flush=True)
    work.run_for(args.warmup / 2, True)
    work.run_for(args.warmup / 2, False)
    windows, started = [], time.monotonic()
    for kind, cycle in schedule(args.cycles, args.budget_s, started, random.Random(args.seed)):
        on = kind == "on"
        work.run_for(args.settle, on)
        samples, seconds = work.run_for(args.window, on)
        windows.append({"kind": kind, "cycle": cycle, "throughput": samples / seconds, "seconds": seconds})
    losses(windows)
    from radt_ext.workload_api.autoprogress.records import flush_all
    from radt_ext.workload_api.progress import read_marks

    flush_all()
    raw = {}
    with open(progress) as fh:
        for line in fh:
            record = json.loads(line)
            if record.get("src") == "torch" and not {"epoch", "hooked", "error"} & set(record):
                raw = record  # the last totals
    counted = work.counted(raw)  # before the host side's stand-in adds its own calls
    host = HostSide(args.workload, work.batch, args.host_calls or (2000 if args.workload == "infer" else 200)).measure(args.host_blocks, random.Random(args.seed))
    off = spread([w["throughput"] for w in windows if w["kind"] == "off"])
    per_iter_us = 1e6 * work.batch / off["median"]
    host["gpu_loop_us_per_iteration"] = per_iter_us
    host["bound_pct"] = 100.0 * host["added_us_median"] / per_iter_us
    summary = loss_summary(windows, args.seed)
    result = {"workload": args.workload, "what": what, "device": device, "args": vars(args),
              "off_throughput_samples_s": off, "loss": summary, "counted": counted, "host_side": host,
              "progress_source": read_marks(progress).source, "windows": windows}
    rows = [[kind, s["windows"], fmt(s["median_pct"]), fmt(s["mean_pct"]),
             f"{fmt(s['ci95_mean_pct'][0])} .. {fmt(s['ci95_mean_pct'][1])}"] for kind, s in summary.items()]
    md = [f"### Counting an unmodified script's work: {what} ({device}), {args.window:g} s windows", "",
          table(["windows", "n", "median loss %", "mean loss %", "95 % CI of the mean (bootstrap) %"], rows), "",
          f"- on = the hooks counting, null = off again (the noise floor); off windows: median "
          f"{fmt(off['median'], 0)} samples/s over {off['n']}",
          f"- counted by the hooks (source {result['progress_source']}): {result['counted']}",
          f"- host side ({host['blocks']} on/off pairs of {host['calls_per_block']} iterations of the CPU stand-in): "
          f"the hooks add {fmt(host['added_us_median'], 3)} µs an iteration (quartiles "
          f"{fmt(host['added_us_q1_q3'][0], 3)} .. {fmt(host['added_us_q1_q3'][1], 3)}; stand-in off "
          f"{fmt(host['off_us_median'], 2)} µs); the GPU loop takes {fmt(per_iter_us, 1)} µs an iteration: "
          f"at most **{fmt(host['bound_pct'], 3)} %** of its throughput, paid in full only where the host paces it"]
    write_results(args.out, f"progress_cost_{args.workload}", result, "\n".join(md))
    os.unlink(progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
