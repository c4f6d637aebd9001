"""A depthwise-separable convnet in the ConvNeXt manner: 7×7 depthwise convolutions, then a channels-last
LayerNorm and a pointwise MLP, with residuals; four stages joined by strided convolutions."""
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.pw1, self.act, self.pw2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(self.act(self.pw1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class DepthwiseNet(nn.Module):
    def __init__(self, dims=(64, 128, 256, 512), depths=(2, 2, 4, 2), classes: int = 100, size: int = 160):
        super().__init__()
        self.size = size
        layers = [nn.Conv2d(3, dims[0], 4, stride=4), nn.BatchNorm2d(dims[0])]
        for i, (dim, depth) in enumerate(zip(dims, depths)):
            if i:
                layers += [nn.BatchNorm2d(dims[i - 1]), nn.Conv2d(dims[i - 1], dim, 2, stride=2)]
            layers += [Block(dim) for _ in range(depth)]
        self.features = nn.Sequential(*layers)
        self.pool, self.head = nn.AdaptiveAvgPool2d(1), nn.Linear(dims[-1], classes)

    def forward(self, x):
        return self.head(self.pool(self.features(x)).flatten(1))

    def example_inputs(self, batch: int):
        return torch.randn(batch, 3, self.size, self.size)
