"""Installs the PyTorch hooks right after `import torch` (imports.py calls `install`): optimizer steps and
data-loader passes (torch_loader.py), outermost module calls (torch_forward.py). Each goes in on its own:
one that cannot is reported (guard.py) and the others still count. Imports torch's hooks only.
"""
from __future__ import annotations

from radt_ext.workload_api.autoprogress.records import counter

SRC = "torch"


def install(torch_module) -> None:
    from radt_ext.workload_api.autoprogress import torch_forward, torch_loader

    for part in (torch_loader, torch_forward):
        try:
            part.install()
        except Exception as exc:  # noqa: BLE001 - the other part still counts
            part.HOOK.fail(exc)
    counter(SRC).installed()
