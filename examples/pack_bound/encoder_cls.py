"""A user's sequence classifier: a transformer encoder (nn.TransformerEncoder, pre-norm) over token
sequences, mean-pooled into a linear head, trained with AdamW in bf16 autocast and a cosine learning
rate. The label of a sequence is whether a marker token appears more often in its first half than in
its second, so the model must look along the whole sequence. It knows nothing of radt-ext and logs
nothing.

    python encoder_cls.py --steps 1800
    python encoder_cls.py --steps 20 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=1800, help="optimizer steps")
ap.add_argument("--batch", type=int, default=64, help="sequences per step")
ap.add_argument("--seq", type=int, default=256, help="tokens per sequence")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true", help="a narrow model on short sequences for a CPU")
args = ap.parse_args()
if args.tiny:
    vocab, dim, heads, layers, seq = 64, 32, 2, 2, 32
else:
    vocab, dim, heads, layers, seq = 1000, 256, 8, 4, args.seq


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens, self.places = nn.Embedding(vocab, dim), nn.Parameter(torch.zeros(seq, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 2)

    def forward(self, t):
        return self.head(self.encoder(self.tokens(t) + self.places).mean(1))


def batch():
    t = torch.randint(0, vocab, (args.batch, seq), device=args.device)
    marked = (t == 7).float()
    return t, (marked[:, :seq // 2].sum(1) > marked[:, seq // 2:].sum(1)).long()


model = Classifier().to(args.device)
opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, args.steps)
cuda = args.device.startswith("cuda")
start = time.time()
for step in range(args.steps):
    t, y = batch()
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
        loss = nn.functional.cross_entropy(model(t), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    sched.step()
    if step % 250 == 0:
        print(f"step {step}: loss {loss.item():.3f}", flush=True)
print(f"done: {args.steps * args.batch} samples in {time.time() - start:.1f} s, loss {loss.item():.3f}")
