"""Datasets for the torch workloads: synthetic images, scikit-learn's digits, an image
folder, and synthetic click logs for DLRM. Nothing downloads.

Small in-memory sets are served by `TensorBatches` (already on the device, shuffled per
epoch with a fixed seed) so the throughput numbers measure the model, not a loader.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

DATASETS = ("synthetic32", "synthetic224", "digits", "digits8", "clicks")


class TensorBatches:
    """Shuffled mini-batches over tensors that already sit on the device."""

    def __init__(self, tensors: tuple[torch.Tensor, ...], batch_size: int, shuffle: bool, seed: int = 0,
                 cpu: bool = False):
        self.tensors, self.batch_size, self.shuffle = tensors, batch_size, shuffle
        self.cpu = cpu  # hand out CPU copies, batch by batch (calibration of a CPU model)
        self.generator = torch.Generator().manual_seed(seed)
        self.size = tensors[0].shape[0]

    def __len__(self) -> int:
        return max(1, self.size // self.batch_size) if self.shuffle else -(-self.size // self.batch_size)

    def __iter__(self):
        order = torch.randperm(self.size, generator=self.generator) if self.shuffle else torch.arange(self.size)
        order = order.to(self.tensors[0].device)
        # Training drops the ragged last batch so every step has the same shape (compile, CUDA graphs).
        stop = len(self) * self.batch_size if self.shuffle else self.size
        for start in range(0, stop, self.batch_size):
            idx = order[start:start + self.batch_size]
            yield tuple(t[idx].cpu() if self.cpu else t[idx] for t in self.tensors)


@dataclass
class Data:
    name: str
    train: object
    val: object
    num_classes: int
    input_shape: tuple[int, ...]  # one sample, e.g. (3, 32, 32)
    calibration: object = None  # CPU batches for post-training quantization
    dlrm_spec: dict | None = None


def _synthetic_images(n: int, size: int, classes: int, seed: int,
                      device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Class templates plus noise: learnable, so accuracy means something, and fixed by seed. Drawn on
    the training device (on a GPU in milliseconds, no copy; the values differ from the CPU's)."""
    g = torch.Generator(device=device).manual_seed(seed)
    templates = torch.randn(classes, 3, size, size, generator=g, device=device)
    labels = torch.randint(0, classes, (n,), generator=g, device=device)
    images = templates[labels] * 0.5 + torch.randn(n, 3, size, size, generator=g, device=device)
    return images, labels


def _digits(size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    if size != 8:
        images = torch.nn.functional.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    images = ((images - 0.5) / 0.5).repeat(1, 3, 1, 1)
    labels = torch.tensor(digits.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    return images[order], labels[order]


def _clicks(n: int, tables: int, rows: int, dense: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Synthetic click log: dense features, one skewed categorical id per table, and a label
    drawn from a fixed hidden logistic model, so a DLRM can learn it."""
    g = torch.Generator().manual_seed(seed)
    x_dense = torch.randn(n, dense, generator=g)
    # Power-law ids: a few hot rows, a long tail, as in real recommendation logs.
    u = torch.rand(n, tables, generator=g)
    x_sparse = ((rows ** u - 1).long()).clamp_(0, rows - 1)
    w_dense = torch.randn(dense, generator=g)
    row_effect = torch.randn(tables, rows, generator=g)
    logit = x_dense @ w_dense / dense**0.5 + row_effect.gather(1, x_sparse.t()).sum(0) / tables**0.5
    labels = (torch.sigmoid(2 * logit) > torch.rand(n, generator=g)).long()
    return x_dense, x_sparse, labels


def load(
    dataset: str,
    batch_size: int,
    device: torch.device,
    train_samples: int = 2048,
    val_samples: int = 512,
    data_dir: str = "",
    image_size: int = 224,
    seed: int = 0,
    num_tables: int = 26,
    table_rows: int = 100_000,
    dense_features: int = 13,
) -> Data:
    if data_dir:
        return _folder(data_dir, batch_size, image_size, seed)
    if dataset in ("synthetic32", "synthetic224"):
        size = 32 if dataset == "synthetic32" else 224
        images, labels = _synthetic_images(train_samples + val_samples, size, 10, seed, device)
        return _split(dataset, (images, labels), train_samples, batch_size, device, seed, 10)
    if dataset in ("digits", "digits8"):
        images, labels = _digits(32 if dataset == "digits" else 8, seed)
        # 80/20 split of the 1797 digits; train_samples/val_samples can only make either side smaller.
        cut = int(len(labels) * 0.8)
        n_train, n_val = min(train_samples, cut), min(val_samples, len(labels) - cut)
        tensors = tuple(torch.cat([t[:n_train], t[cut:cut + n_val]]) for t in (images, labels))
        return _split(dataset, tensors, n_train, batch_size, device, seed, 10)
    if dataset == "clicks":
        tensors = _clicks(train_samples + val_samples, num_tables, table_rows, dense_features, seed)
        data = _split(dataset, tensors, train_samples, batch_size, device, seed, 2)
        data.dlrm_spec = {"num_tables": num_tables, "table_rows": table_rows, "dense_features": dense_features}
        return data
    raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)} or pass data=<image folder>")


def _split(name, tensors, cut, batch_size, device, seed, classes) -> Data:
    train = tuple(t[:cut] for t in tensors)
    val = tuple(t[cut:] for t in tensors)
    calibration = TensorBatches(train, batch_size, shuffle=False, cpu=True)
    return Data(
        name=name,
        train=TensorBatches(tuple(t.to(device) for t in train), batch_size, shuffle=True, seed=seed),
        val=TensorBatches(tuple(t.to(device) for t in val), batch_size, shuffle=False),
        num_classes=classes,
        input_shape=tuple(tensors[0].shape[1:]),
        calibration=calibration,
    )


def _folder(path: str, batch_size: int, image_size: int, seed: int) -> Data:
    """A user's image folder (one sub-folder per class), split 80/20 with a fixed seed."""
    from torchvision import datasets, transforms

    if not os.path.isdir(path):
        raise ValueError(f"data={path!r} is not a folder; pass a folder with one sub-folder of images per class")
    tf = transforms.Compose([
        transforms.Resize((image_size, image_size)),
        transforms.ToTensor(),
        transforms.Normalize([0.5] * 3, [0.5] * 3),
    ])
    full = datasets.ImageFolder(path, transform=tf)
    n_val = max(1, len(full) // 5)
    train, val = torch.utils.data.random_split(
        full, [len(full) - n_val, n_val], generator=torch.Generator().manual_seed(seed)
    )
    loader = lambda ds, shuffle: torch.utils.data.DataLoader(  # noqa: E731
        ds, batch_size=batch_size, shuffle=shuffle, drop_last=shuffle and len(ds) >= batch_size, num_workers=0
    )
    return Data(
        name="folder",
        train=loader(train, True),
        val=loader(val, False),
        num_classes=len(full.classes),
        input_shape=(3, image_size, image_size),
        calibration=loader(train, False),
    )
