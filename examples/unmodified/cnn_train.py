"""A user's small CNN trained on random 32x32 images with mixed precision and SGD, the loss printed every
100 steps. It knows nothing of radt-ext and logs nothing; its last line gives its own count of samples.

    python cnn_train.py --batch 128 --steps 4800
    python cnn_train.py --batch 16 --steps 10 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=128)
ap.add_argument("--steps", type=int, default=4800)
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true")
args = ap.parse_args()

w = 8 if args.tiny else 64
model = nn.Sequential(
    nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(),
    nn.Conv2d(w, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(w, 2 * w, 3, padding=1), nn.BatchNorm2d(2 * w), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.BatchNorm2d(4 * w), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(4 * w, 10)).to(args.device).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
cuda = args.device.startswith("cuda")
scaler = torch.amp.GradScaler(enabled=cuda)
x = torch.randn(args.batch, 3, 32, 32, device=args.device).to(memory_format=torch.channels_last)
y = torch.randint(0, 10, (args.batch,), device=args.device)
start = time.time()
for step in range(args.steps):
    with torch.autocast(args.device.split(":")[0], dtype=torch.float16 if cuda else torch.bfloat16, enabled=cuda):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    if step % 100 == 0:
        print(f"step {step} loss {loss.item():.3f}", flush=True)
print(f"cnn_train: {args.steps} steps, {args.steps * args.batch} samples in {time.time() - start:.1f} s")
