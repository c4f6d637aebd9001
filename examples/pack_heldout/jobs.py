"""Small jobs of kinds the packing model was never fitted or tuned on, for a held-out packing queue
(scripts/gpu/pack_heldout.sh): an LSTM, a small CNN, a transformer inference loop, a job fed by a
CPU-heavy data loader, a batched matrix multiply, a recommender.

    python -m examples.pack_heldout.jobs --kind lstm --batch 64 --seconds 6 --work-file /tmp/w/lstm-64

Each job does a fixed amount of work, so that sharing a GPU lengthens it: the first run (alone) works
for --seconds and writes the number of steps it did to --work-file; every later run with that file does
that many steps (at most --cap x --seconds). Its steps are reported with `radt_ext.log_progress` inside
`radt_ext.phase("train")` (the active phase); each step waits for its result (a loss read back, the
predictions copied to the host), as a training loop that logs its loss does.
"""
from __future__ import annotations

import argparse
import os
import time

import torch
from torch import nn

import radt_ext

KINDS = ("lstm", "cnn", "infer", "loader", "bmm", "recsys")


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class _Augmented(torch.utils.data.Dataset):
    """Images made and augmented on the CPU (noise, random crop, flip, normalisation) for each sample."""

    def __init__(self, n: int, side: int):
        self.n, self.side = n, side

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, self.side + 8, self.side + 8, generator=g)
        for _ in range(4):  # the CPU work of a real pipeline (decode, resize, colour jitter)
            img = (img * 1.01 + torch.rand(img.shape, generator=g) * 0.01).clamp(0, 1)
        x, y = torch.randint(0, 8, (2,), generator=g).tolist()
        img = img[:, y:y + self.side, x:x + self.side]
        if i % 2:
            img = img.flip(2)
        return (img - 0.5) / 0.25, i % 10


def build(kind: str, batch: int, device: torch.device, size: int, small: bool = False, workers: int = 4):
    """(step function, samples per step); the step does one batch and waits for its result. small: every
    model narrow and short (a dry run on a CPU)."""
    w = 8 if small else 1
    if kind == "lstm":
        emb, lstm = nn.Embedding(20000 // w, 256 // w), nn.LSTM(256 // w, 512 // w, num_layers=2, batch_first=True)
        head = nn.Linear(512 // w, 5)
        model = nn.ModuleDict({"emb": emb, "lstm": lstm, "head": head}).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        x = torch.randint(0, 20000 // w, (batch, 128 // w), device=device)
        y = torch.randint(0, 5, (batch,), device=device)

        def step():
            out, _ = model["lstm"](model["emb"](x))
            loss = nn.functional.cross_entropy(model["head"](out[:, -1]), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.item()
        return step, batch
    if kind == "cnn":
        model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                              nn.MaxPool2d(2), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(64, 10)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, y = torch.randn(batch, 3, 32, 32, device=device), torch.randint(0, 10, (batch,), device=device)

        def step():
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.item()
        return step, batch
    if kind == "infer":
        layer = nn.TransformerEncoderLayer(512 // w, 8, 2048 // w, batch_first=True)
        model = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False).to(device).eval()
        x = torch.randn(batch, 128 // w, 512 // w, device=device)

        @torch.no_grad()
        def step():
            return model(x).argmax(-1).cpu()
        return step, batch
    if kind == "loader":
        model = nn.Sequential(nn.Conv2d(3, 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Linear(16, 10)).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loader = torch.utils.data.DataLoader(_Augmented(10**7, 96 // w), batch_size=batch, num_workers=workers,
                                             persistent_workers=True, prefetch_factor=2)
        batches = iter(loader)

        def step():
            x, y = next(batches)
            loss = nn.functional.cross_entropy(model(x.to(device, non_blocking=True)), y.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.item()
        return step, batch
    if kind == "bmm":
        dtype = torch.float16 if device.type == "cuda" else torch.float32
        a = torch.randn(batch, size, size, device=device, dtype=dtype)
        b = torch.randn(batch, size, size, device=device, dtype=dtype)

        def step():
            c = torch.bmm(a, b)
            return float(c[0, 0, 0])
        return step, batch
    if kind == "recsys":
        rows = size * 1000
        tables = nn.ModuleList(nn.EmbeddingBag(rows, 64, mode="sum") for _ in range(8)).to(device)
        mlp = nn.Sequential(nn.Linear(8 * 64 + 13, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                            nn.Linear(256, 1)).to(device)
        opt = torch.optim.SGD([*tables.parameters(), *mlp.parameters()], lr=0.01)
        dense = torch.randn(batch, 13, device=device)
        ids = [torch.randint(0, rows, (batch * 20,), device=device) for _ in tables]
        offsets = torch.arange(0, batch * 20, 20, device=device)
        y = torch.randint(0, 2, (batch, 1), device=device).float()

        def step():
            feats = torch.cat([t(i, offsets) for t, i in zip(tables, ids)] + [dense], 1)
            loss = nn.functional.binary_cross_entropy_with_logits(mlp(feats), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            return loss.item()
        return step, batch
    raise SystemExit(f"--kind {kind!r}: use one of {', '.join(KINDS)}")


def planned_steps(path: str) -> int | None:
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", required=True, choices=KINDS)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--size", type=int, default=1024, help="bmm: matrix side; recsys: rows per table / 1000")
    ap.add_argument("--seconds", type=float, default=6.0, help="the first run's active phase")
    ap.add_argument("--work-file", default="", help="holds the number of steps of the first run")
    ap.add_argument("--cap", type=float, default=5.0, help="a later run stops after this x --seconds")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--workers", type=int, default=4, help="loader: data loader processes")
    ap.add_argument("--small", action="store_true", help="narrow, short models (a dry run on a CPU)")
    args = ap.parse_args(argv)
    device = _device(args.device)
    torch.manual_seed(0)
    step, per_step = build(args.kind, args.batch, device, args.size, args.small, args.workers)
    for _ in range(3):  # warm-up: kernels chosen, allocator filled, loader workers started
        step()
    steps = planned_steps(args.work_file) if args.work_file else None
    done, start = 0, time.time()
    with radt_ext.phase("train"):
        while True:
            elapsed = time.time() - start
            if steps is None and elapsed >= args.seconds:
                break
            if steps is not None and (done >= steps or elapsed >= args.cap * args.seconds):
                break
            step()
            done += 1
            radt_ext.log_progress(samples=per_step, steps=1)
    if steps is None and args.work_file:
        tmp = f"{args.work_file}.{os.getpid()}"
        with open(tmp, "w") as fh:
            fh.write(str(done))
        os.replace(tmp, args.work_file)
    print(f"{args.kind} batch {args.batch}: {done} steps in {time.time() - start:.1f} s on {device}")


if __name__ == "__main__":
    main()
