"""A hook that never harms the script: its body runs inside try/except, and the first exception of ours
goes to `Hook.fail`, which removes the hook (its undo steps run), prints one line on stderr and writes
an `error` record. Patches of a class attribute (`Hook.patch`) are undone only while they are still the
attribute's value (someone may have wrapped ours since); otherwise `hook.on` turns the wrapper into a
plain pass-through. RADT_EXT_PROGRESS_FAULT=<hook name> makes that hook's body raise on its first call
(for tests). Imports only the standard library and records.py.
"""
from __future__ import annotations

import os
import sys

from radt_ext.workload_api.autoprogress import FAULT_ENV
from radt_ext.workload_api.autoprogress.records import counter


class Hook:
    """One named hook of one source (e.g. `torch-loader` of `torch`)."""

    def __init__(self, name: str, src: str):
        self.name = name
        self.src = src
        self.on = True
        self.fault = os.environ.get(FAULT_ENV) == name
        self._undo: list = []

    def check_fault(self) -> None:
        """Raise the injected fault (tests); a no-op unless RADT_EXT_PROGRESS_FAULT names this hook."""
        if self.fault:
            self.fault = False
            raise RuntimeError(f"fault injected by {FAULT_ENV}")

    def call(self, fn, *args) -> None:
        """fn(*args) while the hook is on; an exception of ours removes the hook, never reaches the script."""
        if not self.on:
            return
        try:
            self.check_fault()
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - never into the script
            self.fail(exc)

    def undo(self, step) -> None:
        """`step()` runs when the hook is removed."""
        self._undo.append(step)

    def patch(self, owner, attr: str, make):
        """owner.attr = make(original); undone on removal while ours is still there."""
        own = attr in vars(owner)
        original = vars(owner)[attr] if own else getattr(owner, attr)
        wrapper = make(original)
        setattr(owner, attr, wrapper)

        def restore():
            if vars(owner).get(attr) is wrapper:
                if own:
                    setattr(owner, attr, original)
                else:
                    delattr(owner, attr)
        self.undo(restore)
        return wrapper

    def fail(self, exc: BaseException) -> None:
        """Remove the hook after an exception of ours: undo, one warning line, one error record."""
        if not self.on:
            return
        self.on = False
        for step in reversed(self._undo):
            try:
                step()
            except Exception:  # noqa: BLE001 - removal goes on with the other steps
                pass
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
        try:
            sys.stderr.write(f"radt-ext: progress hook {self.name} failed and was removed ({text})\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - a closed stderr must not break the script
            pass
        counter(self.src).error(f"{self.name}: {text}")
