"""A user's segmentation training: a small U-Net (three levels, skip connections added after a 1x1
projection, bilinear upsampling) learning to mask the discs in synthetic scenes of discs and
rectangles on noise, with a Dice plus cross-entropy loss, Adam and bf16 autocast; the mean IoU of the
last batch printed every 200 steps. It knows nothing of radt-ext and logs nothing.

    python unet_seg.py --steps 1500
    python unet_seg.py --steps 10 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn
from torch.nn import functional as F

ap = argparse.ArgumentParser(description="segmentation of synthetic scenes with a small U-Net")
ap.add_argument("--steps", type=int, default=1500, help="training steps")
ap.add_argument("--batch", type=int, default=16, help="scenes per step")
ap.add_argument("--side", type=int, default=128, help="scene size in pixels")
ap.add_argument("--tiny", action="store_true", help="narrow, on small scenes, for a CPU")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
args = ap.parse_args()
side, base = (32, 8) if args.tiny else (args.side, 32)


def stage(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU())


class SmallUNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.e1, self.e2, self.e3 = stage(3, c), stage(c, 2 * c), stage(2 * c, 4 * c)
        self.lat2, self.lat1 = nn.Conv2d(2 * c, 4 * c, 1), nn.Conv2d(c, 4 * c, 1)
        self.d2, self.d1 = stage(4 * c, 4 * c), stage(4 * c, 2 * c)
        self.out = nn.Conv2d(2 * c, 2, 1)

    def forward(self, x):
        s1 = self.e1(x)
        s2 = self.e2(F.max_pool2d(s1, 2))
        deep = self.e3(F.max_pool2d(s2, 2))
        up = self.d2(F.interpolate(deep, scale_factor=2, mode="bilinear") + self.lat2(s2))
        return self.out(self.d1(F.interpolate(up, scale_factor=2, mode="bilinear") + self.lat1(s1)))


def scenes(n):
    """Images with two discs (the class to mask) and two rectangles (to ignore) on noise, and their masks."""
    yy, xx = torch.meshgrid(torch.arange(side, device=args.device), torch.arange(side, device=args.device),
                            indexing="ij")
    img, mask = torch.rand(n, 3, side, side, device=args.device) * 0.4, torch.zeros(n, side, side, device=args.device)
    for shape in ("disc", "disc", "box", "box"):
        cy, cx = (torch.rand(2, n, 1, 1, device=args.device) * side).unbind(0)
        r = side / 12 + torch.rand(n, 1, 1, device=args.device) * side / 8
        inside = ((yy - cy) ** 2 + (xx - cx) ** 2 < r ** 2) if shape == "disc" else \
            (((yy - cy).abs() < r) & ((xx - cx).abs() < r / 2))
        img = img + inside[:, None] * torch.rand(n, 3, 1, 1, device=args.device) * 0.6
        mask = torch.where(inside, 1.0 if shape == "disc" else 0.0, mask)
    return img, mask.long()


model = SmallUNet(base).to(args.device).to(memory_format=torch.channels_last)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
cuda = args.device.startswith("cuda")
images, masks = scenes(512 if not args.tiny else 32)
start = time.time()
for step in range(args.steps):
    pick = torch.randint(0, len(images), (args.batch,), device=args.device)
    x, m = images[pick].contiguous(memory_format=torch.channels_last), masks[pick]
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
        logits = model(x)
    logits = logits.float()
    p = logits.softmax(1)[:, 1]
    dice = 1 - (2 * (p * m).sum() + 1) / (p.sum() + m.sum() + 1)
    loss = F.cross_entropy(logits, m) + dice
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if step % 200 == 0:
        hit = logits.argmax(1) == 1
        iou = ((hit & (m == 1)).sum() / ((hit | (m == 1)).sum()).clamp_min(1)).item()
        print(f"step {step}: loss {loss.item():.3f}, IoU {iou:.3f}", flush=True)
print(f"done: {args.steps * args.batch} samples in {time.time() - start:.1f} s")
