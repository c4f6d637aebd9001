"""A small UNet for 3x128x128 images: three levels of GroupNorm + SiLU convolutions, strided convolutions
down, bilinear upsampling up, skips added rather than concatenated."""
import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv1, self.norm1 = nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout)
        self.conv2, self.norm2 = nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(8, cout)
        self.act = nn.SiLU()

    def forward(self, x):
        x = self.act(self.norm1(self.conv1(x)))
        return self.act(self.norm2(self.conv2(x)))


class SmallUNet(nn.Module):
    def __init__(self, widths=(32, 64, 128), classes: int = 3, size: int = 128):
        super().__init__()
        self.size = size
        self.stem = nn.Conv2d(3, widths[0], 3, padding=1)
        self.down = nn.ModuleList(Block(w, w) for w in widths)
        self.pool = nn.ModuleList(nn.Conv2d(a, b, 3, stride=2, padding=1) for a, b in zip(widths, widths[1:]))
        self.lift = nn.ModuleList(nn.Conv2d(b, a, 1) for a, b in zip(widths, widths[1:]))
        self.up = nn.ModuleList(Block(w, w) for w in widths[:-1])
        self.out = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        x = self.stem(x)
        skips = []
        for i, block in enumerate(self.down):
            x = block(x)
            if i < len(self.pool):
                skips.append(x)
                x = self.pool[i](x)
        for i in reversed(range(len(self.up))):
            x = F.interpolate(self.lift[i](x), scale_factor=2, mode="bilinear", align_corners=False)
            x = self.up[i](x + skips[i])
        return self.out(x)

    def example_inputs(self, batch: int):
        return torch.randn(batch, 3, self.size, self.size)
