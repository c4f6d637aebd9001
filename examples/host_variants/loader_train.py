"""A small training fed by a CPU-heavy DataLoader (images made and augmented on the CPU, sample by sample):
the host, not the GPU, sets its pace, so the CPUs it is given decide how long it takes. It stands for a
user's script and imports nothing of radt-ext.

    python3 examples/host_variants/loader_train.py --workers 6 --steps 300 --batch-size 64

It prints the CPUs it may use and those of each loader worker (processes it starts), then its steps,
seconds and samples/s. A fixed number of steps: fewer or slower CPUs make it take longer.
"""
import argparse
import os
import sys
import time

import torch
from torch import nn


class Augmented(torch.utils.data.Dataset):
    """Images drawn and augmented on the CPU for each sample (filtering, resize, colour jitter, flip)."""

    def __init__(self, n, side, rounds):
        self.n, self.side, self.rounds = n, side, rounds

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        big = torch.rand(1, 3, self.side + self.side // 2, self.side + self.side // 2, generator=g)  # the "decoded" image
        for _ in range(self.rounds):  # blur and sharpen, as a resize and colour pipeline costs
            soft = nn.functional.avg_pool2d(big, 3, stride=1, padding=1)
            big = (2 * big - soft).clamp(0, 1)
        img = nn.functional.interpolate(big, size=(self.side, self.side), mode="bilinear", align_corners=False)[0]
        img = img * (0.8 + 0.4 * torch.rand(3, 1, 1, generator=g))  # colour jitter
        if torch.rand(1, generator=g).item() < 0.5:
            img = img.flip(2)
        return (img - 0.5) / 0.25, i % 10


def report_worker(worker_id):
    print(f"loader worker {worker_id} (pid {os.getpid()}): cpus {sorted(os.sched_getaffinity(0))}",
          file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=6, help="data loader processes")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--side", type=int, default=96, help="image side, pixels")
    ap.add_argument("--rounds", type=int, default=2, help="filter rounds per sample (CPU work)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    print(f"train: cpus {sorted(os.sched_getaffinity(0))}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"torch threads {torch.get_num_threads()}, device {args.device}", flush=True)
    device = torch.device(args.device)
    model = nn.Sequential(nn.Conv2d(3, 32, 3, stride=2), nn.ReLU(), nn.Conv2d(32, 64, 3, stride=2), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = Augmented(args.steps * args.batch_size, args.side, args.rounds)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch_size, num_workers=args.workers,
                                         worker_init_fn=report_worker, pin_memory=device.type == "cuda")
    start = time.time()
    for step, (x, y) in enumerate(loader):
        loss = nn.functional.cross_entropy(model(x.to(device, non_blocking=True)), y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0:
            print(f"step {step}: loss {loss.item():.3f}", flush=True)
    seconds = time.time() - start
    print(f"train: {args.steps} steps in {seconds:.2f} s, {args.steps * args.batch_size / seconds:.1f} samples/s "
          f"with {args.workers} loader workers", flush=True)


if __name__ == "__main__":
    main()
