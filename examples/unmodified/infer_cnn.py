"""A user's inference loop: a small CNN classifying batches of 64x64 images in bf16, each batch's
predictions copied back to the host. It knows nothing of radt-ext and logs nothing.

    python infer_cnn.py --batch 8 --steps 22000
    python infer_cnn.py --batch 8 --steps 20 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--steps", type=int, default=22000)
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true", help="a narrow model (a CPU)")
args = ap.parse_args()

w = 8 if args.tiny else 64
model = nn.Sequential(
    nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(w, 2 * w, 3, padding=1), nn.BatchNorm2d(2 * w), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.BatchNorm2d(4 * w), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
    nn.Flatten(), nn.Linear(4 * w, 100)).to(args.device).eval()
side = 16 if args.tiny else 64
images = torch.rand(args.batch, 3, side, side, device=args.device)
dtype = torch.bfloat16
start = time.time()
with torch.inference_mode(), torch.autocast(args.device.split(":")[0], dtype=dtype):
    for _ in range(args.steps):
        labels = model(images).argmax(1).cpu()
print(f"infer_cnn: {args.steps} batches of {args.batch} in {time.time() - start:.1f} s")
