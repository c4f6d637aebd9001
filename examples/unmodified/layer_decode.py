"""A user's token-by-token decoder whose loop steps through the layers itself: an embedding, a ModuleList
of layers (each a dict of q/k/v/o and two feed-forward Linears, called one by one from the script, with a
key/value cache) and a head, greedy, for a batch of sequences started from a BOS token. It knows nothing
of radt-ext and logs nothing; its last line gives its own count of tokens generated (sequences x tokens x
batch).

    python layer_decode.py --batch 4 --sequences 50 --tokens 128
    python layer_decode.py --batch 2 --sequences 3 --tokens 16 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--sequences", type=int, default=50, help="batches of sequences to generate")
ap.add_argument("--tokens", type=int, default=128, help="new tokens per sequence")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true")
args = ap.parse_args()

vocab, dim, heads, depth = (256, 32, 2, 2) if args.tiny else (8000, 512, 8, 6)
embedding = nn.Embedding(vocab, dim).to(args.device)
shapes = {"q": (dim, dim), "k": (dim, dim), "v": (dim, dim), "o": (dim, dim), "ffn_in": (dim, 4 * dim),
          "ffn_out": (4 * dim, dim)}
layers = nn.ModuleList(nn.ModuleDict({name: nn.Linear(*shape) for name, shape in shapes.items()})
                       for _ in range(depth)).to(args.device)
head = nn.Linear(dim, vocab).to(args.device)


def split(x):  # (batch, time, dim) -> (batch, heads, time, dim / heads)
    return x.view(x.shape[0], x.shape[1], heads, dim // heads).transpose(1, 2)


start, made = time.time(), 0
with torch.inference_mode():
    for _ in range(args.sequences):
        token = torch.zeros(args.batch, 1, dtype=torch.long, device=args.device)  # BOS
        cache = [None] * depth
        for _ in range(args.tokens):
            x = embedding(token)
            for i, layer in enumerate(layers):
                q, k, v = layer["q"](x), layer["k"](x), layer["v"](x)
                if cache[i] is not None:
                    k, v = torch.cat([cache[i][0], k], 1), torch.cat([cache[i][1], v], 1)
                cache[i] = (k, v)
                a = nn.functional.scaled_dot_product_attention(split(q), split(k), split(v))
                x = x + layer["o"](a.transpose(1, 2).reshape(x.shape))
                x = x + layer["ffn_out"](nn.functional.gelu(layer["ffn_in"](x)))
            token = head(x[:, -1]).argmax(-1, keepdim=True)
            made += args.batch
        token.cpu()
print(f"layer_decode: {made} tokens ({args.sequences} sequences x {args.tokens} tokens x batch {args.batch}) "
      f"in {time.time() - start:.3f} s")
