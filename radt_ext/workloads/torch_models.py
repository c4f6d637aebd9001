"""Model builders (architectures only: nothing downloads weights) and model facts:
FLOPs per sample, size in bytes, parameter and non-zero parameter counts."""
from __future__ import annotations

import io

import torch
from torch import nn

MODELS = ("small_cnn", "resnet18", "resnet50", "mobilenet_v2", "vgg16", "vit", "dlrm", "mlp")


class SmallCNN(nn.Module):
    """Three conv-BN-ReLU stages and one linear head: quick on CPU, prunable channel by channel."""

    def __init__(self, num_classes: int = 10, in_size: int = 32, width: int = 32):
        super().__init__()
        c1, c2, c3 = width, width * 2, width * 4
        self.features = nn.Sequential(
            nn.Conv2d(3, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c2, c3, 3, padding=1), nn.BatchNorm2d(c3), nn.ReLU(), nn.MaxPool2d(2),
        )
        spatial = max(in_size // 4, 1)
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(c3 * spatial * spatial, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


class MLP(nn.Module):
    """Linear-heavy model (flatten + wide hidden layers): the case 2:4 sparsity and fp8 are for."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 1024, depth: int = 3):
        super().__init__()
        layers: list[nn.Module] = [nn.Flatten()]
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class DLRM(nn.Module):
    """DLRM-style recommender: bottom MLP on dense features, one embedding table per sparse
    feature, pairwise dot-product interaction, top MLP to click / no-click logits."""

    def __init__(self, dense_features: int, num_tables: int, table_rows: int, dim: int = 64,
                 bottom: tuple[int, ...] = (512, 256), top: tuple[int, ...] = (512, 256)):
        super().__init__()
        self.bottom = _mlp((dense_features, *bottom, dim))
        self.tables = nn.ModuleList(nn.Embedding(table_rows, dim) for _ in range(num_tables))
        n = num_tables + 1
        self.register_buffer("pairs", torch.triu_indices(n, n, offset=1), persistent=False)
        self.top = _mlp((dim + n * (n - 1) // 2, *top, 2), last_relu=False)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        feats = torch.stack([x] + [t(sparse[:, i]) for i, t in enumerate(self.tables)], dim=1)
        inter = torch.bmm(feats, feats.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([x, inter], dim=1))


def _mlp(sizes: tuple[int, ...], last_relu: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def build(name: str, num_classes: int, input_shape: tuple[int, ...], dlrm_spec: dict | None = None,
          width: int = 32, embedding_dim: int = 64) -> nn.Module:
    if name == "dlrm":
        if not dlrm_spec:
            raise ValueError("model=dlrm needs dataset=clicks (dense + categorical click features)")
        return DLRM(dlrm_spec["dense_features"], dlrm_spec["num_tables"], dlrm_spec["table_rows"], embedding_dim)
    if dlrm_spec:
        raise ValueError(f"dataset=clicks feeds only model=dlrm, not model={name}")
    size = input_shape[-1]
    if name == "small_cnn":
        return SmallCNN(num_classes, size, width)
    if name == "mlp":
        return MLP(int(torch.tensor(input_shape).prod()), num_classes, hidden=width * 32)
    if name == "resnet18":  # torchvision's network, defined in the package: no torchvision import before step 1
        from .resnet import ResNet18

        return ResNet18(num_classes)
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")
    import torchvision.models as tvm  # only for its models: its import costs seconds

    if name == "resnet50":
        return tvm.resnet50(weights=None, num_classes=num_classes)
    if name == "mobilenet_v2":
        return tvm.mobilenet_v2(weights=None, num_classes=num_classes)
    if name == "vgg16":
        if size < 32:
            raise ValueError("vgg16 halves the image five times; use images of at least 32x32 (dataset=digits, not digits8)")
        return tvm.vgg16(weights=None, num_classes=num_classes)
    if name == "vit":
        patch = 16 if size >= 128 else (4 if size >= 16 else 2)
        return tvm.VisionTransformer(image_size=size, patch_size=patch, num_layers=6, num_heads=8,
                                     hidden_dim=256, mlp_dim=1024, num_classes=num_classes)
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}")


def forward_flops_per_sample(model: nn.Module, example: tuple[torch.Tensor, ...]) -> float:
    """FLOPs of one forward pass for one sample, counted by PyTorch's FlopCounterMode."""
    from torch.utils.flop_counter import FlopCounterMode

    one = tuple(t[:1] for t in example)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            model(*one)
        return float(counter.get_total_flops())
    except Exception:  # an op the counter cannot handle: FLOPs stay unknown, MFU is skipped
        return 0.0
    finally:
        model.train(was_training)


def size_bytes(model: nn.Module) -> int:
    """Bytes of the serialized state dict (what a checkpoint of this model weighs)."""
    buffer = io.BytesIO()
    try:
        torch.save(model.state_dict(), buffer)
        return buffer.tell()
    except Exception:  # tensor subclasses (2:4 sparse) that do not pickle: count their storage
        return sum(_nbytes(t) for t in model.state_dict().values() if isinstance(t, torch.Tensor))


def _nbytes(t: torch.Tensor) -> int:
    if hasattr(t, "packed") and t.packed is not None:  # SparseSemiStructuredTensor
        meta = getattr(t, "meta", None)
        return t.packed.nelement() * t.packed.element_size() + (meta.nelement() * meta.element_size() if meta is not None else 0)
    return t.nelement() * t.element_size()


def param_counts(model: nn.Module) -> tuple[int, int]:
    """(parameters, non-zero parameters), counted over dense weights; a 2:4 weight keeps half."""
    total = nonzero = 0
    for p in model.parameters():
        if hasattr(p.data, "packed"):  # 2:4 semi-structured: half of each group of four is kept
            n = p.shape.numel()
            total += n
            nonzero += n // 2
            continue
        total += p.numel()
        nonzero += int(torch.count_nonzero(p.detach()).item())
    return total, nonzero
