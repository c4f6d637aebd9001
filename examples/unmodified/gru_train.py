"""A user's sequence model: a two-layer GRU tagging random token sequences, trained with Adam; the loss
read back every step, as a script that prints it would. It knows nothing of radt-ext and logs nothing;
its last line gives its own count of samples.

    python gru_train.py --batch 32 --steps 1800
    python gru_train.py --batch 8 --steps 10 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--steps", type=int, default=1800)
ap.add_argument("--seq", type=int, default=64)
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true")
args = ap.parse_args()


class Tagger(nn.Module):
    def __init__(self, vocab, dim, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, hidden, num_layers=2, batch_first=True)
        self.head = nn.Linear(hidden, 16)

    def forward(self, x):
        return self.head(self.gru(self.emb(x))[0])


vocab, dim, hidden = (500, 16, 32) if args.tiny else (10000, 256, 512)
model = Tagger(vocab, dim, hidden).to(args.device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randint(0, vocab, (args.batch, args.seq), device=args.device)
y = torch.randint(0, 16, (args.batch, args.seq), device=args.device)
start = time.time()
for step in range(args.steps):
    loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    last = loss.item()
print(f"gru_train: {args.steps} steps, {args.steps * args.batch} samples, loss {last:.3f}, {time.time() - start:.3f} s")
