"""Counts the work of an unmodified Python script from inside its interpreter and writes it to the
progress file `radt_ext.log_progress` writes to (RADT_EXT_PROGRESS_FILE; progress.py).

The session puts SITE_DIR first on the workload's PYTHONPATH; its `sitecustomize` calls `install()`,
which only adds a post-import finder (imports.py). When the script imports one of the frameworks in
HOOKS, right after that module has run, its hooks are installed:

- torch (`src: "torch"`): optimizer steps, data-loader passes, batches and samples, training epochs
  (torch_loader.py), calls of the outermost modules (torch_forward.py);
- keras, tf_keras (`src: "keras"`): a callback added to fit / evaluate / predict (keras_hooks.py);
- mlflow (`src: "mlflow-steps"`): the highest metric step the script logs (mlflow_steps.py).

Records (cumulative per process and source, written like log_progress's; records.py); each process
that loads the hook says so once (source `hook`), so a run whose script imports no framework is told
apart from one in which the hook never loaded:

    {"pid": 12, "t": 1699999999.0, "src": "hook", "loaded": true}
    {"pid": 12, "t": 1700000000.5, "src": "torch", "steps": 40, "train_batches": 40, "train_samples": 1250}
    {"pid": 12, "t": 1700000000.1, "src": "torch", "epoch": 1, "event": "start"}
    {"pid": 12, "t": 1700000000.0, "src": "torch", "hooked": true}
    {"pid": 12, "t": 1700000003.0, "src": "torch", "error": "torch-loader: ValueError: ..."}

A hook that fails is removed, says so in one line on stderr and in an `error` record; the script never
sees an exception of radt-ext's (guard.py). RADT_EXT_NO_PROGRESS=1 (or no RADT_EXT_PROGRESS_FILE)
installs nothing.

Imports only the standard library and radt_ext.workload_api.progress at start-up; each framework's
module is imported only once the script has imported that framework.
"""
from __future__ import annotations

import os
import time

from radt_ext.workload_api.progress import ENV as PROGRESS_ENV
from radt_ext.workload_api.progress import _append
from radt_ext.workload_api.progress_sources import HOOK_SRC, counting_off

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
FAULT_ENV = "RADT_EXT_PROGRESS_FAULT"  # tests: the name of a hook whose body raises on its first call
# the module whose import installs hooks -> (the module of ours that installs them, their source)
HOOKS = {"torch": ("torch_hooks", "torch"), "keras": ("keras_hooks", "keras"), "tf_keras": ("keras_hooks", "keras"),
         "mlflow": ("mlflow_steps", "mlflow-steps")}


def enabled(environ=os.environ) -> bool:
    """Counting is on: a progress file is named and RADT_EXT_NO_PROGRESS is unset, empty or 0."""
    return bool(environ.get(PROGRESS_ENV)) and not counting_off(environ)


def hook_missing() -> str | None:
    """None when this install holds the start-up hook; else the line a run says at its start and in its
    note: the hook is missing (an install that left it out), and the fix."""
    path = os.path.join(SITE_DIR, "sitecustomize.py")
    if os.path.isfile(path):
        return None
    return (f"radt-ext's start-up hook {path} is missing from this install, so nothing is counted; reinstall "
            "radt-ext from a build that ships it (pip install --force-reinstall <radt-ext wheel or checkout>, "
            "or pip install -e <checkout>)")


def install() -> bool:
    """Install the post-import finder (once); hooks of frameworks already imported go in at once."""
    if not enabled():
        return False
    from radt_ext.workload_api.autoprogress import imports

    _append({"pid": os.getpid(), "t": time.time(), "src": HOOK_SRC, "loaded": True})
    imports.watch({name: (f"{__name__}.{module}", src) for name, (module, src) in HOOKS.items()})
    return True

