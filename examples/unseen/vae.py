"""A convolutional variational autoencoder for 3x64x64 images: strided convolutions down to a 128-wide
latent mean and log-variance, a reparameterised sample, transposed convolutions back up."""
import torch
from torch import nn


class ConvVAE(nn.Module):
    def __init__(self, size: int = 64, latent: int = 128):
        super().__init__()
        self.size = size
        self.encode = nn.Sequential(
            nn.Conv2d(3, 32, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(32, 64, 4, 2, 1), nn.BatchNorm2d(64),
            nn.LeakyReLU(0.2), nn.Conv2d(64, 128, 4, 2, 1), nn.BatchNorm2d(128), nn.LeakyReLU(0.2), nn.Flatten())
        flat = 128 * (size // 8) ** 2
        self.mean, self.logvar = nn.Linear(flat, latent), nn.Linear(flat, latent)
        self.expand = nn.Linear(latent, flat)
        self.decode = nn.Sequential(
            nn.ConvTranspose2d(128, 64, 4, 2, 1), nn.BatchNorm2d(64), nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 4, 2, 1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.ConvTranspose2d(32, 3, 4, 2, 1), nn.Sigmoid())

    def forward(self, x):
        h = self.encode(x)
        mean, logvar = self.mean(h), self.logvar(h)
        z = mean + torch.exp(0.5 * logvar) * torch.randn_like(mean)
        return self.decode(self.expand(z).view(-1, 128, self.size // 8, self.size // 8)), mean, logvar

    def example_inputs(self, batch: int):
        return torch.randn(batch, 3, self.size, self.size)
