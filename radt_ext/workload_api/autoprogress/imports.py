"""A post-import hook: `watch({"torch": ("radt_ext...torch_hooks", "torch")})` calls that
module's `install(torch)` right after `import torch` has finished executing (at once if torch is imported
already).

It is a finder at the front of sys.meta_path that answers only for the watched names: it asks the
other finders for the module's spec and wraps the spec's loader, whose `exec_module` puts the real
loader back on the module, runs it, then installs. A module that fails to import installs nothing.
Imports only the standard library and guard.py / records.py (through `_install`).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import threading

_watched: dict[str, tuple[str, str]] = {}  # module name -> (our module whose install(module) hooks it, its source)
_done: set[str] = set()
_busy = threading.local()


def watch(hooks: dict[str, tuple[str, str]]) -> None:
    for name, installer in hooks.items():
        _watched.setdefault(name, installer)
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    for name in hooks:
        if name in sys.modules:
            _install(name, sys.modules[name])


def _install(name: str, module) -> None:
    if name in _done:
        return
    _done.add(name)
    installer, src = _watched[name]
    try:
        importlib.import_module(installer).install(module)
    except Exception as exc:  # noqa: BLE001 - a hook that cannot go in must not fail the import
        from radt_ext.workload_api.autoprogress.guard import Hook

        Hook(f"{name}-install", src).fail(exc)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname not in _watched or fullname in _done or getattr(_busy, "name", None) == fullname:
            return None
        _busy.name = fullname
        try:
            spec = importlib.util.find_spec(fullname)
        except (ImportError, ValueError):
            return None
        finally:
            _busy.name = None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, fullname)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, name: str):
        self.loader = loader
        self.name = name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        module.__loader__ = self.loader  # the module keeps its own loader (importlib.resources reads it)
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _install(self.name, module)
