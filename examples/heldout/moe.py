"""A mixture-of-experts MLP over tokens, expert-choice routing: each expert gathers the tokens it scores
highest (its capacity), runs them through its MLP and scatters the weighted results back (`index_add`)."""
import torch
from torch import nn


class MoELayer(nn.Module):
    def __init__(self, d: int, hidden: int, experts: int, capacity_factor: float = 2.0):
        super().__init__()
        self.norm, self.router = nn.LayerNorm(d), nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))
                                     for _ in range(experts))
        self.capacity_factor = capacity_factor

    def forward(self, x):
        h = self.norm(x)
        scores = self.router(h).softmax(dim=-1).t()  # experts x tokens
        capacity = int(self.capacity_factor * x.shape[0] / len(self.experts))
        weight, chosen = scores.topk(capacity, dim=1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            y = expert(h[chosen[e]]) * weight[e].unsqueeze(1)
            out = out.index_add(0, chosen[e], y)
        return x + out


class MoE(nn.Module):
    def __init__(self, d: int = 1024, hidden: int = 2048, experts: int = 8, layers: int = 2):
        super().__init__()
        self.d = d
        self.layers = nn.Sequential(*(MoELayer(d, hidden, experts) for _ in range(layers)))

    def forward(self, tokens):
        return self.layers(tokens)

    def example_inputs(self, batch: int):
        return torch.randn(batch, self.d)  # batch = tokens
