"""A user's text generation loop: a small decoder-only transformer generating tokens one at a time with a
key/value cache, greedy, for a batch of prompts. It knows nothing of radt-ext and logs nothing.

    python kv_decode.py --batch 4 --prompts 40 --tokens 256
    python kv_decode.py --batch 2 --prompts 2 --tokens 16 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--prompts", type=int, default=40, help="batches of prompts to complete")
ap.add_argument("--tokens", type=int, default=256, help="new tokens per prompt")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true")
args = ap.parse_args()


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)

    def forward(self, x, cache):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x)), (k, v)


class Decoder(nn.Module):
    def __init__(self, vocab, dim, heads, layers):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens, caches=None):
        x = self.emb(tokens)
        new = []
        for i, blk in enumerate(self.blocks):
            x, c = blk(x, caches[i] if caches else None)
            new.append(c)
        return self.head(x[:, -1]), new


vocab, dim, heads, layers = (256, 32, 2, 2) if args.tiny else (8000, 512, 8, 6)
model = Decoder(vocab, dim, heads, layers).to(args.device).eval()
start, made = time.time(), 0
with torch.inference_mode():
    for p in range(args.prompts):
        tokens = torch.randint(0, vocab, (args.batch, 32), device=args.device)
        logits, caches = model(tokens)
        for _ in range(args.tokens):
            nxt = logits.argmax(-1, keepdim=True)
            logits, caches = model(nxt, caches)
            made += args.batch
        nxt.cpu()
print(f"kv_decode: {made} tokens in {time.time() - start:.2f} s")
