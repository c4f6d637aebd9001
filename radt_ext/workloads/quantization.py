"""Quantization variants: int8 static post-training quantization on CPU (FX graph mode, x86
backend, calibrated on training batches), dynamic int8 of the linear layers, and fp8
matmuls through `torch._scaled_mm` on GPUs that have fp8 tensor cores."""
from __future__ import annotations

import copy
import warnings

import torch
from torch import nn

SCHEMES = ("static_int8", "dynamic_int8", "fp8")


def refusal(scheme: str, device: torch.device) -> str | None:
    """None when `scheme` can run here, else the one line saying why not."""
    if scheme == "fp8":
        if device.type != "cuda":
            return "quant_scheme=fp8 needs an NVIDIA GPU with fp8 tensor cores (compute capability >= 8.9); this run is on CPU. Use quant_scheme=static_int8 or dynamic_int8."
        major, minor = torch.cuda.get_device_capability(device)
        if (major, minor) < (8, 9):
            return f"quant_scheme=fp8 needs compute capability >= 8.9; this GPU has {major}.{minor}. Use quant_scheme=static_int8 or dynamic_int8."
    elif scheme in ("static_int8", "dynamic_int8"):
        engines = torch.backends.quantized.supported_engines
        if "x86" not in engines and "fbgemm" not in engines:
            return f"quant_scheme={scheme} needs PyTorch's x86/fbgemm int8 engine, which this build lacks ({', '.join(engines)})."
    else:
        return f"unknown quant_scheme {scheme!r}; choose one of {', '.join(SCHEMES)}"
    return None


def _engine() -> str:
    engine = "x86" if "x86" in torch.backends.quantized.supported_engines else "fbgemm"
    torch.backends.quantized.engine = engine
    return engine


def static_int8(model: nn.Module, calibration, example: tuple[torch.Tensor, ...], max_batches: int = 16) -> nn.Module:
    """int8 weights and activations on CPU: trace, insert observers, calibrate, convert."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    float_model = copy.deepcopy(model).cpu().eval()
    if hasattr(float_model, "tables"):  # DLRM: embeddings stay float, the MLPs are quantized
        raise ValueError("static_int8 traces image models; for model=dlrm use quant_scheme=dynamic_int8")
    engine = _engine()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FX quantization prints deprecation notices on every call
        prepared = prepare_fx(float_model, get_default_qconfig_mapping(engine), tuple(t.cpu() for t in example))
        with torch.no_grad():
            for i, batch in enumerate(calibration):
                if i >= max_batches:
                    break
                prepared(*(t.cpu() for t in batch[:-1]))
        return convert_fx(prepared)


def dynamic_int8(model: nn.Module) -> nn.Module:
    """int8 weights for linear layers, activations quantized on the fly (CPU)."""
    from torch.ao.quantization import quantize_dynamic

    _engine()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return quantize_dynamic(copy.deepcopy(model).cpu().eval(), {nn.Linear}, dtype=torch.qint8)


class Fp8Linear(nn.Module):
    """A linear layer whose matmul runs in fp8 (e4m3) with per-tensor scales."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        w = linear.weight.detach().float()
        scale = (w.abs().max().clamp(min=1e-12) / torch.finfo(torch.float8_e4m3fn).max).reshape(())
        self.register_buffer("w_scale", scale)
        # _scaled_mm wants the second operand column-major: keep W^T as a transposed view.
        self.register_buffer("w_t", (w / scale).to(torch.float8_e4m3fn).t())
        self.bias = None if linear.bias is None else nn.Parameter(linear.bias.detach().to(torch.bfloat16), requires_grad=False)
        self.out_features = linear.out_features

    def forward(self, x):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        x_scale = (x2.abs().max().float().clamp(min=1e-12) / torch.finfo(torch.float8_e4m3fn).max).reshape(())
        xq = (x2.float() / x_scale).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(xq, self.w_t, scale_a=x_scale, scale_b=self.w_scale,
                             bias=self.bias, out_dtype=torch.bfloat16)
        return y.reshape(*shape[:-1], self.out_features)


def fp8(model: nn.Module) -> tuple[nn.Module, list[str]]:
    """Swap every linear layer whose sizes fit fp8 tensor cores (multiples of 16) for
    `Fp8Linear`; returns the model and the names of the swapped layers."""
    model = copy.deepcopy(model).eval()
    swapped = []
    for name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear) and child.in_features % 16 == 0 and child.out_features % 16 == 0:
                setattr(parent, child_name, Fp8Linear(child))
                swapped.append(f"{name}.{child_name}" if name else child_name)
    return model, swapped
