"""A small CNN trained over a DataLoader whose workers do CPU work for every sample; prints its own
epoch times and samples/s as one JSON line at the end.

    python loader_train.py --epochs 3 --samples 8192 --workers 2
"""
import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Augmented(Dataset):
    """Synthetic images with a CPU-side augmentation of `work` passes per sample."""

    def __init__(self, n, size, work):
        self.n, self.size, self.work = n, size, work

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, self.size, self.size, generator=g)
        for _ in range(self.work):
            x = torch.flip(x, dims=(2,)).mul_(1.0001).clamp_(0.0, 1.0)
        return x, i % 10


def small_cnn():
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(64, 10))


def loader(args):
    return DataLoader(Augmented(args.samples, args.size, args.work), batch_size=args.batch, shuffle=True,
                      num_workers=args.workers, persistent_workers=args.workers > 0)


def train(args):
    device = torch.device(args.device)
    model = small_cnn().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = loader(args)
    times = []
    for _ in range(args.epochs):
        t0 = time.perf_counter()
        for x, y in data:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--samples", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--work", type=int, default=4)
    args = ap.parse_args()
    times = train(args)
    later = times[1:] or times
    print(json.dumps({"epoch_times_s": times, "samples": args.samples * args.epochs,
                      "samples_per_s_from_2nd": args.samples * len(later) / sum(later)}), flush=True)


if __name__ == "__main__":
    main()
