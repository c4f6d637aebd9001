"""A user's training script fed by a DataLoader whose workers make and augment every image on the CPU
(noise, crop, flip, normalisation), training a small CNN. It knows nothing of radt-ext and logs nothing;
its last line gives its own count of samples.

    python loader_train.py --workers 6 --batches 1300
    python loader_train.py --workers 1 --batches 8 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn


class Augmented(torch.utils.data.Dataset):
    def __init__(self, n, side):
        self.n, self.side = n, side

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, self.side + 8, self.side + 8, generator=g)
        for _ in range(6):  # the CPU work of a real pipeline: decode, resize, colour jitter
            img = (img * 1.01 + torch.rand(img.shape, generator=g) * 0.01).clamp(0, 1)
        x, y = torch.randint(0, 8, (2,), generator=g).tolist()
        img = img[:, y:y + self.side, x:x + self.side]
        if i % 2:
            img = img.flip(2)
        return (img - 0.5) / 0.25, i % 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batches", type=int, default=1300)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    side, w = (16, 8) if args.tiny else (64, 32)
    data = Augmented(args.batch * args.batches, side)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, num_workers=args.workers,
                                         pin_memory=args.device.startswith("cuda"), persistent_workers=False)
    model = nn.Sequential(nn.Conv2d(3, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(2 * w, 10)).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    start, seen = time.time(), 0
    for x, y in loader:
        x, y = x.to(args.device, non_blocking=True), y.to(args.device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        seen += len(x)
    print(f"loader_train: {args.batches} batches, {seen} samples, {args.workers} workers, loss {loss.item():.3f}, "
          f"{time.time() - start:.3f} s")


if __name__ == "__main__":
    main()
