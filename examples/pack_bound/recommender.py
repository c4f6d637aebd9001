"""A user's click-through recommender: each example is a user's recent item history (a bag of item ids
of varying length, pooled by nn.EmbeddingBag from flat ids and offsets), a candidate item, its category
and a few dense features; the towers' vectors and their dot product go through an MLP to a click
logit. Sparse embedding gradients (SparseAdam) beside Adam for the dense layers, as recommenders are
trained. Clicks come from hidden user and item tastes, so the loss falls. It knows nothing of radt-ext
and logs nothing.

    python recommender.py --steps 2000
    python recommender.py --steps 20 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--batch", type=int, default=2048)
ap.add_argument("--items", type=int, default=500000, help="rows of the item table")
ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
ap.add_argument("--tiny", action="store_true", help="small tables for a CPU")
args = ap.parse_args()
items, dim, history = (2000, 16, 20) if args.tiny else (args.items, 64, 50)
dev = args.device
g = torch.Generator(device=dev).manual_seed(5)
taste = torch.randn(items, 8, device=dev, generator=g)  # what the data hides, the model must find


class Recommender(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = nn.EmbeddingBag(items, dim, mode="mean", sparse=True)
        self.item = nn.Embedding(items, dim, sparse=True)
        self.category = nn.Embedding(100, 8, sparse=True)
        self.mlp = nn.Sequential(nn.Linear(2 * dim + 8 + 4 + 1, 256), nn.ReLU(), nn.Linear(256, 64), nn.ReLU(),
                                 nn.Linear(64, 1))

    def forward(self, ids, offsets, item, category, dense):
        u, v = self.history(ids, offsets), self.item(item)
        x = torch.cat([u, v, self.category(category), dense, (u * v).sum(1, keepdim=True)], 1)
        return self.mlp(x).squeeze(1)


def examples():
    lengths = torch.randint(1, history, (args.batch,), device=dev, generator=g)
    offsets = torch.cumsum(lengths, 0) - lengths
    ids = torch.randint(0, items, (int(lengths.sum()),), device=dev, generator=g)
    item = torch.randint(0, items, (args.batch,), device=dev, generator=g)
    user = torch.zeros(args.batch, 8, device=dev).index_add_(
        0, torch.repeat_interleave(torch.arange(args.batch, device=dev), lengths), taste[ids]) / lengths[:, None]
    click = ((user * taste[item]).sum(1) + 0.3 * torch.randn(args.batch, device=dev, generator=g) > 0).float()
    return ids, offsets, item, item % 100, torch.randn(args.batch, 4, device=dev, generator=g), click


model = Recommender().to(dev)
sparse = [model.history.weight, model.item.weight, model.category.weight]
opts = [torch.optim.SparseAdam(sparse, lr=0.01), torch.optim.Adam(model.mlp.parameters(), lr=1e-3)]
start = time.time()
for step in range(args.steps):
    *inputs, click = examples()
    loss = nn.functional.binary_cross_entropy_with_logits(model(*inputs), click)
    for opt in opts:
        opt.zero_grad(set_to_none=True)
    loss.backward()
    for opt in opts:
        opt.step()
    if step % 500 == 0:
        print(f"step {step}: loss {loss.item():.4f}", flush=True)
print(f"done: {args.steps * args.batch} samples in {time.time() - start:.1f} s, loss {loss.item():.4f}")
