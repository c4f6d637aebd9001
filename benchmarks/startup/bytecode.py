"""Which packages a sweep imports have no bytecode on this host, and compiling them as a user's `pip install`
would have: a host whose Python was installed without bytecode (and with PYTHONDONTWRITEBYTECODE set) compiles
them again in every fresh interpreter, which a user's machine does not.

    python -m benchmarks.startup.bytecode             # {package: modules without bytecode} after a sweep's imports
    python -m benchmarks.startup.bytecode --compile   # each such package compiled whole (gpu_lib.sh's gpu_wheels)
"""
from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import sys


def lacking() -> dict[str, int]:
    """{top-level package: how many of its loaded modules have no up-to-date bytecode beside their source}."""
    out: dict[str, int] = {}
    for name, mod in list(sys.modules.items()):
        path = getattr(mod, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        try:
            fresh = os.path.getmtime(importlib.util.cache_from_source(path)) >= os.path.getmtime(path)
        except (OSError, ValueError, NotImplementedError):
            fresh = False
        if not fresh:
            top = name.split(".")[0]
            out[top] = out.get(top, 0) + 1
    return out


def compile_lacking() -> tuple[list[str], bool]:
    """Each package `lacking()` names compiled whole (its modules imported later too), one after another:
    (their names, whether every file compiled)."""
    names, ok = sorted(lacking()), True
    for name in names:
        path = getattr(sys.modules.get(name), "__file__", None) or ""
        if path.endswith("__init__.py"):
            ok &= bool(compileall.compile_dir(os.path.dirname(path), quiet=2))
        elif path.endswith(".py"):
            ok &= bool(compileall.compile_file(path, quiet=2))
    return names, ok


def sweep_imports() -> None:
    import mlflow  # noqa: F401

    import radt_ext.cli  # noqa: F401
    import radt_ext.collocation.group  # noqa: F401
    import radt_ext.sweep.cli  # noqa: F401


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compile", action="store_true", help="compile each package that lacks bytecode")
    args = ap.parse_args(argv)
    sweep_imports()
    if args.compile:
        names, ok = compile_lacking()
        print(f"compiled {names}" + ("" if ok else " (some files failed)"))
    else:
        print(f"lacking bytecode: {lacking()}")


if __name__ == "__main__":
    main()
