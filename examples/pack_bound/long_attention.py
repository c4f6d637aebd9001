"""A user's long-context inference: documents of 8192 tokens through a stack of pre-norm attention blocks
(fused scaled-dot-product attention over the whole sequence, rotary positions, a gated MLP) in bf16,
one document batch after another, each document's pooled vector copied to the host (an embedding
service over long inputs). It knows nothing of radt-ext and logs nothing.

    python long_attention.py --docs 1400
    python long_attention.py --docs 4 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn


def rotate(x, cos, sin):
    a, b = x.chunk(2, -1)
    return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.qkv, self.o = nn.Linear(dim, 3 * dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.gate_up, self.down = nn.Linear(dim, 4 * dim, bias=False), nn.Linear(2 * dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = nn.functional.scaled_dot_product_attention(rotate(q, cos, sin), rotate(k, cos, sin), v)
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        gate, up = self.gate_up(self.n2(x)).chunk(2, -1)
        return x + self.down(nn.functional.silu(gate) * up)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=1400, help="document batches to embed")
    ap.add_argument("--tiny", action="store_true", help="short documents and a narrow model for a CPU")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shape", default="1x8192", help="documents per batch x tokens per document")
    args = ap.parse_args()
    batch, tokens = (int(n) for n in args.shape.split("x"))
    vocab, dim, heads, depth = (256, 32, 2, 2) if args.tiny else (32000, 1024, 16, 4)
    tokens = 128 if args.tiny else tokens
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    emb = nn.Embedding(vocab, dim).to(args.device, dtype)
    blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth)).to(args.device, dtype).eval()
    angle = torch.arange(tokens, device=args.device)[:, None] / 10000 ** (
        torch.arange(0, dim // heads // 2, device=args.device) / (dim // heads // 2))
    cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)
    start, done = time.time(), 0
    with torch.inference_mode():
        for _ in range(args.docs):
            x = emb(torch.randint(0, vocab, (batch, tokens), device=args.device))
            for blk in blocks:
                x = blk(x, cos, sin)
            x.mean(1).float().cpu()
            done += batch
    print(f"done: {done} documents of {tokens} tokens in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
