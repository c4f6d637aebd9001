"""The networks the profiler knows (the recipes' models, at the inputs they are profiled with) and
any `nn.Module` a user names as `package.module:attribute`: its inputs from its own
`example_inputs(batch)` (on the module, or on the class or function that builds it), or one tensor of
the sample shape given with `--input-shape`."""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field

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
    kwargs: dict = field(default_factory=dict)  # keyword inputs (a module whose example inputs are a dict)


def build(name: str, batch: int, precision: str, device: torch.device, tiny: bool = False,
          input_shape: tuple[int, ...] | None = None) -> Network:
    """The network `name` in `precision` (weights and activations) on `device` with a random batch."""
    if precision not in PRECISIONS:
        raise UsageError(f"unknown precision {precision!r}; choose one of {', '.join(PRECISIONS)}")
    if batch < 1:
        raise UsageError(f"batch size {batch} must be at least 1")
    dtype = PRECISIONS[precision]
    gen = torch.Generator().manual_seed(0)
    kwargs: dict = {}
    if ":" in name:
        module, factory = _user_module(name)
        if input_shape:
            inputs: tuple = (torch.randn((batch, *input_shape), generator=gen),)
        else:
            inputs, kwargs = _example_inputs(name, module, factory, batch)
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
    move = lambda t: t.to(device=device, dtype=dtype) if t.is_floating_point() else t.to(device)  # noqa: E731
    return Network(name, module, tuple(move(t) for t in inputs), {k: move(v) for k, v in kwargs.items()})


def _user_module(spec: str) -> tuple[nn.Module, object]:
    """The module `spec` names, and the class or function that built it (None for a module object);
    built with torch's random generator seeded, so every machine profiles the same weights."""
    path, _, attr = spec.partition(":")
    try:
        obj = getattr(importlib.import_module(path), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load {spec}: {exc}; give an importable package.module:attribute") from None
    factory = None
    if isinstance(obj, type) or (callable(obj) and not isinstance(obj, nn.Module)):
        factory = obj
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                obj = obj()
        except Exception as exc:
            raise UsageError(f"cannot build {spec}: {type(exc).__name__}: {exc}; it must build with no arguments") from None
    if not isinstance(obj, nn.Module):
        raise UsageError(f"{spec} is a {type(obj).__name__}, not a torch.nn.Module")
    return obj, factory


def _example_inputs(spec: str, module: nn.Module, factory, batch: int) -> tuple[tuple, dict]:
    """(positional, keyword) inputs from `example_inputs(batch)` of the module or its factory: a tensor,
    a tuple or list of tensors, or a dict of them (passed by keyword)."""
    make = getattr(module, "example_inputs", None) or getattr(factory, "example_inputs", None)
    if make is None:
        raise UsageError(f"{spec} is your own module: give its inputs with an example_inputs(batch) method "
                         "(returning a tensor, a tuple or a dict of tensors) or, for one tensor, "
                         "its sample shape with --input-shape, e.g. 3,32,32")
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            value = make(batch)
    except Exception as exc:
        raise UsageError(f"{spec}.example_inputs({batch}) failed: {type(exc).__name__}: {exc}") from None
    if isinstance(value, torch.Tensor):
        return (value,), {}
    if isinstance(value, dict) and all(isinstance(v, torch.Tensor) for v in value.values()):
        return (), dict(value)
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        return tuple(value), {}
    raise UsageError(f"{spec}.example_inputs({batch}) returned a {type(value).__name__}; "
                     "return a tensor, a tuple of tensors or a dict of tensors")
