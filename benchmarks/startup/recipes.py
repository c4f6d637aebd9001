"""Recipe variants on the GPU machine, independent of any tracking store.

    python -m benchmarks.startup.recipes --part train  --out $OUT/recipes_train.json
    python -m benchmarks.startup.recipes --part sparse --out $OUT/recipes_sparse.json
    python -m benchmarks.startup.recipes --part int8   --out $OUT/recipes_int8.json

train:  ResNet-50, batch 128, channels_last, synthetic 224x224 - fp32 (TF32 convolutions, PyTorch's
        default), strict fp32, bf16 autocast (cnn_amp), bf16 + torch.compile, and bf16 + compile with
        CUDA graphs (reduce-overhead). Targets: amp >= 1.4x fp32, best combined >= 2x.
sparse: 2:4 semi-structured fp16 on a linear-heavy inference model (4 square linear layers) at
        4096/8192/16384, applied per layer only where a timed sparse matmul beats dense. Target >= 1.2x.
int8:   static int8 PTQ vs fp32 CPU inference of a CNN trained on scikit-learn's digits.
        Target >= 2x throughput with <= 1 point accuracy drop.
Joules per sample come from NVML's energy counter around each timed window where a GPU answers.
Nothing is asserted: the results go to the JSON file and a table.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch import nn

from radt_ext.workloads import pruning, quantization, torch_data, torch_models
from radt_ext.workloads.torch_device import autocast, grad_scaler, set_matmul_precision


class Energy:
    """Millijoule counter of GPU 0 through NVML, or None where it does not answer."""

    def __init__(self):
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            self.read = lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(self.handle) / 1e3
            self.read()
        except Exception:
            self.read = None

    def joules(self, fn) -> tuple[float, float | None]:
        start_j = self.read() if self.read else None
        t0 = time.perf_counter()
        fn()
        seconds = time.perf_counter() - t0
        return seconds, (self.read() - start_j) if self.read else None


def train_resnet50(energy: Energy, steps: int, warmup: int, batch: int) -> list[dict]:
    device = torch.device("cuda")
    x = torch.randn(batch, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    configs = [
        ("cnn_baseline fp32 (TF32 convs)", "fp32", "none"),
        ("cnn_baseline strict fp32 (TF32 off)", "fp32-strict", "none"),
        ("cnn_amp bf16", "bf16", "none"),
        ("cnn_compiled bf16 + compile", "bf16", "default"),
        ("cnn_compiled bf16 + compile + CUDA graphs", "bf16", "reduce-overhead"),
    ]
    rows = []
    for label, precision, mode in configs:
        torch.manual_seed(0)
        set_matmul_precision(precision)
        model = torch_models.build("resnet50", 1000, (3, 224, 224)).to(device).to(memory_format=torch.channels_last)
        step_model = model if mode == "none" else torch.compile(model, mode=mode)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        scaler = grad_scaler(device, precision)

        def step():
            if mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            with autocast(device, precision):
                loss = nn.functional.cross_entropy(step_model(x).float(), y)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()

        t0 = time.perf_counter()
        for _ in range(warmup):
            step()
        torch.cuda.synchronize()
        warm_s = time.perf_counter() - t0

        def run():
            for _ in range(steps):
                step()
            torch.cuda.synchronize()

        seconds, joules = energy.joules(run)
        samples = steps * batch
        rows.append({"config": label, "precision": precision, "compile_mode": mode, "img_per_s": samples / seconds,
                     "j_per_sample": joules / samples if joules is not None else None, "warmup_s": warm_s})
        print(f"  {label}: {samples / seconds:,.0f} img/s", file=sys.stderr, flush=True)
        del model, step_model, opt
        torch.cuda.empty_cache()
    base = rows[0]["img_per_s"]
    for row in rows:
        row["speedup_vs_fp32"] = row["img_per_s"] / base
    return rows


def sparse_24(energy: Energy, sizes: list[int], iters: int) -> list[dict]:
    device = torch.device("cuda")
    reason = pruning.semi24_refusal(device)
    if reason:
        return [{"error": reason}]
    rows = []
    for h in sizes:
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(h, h) for _ in range(4)]).to(device).half().eval()
        pruning.apply_24_masks(model)
        pruning.make_permanent(model)
        x = torch.randn(h, h, device=device, dtype=torch.half)

        def timed(m):
            with torch.no_grad():
                for _ in range(3):
                    m(x)
                torch.cuda.synchronize()

                def run():
                    for _ in range(iters):
                        m(x)
                    torch.cuda.synchronize()

                return energy.joules(run)

        dense_s, dense_j = timed(model)
        decisions = pruning.convert_24(model, batch_rows=h)
        sparse_s, sparse_j = timed(model)
        used = sum(d.get("used", False) for d in decisions)
        rows.append({"size": h, "dense_ms": dense_s / iters * 1e3, "sparse_ms": sparse_s / iters * 1e3,
                     "speedup": dense_s / sparse_s, "layers_2to4": f"{used}/{len(decisions)}",
                     "dense_j_per_batch": dense_j / iters if dense_j is not None else None,
                     "sparse_j_per_batch": sparse_j / iters if sparse_j is not None else None,
                     "per_layer": decisions})
        print(f"  2:4 {h}: {dense_s / sparse_s:.2f}x ({used}/{len(decisions)} layers)", file=sys.stderr, flush=True)
        del model, x
        torch.cuda.empty_cache()
    return rows


def int8_digits(epochs: int, width: int, batch: int, iters: int) -> list[dict]:
    from radt_ext.workloads.inference import evaluate

    train_device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cpu = torch.device("cpu")
    torch.manual_seed(0)
    data = torch_data.load("digits", 64, train_device)
    model = torch_models.build("small_cnn", 10, data.input_shape, width=width).to(train_device)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    for _ in range(epochs):
        model.train()
        for xb, yb in data.train:
            loss = nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    model = model.cpu().eval()
    cpu_val = torch_data.load("digits", batch, cpu).val
    example = (next(iter(data.calibration))[0],)
    qmodel = quantization.static_int8(model, data.calibration, example)
    x = torch.randn(batch, *data.input_shape)
    rows = []
    for label, m in (("fp32", model), ("static int8 (x86)", qmodel)):
        _, acc = evaluate(m, cpu_val, cpu)
        with torch.no_grad():
            for _ in range(5):
                m(x)
            t0 = time.perf_counter()
            for _ in range(iters):
                m(x)
            seconds = time.perf_counter() - t0
        rows.append({"model": label, "accuracy": acc, "img_per_s": batch * iters / seconds,
                     "size_bytes": torch_models.size_bytes(m), "threads": torch.get_num_threads()})
    rows[1]["speedup"] = rows[1]["img_per_s"] / rows[0]["img_per_s"]
    rows[1]["accuracy_drop_pts"] = 100 * (rows[0]["accuracy"] - rows[1]["accuracy"])
    return rows


def markdown(part: str, rows: list[dict]) -> str:
    if not rows:
        return ""
    keys = [k for k in rows[0] if k != "per_layer"]
    for row in rows[1:]:
        keys += [k for k in row if k not in keys and k != "per_layer"]
    cell = lambda v: "–" if v is None else (f"{v:,.4g}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = [f"### {part}", "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(cell(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("train", "sparse", "int8", "all"), default="all")
    ap.add_argument("--out", required=True, help="JSON file to write (a .md table is written beside it)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--sizes", default="4096,8192,16384")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--int8-epochs", type=int, default=15)
    ap.add_argument("--int8-width", type=int, default=64)
    ap.add_argument("--int8-batch", type=int, default=256)
    args = ap.parse_args(argv)
    needs_gpu = args.part in ("train", "sparse", "all")
    if needs_gpu and not torch.cuda.is_available():
        raise SystemExit(f"benchmarks.startup.recipes --part {args.part} needs a CUDA GPU; run --part int8 on CPU")
    energy = Energy()
    result = {"torch": torch.__version__,
              "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
              "cpu_threads": torch.get_num_threads(), "args": vars(args), "parts": {}}
    if args.part in ("train", "all"):
        result["parts"]["train_resnet50"] = train_resnet50(energy, args.steps, args.warmup, args.batch)
    if args.part in ("sparse", "all"):
        result["parts"]["sparse_24"] = sparse_24(energy, [int(s) for s in args.sizes.split(",")], args.iters)
    if args.part in ("int8", "all"):
        result["parts"]["int8_digits"] = int8_digits(args.int8_epochs, args.int8_width, args.int8_batch, args.iters)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    table = "\n\n".join(markdown(k, v) for k, v in result["parts"].items())
    out.with_suffix(".md").write_text(f"GPU: {result['gpu']}, torch {result['torch']}\n\n{table}\n")
    print(table)


if __name__ == "__main__":
    main()
