"""A recommender heavy on embedding bags: 12 multi-hot sparse features (20 ids each, summed per bag) and
dense features through a bottom MLP, concatenated into a top MLP. Inputs come by keyword."""
import torch
from torch import nn


class Recommender(nn.Module):
    def __init__(self, dense: int = 16, tables: int = 12, rows: int = 100_000, dim: int = 128, hot: int = 20):
        super().__init__()
        self.dense, self.tables, self.rows, self.hot = dense, tables, rows, hot
        self.bags = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        self.bottom = nn.Sequential(nn.Linear(dense, 256), nn.ReLU(), nn.Linear(256, dim), nn.ReLU())
        self.top = nn.Sequential(nn.Linear((tables + 1) * dim, 1024), nn.ReLU(), nn.Linear(1024, 512), nn.ReLU(),
                                 nn.Linear(512, 1))

    def forward(self, dense, sparse):
        pooled = [bag(sparse[:, t]) for t, bag in enumerate(self.bags)]
        return self.top(torch.cat([self.bottom(dense), *pooled], dim=1))

    def example_inputs(self, batch: int):
        return {"dense": torch.randn(batch, self.dense),
                "sparse": torch.randint(0, self.rows, (batch, self.tables, self.hot))}
