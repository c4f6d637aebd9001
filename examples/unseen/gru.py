"""A sequence classifier: a two-layer GRU over 64 steps of 256 features, its last step to the classes."""
import torch
from torch import nn


class GRUClassifier(nn.Module):
    def __init__(self, features: int = 256, hidden: int = 256, layers: int = 2, steps: int = 64, classes: int = 10):
        super().__init__()
        self.features, self.steps = features, steps
        self.gru = nn.GRU(features, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])

    def example_inputs(self, batch: int):
        return torch.randn(batch, self.steps, self.features)
