"""An MLP-Mixer for 3x64x64 images: 8x8 patches (64 tokens), 256 wide, 6 blocks of token mixing (an MLP
across patches, on the transposed tensor) and channel mixing."""
import torch
from torch import nn


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, d: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.tokens = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
        self.channels = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channels(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, size: int = 64, patch: int = 8, d: int = 256, blocks: int = 6, classes: int = 100):
        super().__init__()
        self.size = size
        self.embed = nn.Conv2d(3, d, patch, stride=patch)
        self.blocks = nn.Sequential(*(MixerBlock((size // patch) ** 2, d) for _ in range(blocks)))
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, classes)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(dim=1))

    def example_inputs(self, batch: int):
        return torch.randn(batch, 3, self.size, self.size)
