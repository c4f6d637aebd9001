"""Small modules the ops tests point the profiler at, as a user would (package.module:attribute)."""
from torch import nn


class TwoLayer(nn.Module):
    """Runs on inputs of 7 features."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(7, 16), nn.GELU(), nn.Linear(16, 3))

    def forward(self, x):
        return self.net(x)


NOT_A_MODULE = 42
