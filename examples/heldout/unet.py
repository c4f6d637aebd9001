"""A small UNet for segmentation: four levels down with max-pooling, up with transposed convolutions,
skip connections concatenated."""
import torch
from torch import nn


def double_conv(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                         nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class UNet(nn.Module):
    def __init__(self, channels=(32, 64, 128, 256), classes: int = 4, size: int = 128):
        super().__init__()
        self.size = size
        self.down = nn.ModuleList()
        cin = 3
        for c in channels:
            self.down.append(double_conv(cin, c))
            cin = c
        self.pool = nn.MaxPool2d(2)
        self.bottom = double_conv(channels[-1], 2 * channels[-1])
        self.up, self.merge = nn.ModuleList(), nn.ModuleList()
        cin = 2 * channels[-1]
        for c in reversed(channels):
            self.up.append(nn.ConvTranspose2d(cin, c, 2, stride=2))
            self.merge.append(double_conv(2 * c, c))
            cin = c
        self.out = nn.Conv2d(channels[0], classes, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottom(x)
        for up, merge, skip in zip(self.up, self.merge, reversed(skips)):
            x = merge(torch.cat([up(x), skip], dim=1))
        return self.out(x)

    def example_inputs(self, batch: int):
        return torch.randn(batch, 3, self.size, self.size)
