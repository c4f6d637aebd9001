"""The networks the profiler knows (the recipes' models, at the inputs they are profiled with) and
any `nn.Module` a user names as `package.module:attribute`, with the input shape they give."""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import torch
from torch import nn

from radt_ext.errors import UsageError
from radt_ext.workloads import torch_models

# name: (sample input shape, classes, batch sizes the dataset uses)
MODELS: dict[str, tuple[tuple[int, ...], int, tuple[int, ...]]] = {
    "small_cnn": ((3, 32, 32), 10, (128, 256, 512)),
    "mlp": ((3, 32, 32), 10, (256, 512, 1024)),
    "resnet18": ((3, 224, 224), 1000, (16, 32, 64)),
    "resnet50": ((3, 224, 224), 1000, (16, 32, 64)),
    "vit": ((3, 224, 224), 1000, (16, 32, 64)),
    "dlrm": ((13,), 2, (512, 1024, 2048)),
    "mobilenet_v2": ((3, 224, 224), 1000, (16, 32, 64)),
}
DLRM = {"dense_features": 13, "num_tables": 26, "table_rows": 100_000}
# small inputs for a dry run on the CPU
TINY = {"shape": (3, 32, 32), "dlrm": {"dense_features": 13, "num_tables": 4, "table_rows": 1000}}

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Network:
    name: str
    module: nn.Module
    inputs: tuple


def build(name: str, batch: int, precision: str, device: torch.device, tiny: bool = False,
          input_shape: tuple[int, ...] | None = None) -> Network:
    """The network `name` in `precision` (weights and activations) on `device` with a random batch."""
    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if batch < 1:
        raise UsageError(f"batch size {batch} must be at least 1")
    dtype = PRECISIONS[precision]
    gen = torch.Generator().manual_seed(0)
    if ":" in name:
        module = _user_module(name)
        if not input_shape:
            raise UsageError(f"{name} is your own module: give its sample input shape, e.g. --input-shape 3,32,32")
        inputs: tuple = (torch.randn((batch, *input_shape), generator=gen),)
    elif name in MODELS:
        shape, classes, _ = MODELS[name]
        if tiny:
            shape = (13,) if name == "dlrm" else TINY["shape"]
        if input_shape:
            shape = input_shape
        spec = (TINY["dlrm"] if tiny else DLRM) if name == "dlrm" else None
        module = torch_models.build(name, classes, shape, dlrm_spec=spec)
        if name == "dlrm":
            sparse = torch.randint(0, spec["table_rows"], (batch, spec["num_tables"]), generator=gen)
            inputs = (torch.randn((batch, spec["dense_features"]), generator=gen), sparse)
        else:
            inputs = (torch.randn((batch, *shape), generator=gen),)
    else:
        raise UsageError(f"unknown model {name!r}; choose one of {', '.join(MODELS)} or give package.module:attribute")
    module = module.to(device=device, dtype=dtype)
    inputs = tuple(t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device) for t in inputs)
    return Network(name, module, inputs)


def _user_module(spec: str) -> nn.Module:
    path, _, attr = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(path), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load {spec}: {exc}; give an importable package.module:attribute") from None
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, nn.Module)):
        try:
            obj = obj()
        except Exception as exc:
            raise UsageError(f"cannot build {spec}: {type(exc).__name__}: {exc}; it must build with no arguments") from None
    if not isinstance(obj, nn.Module):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a torch.nn.Module")
    return obj
