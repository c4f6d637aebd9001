"""AdamW for the torch recipes: torch's own functional AdamW (`torch.optim.adamw.adamw`, the same
foreach or per-tensor kernels `torch.optim.AdamW` picks: foreach=None leaves torch's default) behind the methods a training loop and
`torch.amp.GradScaler` call: `param_groups`, `zero_grad`, `step`.

Why not `torch.optim.AdamW` itself: every `torch.optim.Optimizer` imports `torch._dynamo` on its first
call (its methods are wrapped to be skipped by the compiler), eager or not. That import is ~3.3 s on a
GPU host, as long as `import torch`, and would be most of a synthetic recipe's start-up.
"""
from __future__ import annotations

import torch
from torch.optim.adamw import adamw


class AdamW:
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        self.param_groups = [{"params": [p for p in params if p.requires_grad], "lr": lr, "betas": betas,
                              "eps": eps, "weight_decay": weight_decay}]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.param_groups[0]["params"]:
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                p.grad.detach_()
                p.grad.zero_()

    @torch.no_grad()
    def step(self) -> None:
        group = self.param_groups[0]
        params = [p for p in group["params"] if p.grad is not None]
        if not params:
            return
        for p in params:
            if p not in self.state:  # as torch.optim.AdamW: moments like the parameter, the step count on the host
                self.state[p] = {"step": torch.tensor(0.0, dtype=torch.float32),
                                 "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                                 "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format)}
        states = [self.state[p] for p in params]
        beta1, beta2 = group["betas"]
        adamw(params, [p.grad for p in params], [s["exp_avg"] for s in states], [s["exp_avg_sq"] for s in states],
              [], [s["step"] for s in states], foreach=None, has_complex=any(p.is_complex() for p in params),
              amsgrad=False, beta1=beta1, beta2=beta2, lr=group["lr"], weight_decay=group["weight_decay"],
              eps=group["eps"], maximize=False)

