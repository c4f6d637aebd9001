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


class TokensAndMask(nn.Module):
    """Token ids and a padding mask by keyword, as a tokenizer hands them over; gives its own inputs."""

    def __init__(self):
        super().__init__()
        self.emb, self.head = nn.Embedding(50, 8), nn.Linear(8, 2)

    def forward(self, input_ids, attention_mask):
        x = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        return self.head(x.sum(1))

    def example_inputs(self, batch):
        import torch

        return {"input_ids": torch.randint(0, 50, (batch, 6)), "attention_mask": torch.ones(batch, 6)}


class PairOfInputs(nn.Module):
    """Two positional inputs, given by the factory's example_inputs."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(5, 3)

    def forward(self, x, y):
        return self.a(x) + self.b(y)


def pair_of_inputs():
    return PairOfInputs()


def _pair_inputs(batch):
    import torch

    return torch.randn(batch, 4), torch.randn(batch, 5)


pair_of_inputs.example_inputs = _pair_inputs
