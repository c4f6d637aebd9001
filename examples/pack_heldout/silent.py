"""A user's training script that knows nothing of radt-ext and logs nothing: a small MLP on random data.

    python examples/pack_heldout/silent.py --seconds 6 --work-file /tmp/w/silent

Like the other held-out jobs it does a fixed amount of work: its first run trains for --seconds and
writes its number of steps to --work-file; later runs do that many.
"""
import argparse
import os
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--seconds", type=float, default=6.0)
ap.add_argument("--work-file", default="")
ap.add_argument("--batch", type=int, default=256)
ap.add_argument("--width", type=int, default=2048)
args = ap.parse_args()
device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1024, args.width), nn.GELU(), nn.Linear(args.width, args.width), nn.GELU(),
                      nn.Linear(args.width, 10)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn(args.batch, 1024, device=device), torch.randint(0, 10, (args.batch,), device=device)
steps = None
if args.work_file and os.path.exists(args.work_file):
    with open(args.work_file) as fh:
        steps = int(fh.read().strip())
done, start = 0, time.time()
while (done < steps) if steps is not None else (time.time() - start < args.seconds):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    if done % 10 == 0:
        loss.item()
    done += 1
loss.item()
if steps is None and args.work_file:
    with open(args.work_file + ".tmp", "w") as fh:
        fh.write(str(done))
    os.replace(args.work_file + ".tmp", args.work_file)
print(f"silent: {done} steps in {time.time() - start:.1f} s on {device}")
