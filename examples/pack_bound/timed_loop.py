"""A user's benchmark loop that runs for a set time, not a set amount of work: a small residual conv net
(`--model conv`) or a self-attention block (`--model attn`) trained forward and backward with AdamW
until `--seconds` have passed, its iterations counted and printed at the end. It knows nothing of
radt-ext and logs nothing.

    python timed_loop.py --model conv --seconds 10
    python timed_loop.py --model attn --seconds 2 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn


class Residual(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(w, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(),
                                  nn.Conv2d(w, w, 3, padding=1, bias=False), nn.BatchNorm2d(w))

    def forward(self, x):
        return torch.relu(x + self.body(x))


class SelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm, self.qkv, self.proj = nn.LayerNorm(dim), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, t, 3, self.heads, -1).unbind(2)
        a = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.ff(x)


def build(kind, tiny, batch):
    if kind == "conv":
        w, side = (8, 16) if tiny else (64, 64)
        net = nn.Sequential(nn.Conv2d(3, w, 3, padding=1), nn.ReLU(), *[Residual(w) for _ in range(4)],
                            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w, 10))
        return net, torch.randn(batch, 3, side, side)
    dim, heads, seq = (32, 2, 64) if tiny else (512, 8, 1024)
    return nn.Sequential(*[SelfAttention(dim, heads) for _ in range(2)]), torch.randn(batch, seq, dim)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["conv", "attn"], default="conv")
    ap.add_argument("--seconds", type=float, default=10.0, help="how long the loop runs")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="a small model for a CPU")
    args = ap.parse_args()
    net, x = build(args.model, args.tiny, args.batch)
    net, x = net.to(args.device), x.to(args.device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    cuda = args.device.startswith("cuda")
    iterations, start = 0, time.time()
    while time.time() - start < args.seconds:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
            loss = net(x).float().pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        iterations += 1
        if iterations % 10 == 0:
            loss.item()  # the host stays within ten iterations of the device, so the clock means work done
    loss.item()
    print(f"done: {iterations} iterations ({iterations * args.batch} samples) of {args.model} "
          f"in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
