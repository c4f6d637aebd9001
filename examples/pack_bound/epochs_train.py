"""A user's classic training script: epochs over a TensorDataset through a DataLoader (shuffled,
collated on the host, copied to the device batch by batch), each epoch followed by an evaluation pass
over a held-out split, its accuracy printed. The data: feature vectors labelled by a fixed random
teacher network, so the accuracy rises. It knows nothing of radt-ext and logs nothing.

    python epochs_train.py --epochs 12 --train 80000
    python epochs_train.py --epochs 2 --train 2000 --device cpu --tiny
"""
import argparse
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def teacher_data(n, features, classes, seed):
    g = torch.Generator().manual_seed(seed)
    teacher = torch.randn(features, classes, generator=g)
    x = torch.randn(n, features, generator=g)
    return x, (x @ teacher + 0.5 * torch.randn(n, classes, generator=g)).argmax(1)


def evaluate(model, loader, device):
    model.eval()
    right = seen = 0
    with torch.no_grad():
        for x, y in loader:
            right += (model(x.to(device)).argmax(1).cpu() == y).sum().item()
            seen += len(y)
    model.train()
    return right / seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--train", type=int, default=80000, help="training samples (a fifth as many held out)")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true", help="a narrow model for a CPU")
    args = ap.parse_args()
    features, width = (64, 64) if args.tiny else (512, 2048)
    x, y = teacher_data(args.train + args.train // 5, features, 10, seed=1)
    train = DataLoader(TensorDataset(x[:args.train], y[:args.train]), batch_size=args.batch, shuffle=True)
    held = DataLoader(TensorDataset(x[args.train:], y[args.train:]), batch_size=4 * args.batch)
    model = nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                          nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10)).to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    start, samples = time.time(), 0
    for epoch in range(args.epochs):
        for xb, yb in train:
            loss = nn.functional.cross_entropy(model(xb.to(args.device)), yb.to(args.device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            samples += len(yb)
        print(f"epoch {epoch + 1}: loss {loss.item():.3f}, held-out accuracy "
              f"{evaluate(model, held, args.device):.3f}", flush=True)
    print(f"done: {samples} samples in {args.epochs} epochs in {time.time() - start:.1f} s")


if __name__ == "__main__":
    main()
