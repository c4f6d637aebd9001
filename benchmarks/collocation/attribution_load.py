"""A user's GPU job for the attribution proof: torch only (no MLflow import), reporting its work with
`radt_ext.log_progress` (a sample = one matrix product, or one training sample).

    python3 benchmarks/collocation/attribution_load.py matmul --size 8192 --seconds 4      # time-bound
    python3 benchmarks/collocation/attribution_load.py matmul --size 8192 --products 1200  # a fixed amount of work
    python3 benchmarks/collocation/attribution_load.py cnn --batch 32 --steps 1500         # a small CNN, launch-bound

bf16 products / a bf16-autocast CNN on a CUDA GPU; float32 on the CPU where there is none (a dry run).
Prints the work done. The CNN stops at --steps or after --seconds, whichever comes first.
"""
from __future__ import annotations

import argparse
import time

import torch

import radt_ext


def matmul(args, device, dtype) -> int:
    a = torch.randn(args.size, args.size, device=device, dtype=dtype)
    b = torch.randn_like(a)
    (a @ b).sum().item()  # CUDA and cuBLAS set up before the clock starts
    done, start = 0, time.time()
    while (done < args.products) if args.products else (time.time() - start < args.seconds):
        n = min(10, args.products - done) if args.products else 10
        for _ in range(n):
            a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        done += n
        radt_ext.log_progress(samples=n)
    return done


def cnn(args, device, dtype) -> int:
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)
    autocast = torch.autocast(device.type, dtype=dtype, enabled=device.type == "cuda")
    done, start = 0, time.time()
    while done < args.steps and time.time() - start < args.seconds:
        with autocast:
            loss = torch.nn.functional.cross_entropy(net(x).float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        done += 1
        radt_ext.log_progress(samples=args.batch, steps=1)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return done * args.batch


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kind", choices=["matmul", "cnn"])
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--products", type=int, default=0, help="matmul: stop after this many (0: --seconds)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1500)
    args = ap.parse_args(argv)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    dtype = torch.bfloat16 if cuda else torch.float32
    done = (matmul if args.kind == "matmul" else cnn)(args, device, dtype)
    print(f"attribution_load {args.kind}: {done} samples on {device}", flush=True)


if __name__ == "__main__":
    main()
