"""FLOPs and bytes moved by one operation call, computed from its module and tensor shapes.

Forward counts: convolution and linear 2·MACs; attention its projections plus QKᵀ and AV;
normalisation 5 per element (2 in inference), activations 1 (GELU/SiLU 8), pooling the kernel
area per output, embedding 0. Backward: twice the forward for weighted operations (once when
the input needs no gradient), twice for the rest. A module type not listed falls back on
PyTorch's FlopCounterMode. Bytes: inputs + parameters + outputs for a forward; gradients of the
outputs, saved inputs, parameters and the gradients produced for a backward. An embedding moves
the rows it gathers, not its table.

Functional operations (captured outside leaf modules): elementwise arithmetic (`add`, `mul`, …) 1
FLOP per output element, forward and backward; matrix products (`bmm`, `matmul`, …) as
FlopCounterMode counts them, backward once per operand that takes a gradient; data movement
(`cat`, `stack`, indexing, copies) 0 FLOPs. Bytes: inputs + outputs, except indexing, which reads
the elements it gathers (and its indices), not its whole input; a data-movement backward moves the
output's gradient and the input gradients it produces.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from radt_ext.ops.capture import OpCall, tensors

NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm2d)
CHEAP_ACT = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.Hardtanh, nn.Dropout)
COSTLY_ACT = (nn.GELU, nn.SiLU, nn.Sigmoid, nn.Tanh, nn.Hardswish, nn.Softmax, nn.Mish)
POOLS = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)
ADAPTIVE = (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d)
ELEMENTWISE = {"add", "sub", "mul", "div", "true_divide", "rsub", "neg", "pow", "mod", "floordiv"}
MATMULS = {"bmm", "mm", "matmul", "baddbmm", "addmm", "addbmm", "einsum", "linear", "conv2d", "conv1d",
           "scaled_dot_product_attention"}
INDEXING = {"getitem", "index_select", "gather", "take", "index"}


def _nbytes(ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _input_tensors(call: OpCall) -> list[torch.Tensor]:
    seen: dict[int, torch.Tensor] = {}
    for v in tensors([*call.args, *call.kwargs.values()]):
        seen.setdefault(id(v), v)
    return list(seen.values())


def _moves_data(call: OpCall) -> bool:
    """A functional operation that computes nothing: concatenation, stacking, indexing, copies."""
    return call.module is None and call.op not in ELEMENTWISE and call.op not in MATMULS


def forward_flops(call: OpCall, out: list[torch.Tensor]) -> float:
    m, ins = call.module, _input_tensors(call)
    n_out = sum(t.numel() for t in out)
    if m is None:
        if call.op in ELEMENTWISE:
            return float(n_out)
        return math.nan  # matrix products counted by FlopCounterMode; data movement counts 0 there
    if isinstance(m, nn.modules.conv._ConvNd):
        k = math.prod(m.kernel_size) * m.in_channels // m.groups
        return 2.0 * n_out * k + (n_out if m.bias is not None else 0)
    if isinstance(m, nn.Linear):
        rows = ins[0].numel() // m.in_features
        return 2.0 * rows * m.in_features * m.out_features + (rows * m.out_features if m.bias is not None else 0)
    if isinstance(m, nn.MultiheadAttention):
        q = ins[0]
        b, length = (q.shape[0], q.shape[1]) if m.batch_first else (q.shape[1], q.shape[0])
        e = m.embed_dim
        return 2.0 * b * length * e * 3 * e + 4.0 * b * length * length * e + 2.0 * b * length * e * e
    if isinstance(m, nn.Embedding):
        return 0.0
    if isinstance(m, NORMS):
        return (5.0 if m.training else 2.0) * n_out
    if isinstance(m, CHEAP_ACT):
        return float(n_out) if not isinstance(m, nn.Dropout) or (m.training and m.p > 0) else 0.0
    if isinstance(m, COSTLY_ACT):
        return 8.0 * n_out
    if isinstance(m, POOLS):
        return float(n_out * math.prod(_pair(m.kernel_size, ins[0].dim() - 2)))
    if isinstance(m, ADAPTIVE):
        return float(ins[0].numel())
    return math.nan  # counted by FlopCounterMode instead


def _pair(k, dims: int) -> tuple[int, ...]:
    return tuple(k) if isinstance(k, (tuple, list)) else (k,) * dims


def backward_flops(call: OpCall, fwd: float) -> float:
    m = call.module
    if m is None:
        if call.op in MATMULS:
            return fwd * min(2, sum(t.requires_grad for t in _input_tensors(call)))
        return fwd
    weighted = isinstance(m, (nn.modules.conv._ConvNd, nn.Linear, nn.MultiheadAttention))
    if weighted:
        input_grad = any(t.requires_grad for t in _input_tensors(call))
        return fwd * (2.0 if input_grad else 1.0)
    return 2.0 * fwd


def param_bytes(call: OpCall) -> int:
    m = call.module
    if m is None:
        return 0
    if isinstance(m, nn.Embedding):  # the gathered rows
        idx = _input_tensors(call)[0]
        return idx.numel() * m.embedding_dim * m.weight.element_size()
    return _nbytes(p for p in m.parameters(recurse=True))


def forward_bytes(call: OpCall, out: list[torch.Tensor]) -> int:
    if call.module is None and call.op in INDEXING:  # the gathered elements and the indices
        index = [t for t in _input_tensors(call)[1:] if not t.is_floating_point()]
        return 2 * _nbytes(out) + _nbytes(index)
    return _nbytes(_input_tensors(call)) + param_bytes(call) + _nbytes(out)


def backward_bytes(call: OpCall, out: list[torch.Tensor]) -> int:
    ins = _input_tensors(call)
    grad_in = _nbytes(t for t in ins if t.requires_grad)
    if _moves_data(call):
        return _nbytes(out) + grad_in
    grad_params = param_bytes(call) if any(p.requires_grad for p in call.parameters()) else 0
    return _nbytes(out) + _nbytes(ins) + param_bytes(call) + grad_in + grad_params


def counted_flops(fn) -> float:
    """FLOPs PyTorch's FlopCounterMode counts while `fn()` runs (matmul, convolution, attention)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return float(counter.get_total_flops())

