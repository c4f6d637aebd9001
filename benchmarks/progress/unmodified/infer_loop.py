"""A launch-bound inference loop: a small CNN called on batches of 8, bf16 on a GPU, thousands of calls a
second; prints its calls and samples per second as one JSON line at the end.

    python infer_loop.py --seconds 10 --batch 8
"""
import argparse
import json
import time

import torch
from torch import nn


def small_cnn():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(64, 10))


def setup(device_name, batch, size=32):
    device = torch.device(device_name)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    model = small_cnn().to(device, dtype).eval()
    x = torch.randn(batch, 3, size, size, device=device, dtype=dtype)
    return model, x


def run_for(model, x, seconds, check_every=64):
    """(calls, seconds) of calling the model for about `seconds`."""
    calls, t0 = 0, time.perf_counter()
    with torch.inference_mode():
        while True:
            for _ in range(check_every):
                model(x)
            calls += check_every
            if time.perf_counter() - t0 >= seconds:
                break
    if x.is_cuda:
        torch.cuda.synchronize()
    return calls, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    model, x = setup(args.device, args.batch)
    run_for(model, x, 1.0)  # warm-up
    calls, seconds = run_for(model, x, args.seconds)
    print(json.dumps({"calls": calls, "samples": calls * args.batch, "calls_per_s": calls / seconds,
                      "samples_per_s": calls * args.batch / seconds}), flush=True)


if __name__ == "__main__":
    main()
