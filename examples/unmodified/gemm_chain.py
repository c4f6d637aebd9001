"""A user's dense fp16 workload: a chain of large square layers without bias (one GEMM each) applied to a
batch of activations, as the projection stack of a big model's inference. It knows nothing of radt-ext
and logs nothing.

    python gemm_chain.py --size 4096 --steps 12000
    python gemm_chain.py --size 64 --steps 20 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--size", type=int, default=4096)
ap.add_argument("--layers", type=int, default=8)
ap.add_argument("--steps", type=int, default=12000)
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true")
args = ap.parse_args()

dtype = torch.float16 if args.device.startswith("cuda") else torch.float32
chain = nn.Sequential(*[nn.Linear(args.size, args.size, bias=False) for _ in range(args.layers)])
chain = chain.to(args.device, dtype).eval()
x = torch.randn(args.size, args.size, device=args.device, dtype=dtype) / args.size ** 0.5
start = time.time()
with torch.inference_mode():
    for step in range(args.steps):
        y = chain(x)
        if step % 50 == 0:
            y.float().norm().item()
    y.float().norm().item()
print(f"gemm_chain: {args.steps} x {args.layers} GEMMs of {args.size} in {time.time() - start:.3f} s")
