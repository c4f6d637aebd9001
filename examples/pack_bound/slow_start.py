"""A user's training script with a long start-up before its first step: it makes its data set on the
CPU first (synthetic images of bright blobs on noise, each blurred, jittered, cropped and flipped, one by
one, as a real pipeline that decodes and augments up front), then trains a small CNN on it on the
device. It knows nothing of radt-ext and logs nothing.

    python slow_start.py --images 1400 --steps 2500
    python slow_start.py --images 200 --steps 20 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn


def make_image(g, side, source):
    """One image "decoded" at `source` pixels, blurred, jittered, resized to side + 6, cropped and flipped."""
    label = int(torch.randint(0, 4, (1,), generator=g))
    img = torch.rand(1, 3, source, source, generator=g) * 0.3
    r = source // 12
    for _ in range(label + 1):  # the class is the number of blobs
        cy, cx = torch.randint(r, source - r, (2,), generator=g).tolist()
        img[..., cy - r:cy + r, cx - r:cx + r] += 0.7
    for _ in range(4):  # blur and colour jitter at full size, as a decode-and-augment step would
        img = nn.functional.avg_pool2d(img, 5, 1, 2) * (0.9 + 0.2 * torch.rand(1, 3, 1, 1, generator=g))
    img = nn.functional.interpolate(img, size=(side + 6, side + 6), mode="bilinear", antialias=True)[0]
    dy, dx = torch.randint(0, 6, (2,), generator=g).tolist()
    img = img[:, dy:dy + side, dx:dx + side]
    return (img.flip(2) if dx % 2 else img), label


def main():
    ap = argparse.ArgumentParser(description="make a data set on the CPU, then train on it")
    ap.add_argument("--images", type=int, default=1400, help="images made on the CPU before training")
    ap.add_argument("--steps", type=int, default=2500, help="training steps")
    ap.add_argument("--batch", type=int, default=128, help="images per step")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="where it trains")
    ap.add_argument("--tiny", action="store_true", help="small images and model for a CPU")
    args = ap.parse_args()
    side, source, w = (16, 32, 8) if args.tiny else (48, 192, 48)
    g = torch.Generator().manual_seed(0)
    made, threads = time.time(), torch.get_num_threads()
    torch.set_num_threads(1)  # one image at a time on one core, as a PIL pipeline would make them
    pairs = [make_image(g, side, source) for _ in range(args.images)]
    torch.set_num_threads(threads)
    images = torch.stack([p[0] for p in pairs]).to(args.device)
    labels = torch.tensor([p[1] for p in pairs], device=args.device)
    made = time.time() - made
    model = nn.Sequential(nn.Conv2d(3, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(2 * w, 2 * w, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(2 * w, 4)).to(args.device)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    start = time.time()
    for step in range(args.steps):
        pick = torch.randint(0, args.images, (args.batch,), device=args.device)
        loss = nn.functional.cross_entropy(model(images[pick]), labels[pick])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step == args.steps // 2:
            for group in opt.param_groups:  # a step decay halfway
                group["lr"] /= 5
    print(f"done: {args.steps * args.batch} samples in {time.time() - start:.1f} s "
          f"(after {made:.1f} s making {args.images} images), loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
