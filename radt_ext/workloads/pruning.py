"""Pruning variants: magnitude unstructured (made permanent after fine-tuning), structured
channel pruning that rebuilds smaller layers, and 2:4 semi-structured sparsity on GPUs with
sparse tensor cores, kept only on the layers where it is measured to pay."""
from __future__ import annotations

import time

import torch
import torch.nn.utils.prune as prune
from torch import nn

METHODS = ("unstructured", "structured", "semi24")


def prunable(model: nn.Module) -> list[tuple[nn.Module, str]]:
    return [(m, "weight") for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


# --- unstructured -----------------------------------------------------------------------

def apply_unstructured(model: nn.Module, sparsity: float) -> None:
    """Global L1 magnitude pruning over every conv and linear weight; masks stay as hooks
    during fine-tuning so pruned weights stay zero."""
    prune.global_unstructured(prunable(model), pruning_method=prune.L1Unstructured, amount=sparsity)


def make_permanent(model: nn.Module) -> None:
    """Fold every pruning mask into its weight and drop the hooks."""
    for module in model.modules():
        for name in list(getattr(module, "_forward_pre_hooks", {}).values()):
            if isinstance(name, prune.BasePruningMethod):
                prune.remove(module, name._tensor_name)


# --- structured (channels) --------------------------------------------------------------

def apply_structured(model: nn.Module, sparsity: float) -> int:
    """Remove the `sparsity` fraction of lowest-L1 output channels from every prunable layer
    chain, rebuilding the producer, its BatchNorm, any depthwise conv and the consumer with
    fewer channels. Returns how many layer chains were shrunk."""
    chains = list(_chains(model))
    if not chains:
        raise ValueError(f"structured pruning knows no channel chain in {type(model).__name__}; use prune_method=unstructured")
    for chain in chains:
        _shrink(chain, sparsity)
    return len(chains)


class _Slot:
    """A module's place in its parent, so it can be replaced by a rebuilt one."""

    def __init__(self, parent: nn.Module, key: str):
        self.parent, self.key = parent, key

    def get(self) -> nn.Module:
        return self.parent[int(self.key)] if self.key.isdigit() else getattr(self.parent, self.key)

    def set(self, module: nn.Module) -> None:
        if self.key.isdigit():
            self.parent[int(self.key)] = module
        else:
            setattr(self.parent, self.key, module)


def _chains(model: nn.Module):
    """(producer, bn|None, [(depthwise, bn)...], consumer) slot tuples for known architectures."""
    import torchvision.models as tvm
    from torchvision.models.mobilenetv2 import InvertedResidual
    from torchvision.models.vision_transformer import MLPBlock

    from .resnet import ResNet18
    from .torch_models import DLRM, MLP, SmallCNN

    if isinstance(model, (SmallCNN, tvm.VGG)):
        seq = model.features
        convs = [i for i, m in enumerate(seq) if isinstance(m, nn.Conv2d)]
        head = model.classifier
        head_idx = next(i for i, m in enumerate(head) if isinstance(m, nn.Linear))
        for pos, i in enumerate(convs):
            bn = _Slot(seq, str(i + 1)) if isinstance(seq[i + 1], nn.BatchNorm2d) else None
            consumer = _Slot(seq, str(convs[pos + 1])) if pos + 1 < len(convs) else _Slot(head, str(head_idx))
            yield _Slot(seq, str(i)), bn, [], consumer
    elif isinstance(model, (tvm.ResNet, ResNet18)):
        for layer in (model.layer1, model.layer2, model.layer3, model.layer4):
            for block in layer:
                names = ["1", "2", "3"] if isinstance(block, tvm.resnet.Bottleneck) else ["1", "2"]
                for a, b in zip(names, names[1:]):
                    yield _Slot(block, f"conv{a}"), _Slot(block, f"bn{a}"), [], _Slot(block, f"conv{b}")
    elif isinstance(model, tvm.MobileNetV2):
        for block in model.features:
            if isinstance(block, InvertedResidual) and len(block.conv) == 4:  # has the expand 1x1 conv
                seq = block.conv
                yield (_Slot(seq[0], "0"), _Slot(seq[0], "1"), [(_Slot(seq[1], "0"), _Slot(seq[1], "1"))], _Slot(seq, "2"))
    elif isinstance(model, tvm.VisionTransformer):
        for layer in model.encoder.layers:
            mlp = layer.mlp
            assert isinstance(mlp, MLPBlock)
            yield _Slot(mlp, "0"), None, [], _Slot(mlp, "3")
    elif isinstance(model, (MLP, DLRM)):
        seqs = [model.net] if isinstance(model, MLP) else [model.bottom, model.top]
        for seq in seqs:
            lin = [i for i, m in enumerate(seq) if isinstance(m, nn.Linear)]
            for a, b in zip(lin, lin[1:]):
                yield _Slot(seq, str(a)), None, [], _Slot(seq, str(b))
        # DLRM's bottom MLP output width is tied to the embedding size: its last layer stays.


def _shrink(chain, sparsity: float) -> None:
    producer_slot, bn_slot, depthwise, consumer_slot = chain
    producer, consumer = producer_slot.get(), consumer_slot.get()
    out = producer.weight.shape[0]
    keep_n = max(1, int(round(out * (1.0 - sparsity))))
    score = producer.weight.detach().abs().flatten(1).sum(1)
    if bn_slot is not None:
        score = score * bn_slot.get().weight.detach().abs()
    keep = torch.sort(torch.topk(score, keep_n).indices).values
    producer_slot.set(_slice_out(producer, keep))
    if bn_slot is not None:
        bn_slot.set(_slice_bn(bn_slot.get(), keep))
    for dw_slot, dw_bn_slot in depthwise:
        dw_slot.set(_slice_depthwise(dw_slot.get(), keep))
        dw_bn_slot.set(_slice_bn(dw_bn_slot.get(), keep))
    consumer_slot.set(_slice_in(consumer, keep, out))


def _slice_out(m: nn.Module, keep: torch.Tensor) -> nn.Module:
    if isinstance(m, nn.Conv2d):
        new = nn.Conv2d(m.in_channels, len(keep), m.kernel_size, m.stride, m.padding, m.dilation, m.groups, m.bias is not None)
    else:
        new = nn.Linear(m.in_features, len(keep), m.bias is not None)
    return _filled(new, m, m.weight[keep], m.bias[keep] if m.bias is not None else None)


def _slice_in(m: nn.Module, keep: torch.Tensor, channels: int) -> nn.Module:
    if isinstance(m, nn.Conv2d):
        new = nn.Conv2d(len(keep), m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation, m.groups, m.bias is not None)
        cols = keep
    else:
        # A linear layer after flatten sees channel-major features: channel c owns `spatial` columns.
        spatial = m.in_features // channels
        cols = (keep[:, None] * spatial + torch.arange(spatial, device=keep.device)).flatten()
        new = nn.Linear(len(cols), m.out_features, m.bias is not None)
    return _filled(new, m, m.weight[:, cols], m.bias)


def _slice_depthwise(m: nn.Conv2d, keep: torch.Tensor) -> nn.Conv2d:
    new = nn.Conv2d(len(keep), len(keep), m.kernel_size, m.stride, m.padding, m.dilation, len(keep), m.bias is not None)
    return _filled(new, m, m.weight[keep], m.bias[keep] if m.bias is not None else None)


def _filled(new: nn.Module, old: nn.Module, weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Module:
    """`new` on `old`'s device and dtype, holding the kept slice of `old`'s weights."""
    new = new.to(old.weight.device, old.weight.dtype)
    with torch.no_grad():
        new.weight.copy_(weight)
        if bias is not None:
            new.bias.copy_(bias)
    return new


def _slice_bn(bn: nn.BatchNorm2d, keep: torch.Tensor) -> nn.BatchNorm2d:
    new = nn.BatchNorm2d(len(keep), bn.eps, bn.momentum, bn.affine, bn.track_running_stats).to(bn.weight.device)
    with torch.no_grad():
        for name in ("weight", "bias", "running_mean", "running_var"):
            getattr(new, name).copy_(getattr(bn, name)[keep])
    return new


# --- 2:4 semi-structured ----------------------------------------------------------------

def semi24_refusal(device: torch.device) -> str | None:
    """None when 2:4 sparse tensor cores are usable here, else the one line saying why not."""
    if device.type != "cuda":
        return "prune_method=semi24 needs an NVIDIA GPU with sparse tensor cores (compute capability >= 8.0); this run is on CPU. Use prune_method=unstructured or structured."
    major, minor = torch.cuda.get_device_capability(device)
    if major < 8:
        return f"prune_method=semi24 needs compute capability >= 8.0; this GPU has {major}.{minor}. Use prune_method=unstructured or structured."
    return None


def _eligible(m: nn.Module) -> bool:
    return isinstance(m, nn.Linear) and m.out_features % 64 == 0 and m.in_features % 64 == 0


def apply_24_masks(model: nn.Module) -> int:
    """Zero the two smallest of every four weights along the input dimension of each eligible
    linear layer, as pruning masks kept through fine-tuning. Returns how many layers."""
    count = 0
    for m in model.modules():
        if _eligible(m):
            w = m.weight.detach()
            groups = w.abs().reshape(w.shape[0], -1, 4)
            top2 = groups.topk(2, dim=-1).indices
            mask = torch.zeros_like(groups).scatter_(-1, top2, 1.0).reshape_as(w)
            prune.custom_from_mask(m, "weight", mask)
            count += 1
    return count


def _time(fn, iters: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters


def convert_24(model: nn.Module, batch_rows: int, min_speedup: float = 1.05) -> list[dict]:
    """Swap in `to_sparse_semi_structured` weights on the linear layers where a timed sparse
    matmul beats the dense one by `min_speedup`; returns one record per eligible layer.
    The model must already be on the GPU in fp16 or bf16 with its 2:4 masks made permanent."""
    from torch.sparse import to_sparse_semi_structured

    decisions = []
    for name, m in model.named_modules():
        if not _eligible(m):
            continue
        w = m.weight.detach()
        x = torch.randn(batch_rows, m.in_features, device=w.device, dtype=w.dtype)
        dense_s = _time(lambda: torch.nn.functional.linear(x, w, m.bias))
        try:
            sparse_w = to_sparse_semi_structured(w)
            sparse_s = _time(lambda: torch.nn.functional.linear(x, sparse_w, m.bias))
        except (RuntimeError, NotImplementedError) as err:
            decisions.append({"layer": name, "shape": list(w.shape), "used": False, "why": str(err).splitlines()[0]})
            continue
        speedup = dense_s / sparse_s
        used = speedup >= min_speedup
        if used:
            m.weight = nn.Parameter(sparse_w, requires_grad=False)
        decisions.append({"layer": name, "shape": list(w.shape), "dense_ms": dense_s * 1e3,
                          "sparse_ms": sparse_s * 1e3, "speedup": speedup, "used": used})
    return decisions
