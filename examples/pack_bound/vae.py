"""A user's variational autoencoder: an MLP encoder to a Gaussian latent, the reparameterisation trick, an
MLP decoder, trained on flattened 28x28 "digits" (random strokes drawn once on the device) with a
reconstruction plus KL loss and Adam; every 500 steps it samples from the prior. It knows nothing of
radt-ext and logs nothing.

    python vae.py --steps 5000
    python vae.py --steps 30 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn


class VAE(nn.Module):
    def __init__(self, pixels, hidden, latent):
        super().__init__()
        self.latent = latent
        self.enc = nn.Sequential(nn.Linear(pixels, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, 2 * latent))
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU(),
                                 nn.Linear(hidden, pixels))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


def strokes(n, device, g):
    """n images of 28x28: two random bright line segments each, flattened to [0, 1] pixels."""
    grid = torch.stack(torch.meshgrid(torch.arange(28.0), torch.arange(28.0), indexing="ij"), -1).to(device)
    img = torch.zeros(n, 28, 28, device=device)
    for _ in range(2):
        a, b = torch.rand(n, 1, 1, 2, generator=g).to(device) * 28, torch.rand(n, 1, 1, 2, generator=g).to(device) * 28
        t = (((grid - a) * (b - a)).sum(-1) / ((b - a) ** 2).sum(-1).clamp_min(1e-6)).clamp(0, 1)
        img = torch.maximum(img, (-((grid - a - t[..., None] * (b - a)) ** 2).sum(-1) / 2).exp())
    return img.flatten(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=512, help="images per step")
    ap.add_argument("--latent", type=int, default=32, help="size of the code")
    ap.add_argument("--tiny", action="store_true", help="a narrow model and few images for a CPU")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    batch, device = args.batch, args.device
    hidden, n = (64, 1024) if args.tiny else (1024, 60000)
    data = strokes(n, device, torch.Generator().manual_seed(3))
    model = VAE(784, hidden, args.latent).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    start = time.time()
    for step in range(args.steps):
        x = data[torch.randint(0, n, (batch,), device=device)]
        recon, mu, logvar = model(x)
        rec = nn.functional.binary_cross_entropy_with_logits(recon, x, reduction="sum") / len(x)
        kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1).mean()
        opt.zero_grad(set_to_none=True)
        (rec + kl).backward()
        opt.step()
        if step % 500 == 0:
            with torch.no_grad():
                sample = torch.sigmoid(model.dec(torch.randn(16, model.latent, device=device)))
            print(f"step {step}: reconstruction {rec.item():.1f}, KL {kl.item():.1f}, "
                  f"sample mean {sample.mean().item():.3f}", flush=True)
    print(f"done: {args.steps * batch} samples in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
