"""radt-ext's start-up hook: counts the work of the script this interpreter runs (radt_ext.workload_api.
autoprogress) when the session named a progress file, then runs the next `sitecustomize` on sys.path
(the user's or the distribution's), as Python would have without this one.

The session puts this folder first on the workload's PYTHONPATH. Nothing here may fail or slow the
script's start: it imports only the standard library and, with counting on, radt_ext's light
autoprogress modules (from the radt_ext this file belongs to, even where the interpreter has none).
When they cannot be imported, one line on stderr and an `error` record in the progress file (source
`hook`) say so; the run's note then names the cause.
"""
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _on() -> bool:
    off = os.environ.get("RADT_EXT_NO_PROGRESS", "").strip().lower() not in ("", "0", "false", "no")
    return bool(os.environ.get("RADT_EXT_PROGRESS_FILE")) and not off


def _install() -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))))
    sys.path.insert(0, root)  # this radt_ext, found first, then the path as the script expects it
    try:
        from radt_ext.workload_api import autoprogress

        autoprogress.install()
    except Exception as exc:  # noqa: BLE001 - the script runs whatever happens here
        text = " ".join(f"{type(exc).__name__}: {exc}".split())[:500]
        sys.stderr.write(f"radt-ext: progress counting is off ({text})\n")
        _error(text)
    finally:
        sys.path.remove(root)


def _error(text: str) -> None:
    """The progress file's `error` record of source `hook` (written as progress.py writes its records)."""
    import json
    import time

    try:
        fd = os.open(os.environ["RADT_EXT_PROGRESS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            record = {"pid": os.getpid(), "t": time.time(), "src": "hook", "error": text}
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)
    except OSError:
        pass


def _chain() -> None:
    here = os.path.realpath(_HERE)
    rest = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


if _on():
    _install()
_chain()
