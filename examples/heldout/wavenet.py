"""A WaveNet-like audio model: dilated 1-D convolutions with gated (tanh × sigmoid) activations and
residual 1×1 convolutions, dilation doubling per block."""
import torch
from torch import nn


class GatedBlock(nn.Module):
    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, 2 * channels, 3, dilation=dilation, padding=dilation)
        self.res = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        a, b = self.conv(x).chunk(2, dim=1)
        return x + self.res(torch.tanh(a) * torch.sigmoid(b))


class WaveNet(nn.Module):
    def __init__(self, channels: int = 128, blocks: int = 8, length: int = 8192, classes: int = 256):
        super().__init__()
        self.length = length
        self.stem = nn.Conv1d(1, channels, 1)
        self.blocks = nn.Sequential(*(GatedBlock(channels, 2 ** i) for i in range(blocks)))
        self.head = nn.Conv1d(channels, classes, 1)

    def forward(self, audio):
        return self.head(torch.relu(self.blocks(self.stem(audio))))

    def example_inputs(self, batch: int):
        return torch.randn(batch, 1, self.length)
