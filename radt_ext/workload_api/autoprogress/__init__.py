"""Counts the work of an unmodified Python script from inside its interpreter and writes it to the
progress file `radt_ext.log_progress` writes to (RADT_EXT_PROGRESS_FILE; progress.py).

The session puts SITE_DIR first on the workload's PYTHONPATH; its `sitecustomize` calls `install()`,
which only adds a post-import finder (imports.py). When the script imports one of the frameworks in
HOOKS, right after that module has run, its hooks are installed:

- torch (`src: "torch"`): optimizer steps, data-loader passes, batches and samples, training epochs
  (torch_loader.py), calls of the outermost modules (torch_forward.py);
- keras, tf_keras (`src: "keras"`): a callback added to fit / evaluate / predict (keras_hooks.py);
- mlflow (`src: "mlflow-steps"`): the highest metric step the script logs (mlflow_steps.py).

Records (cumulative per process and source, written like log_progress's; records.py):

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

from radt_ext.workload_api.progress import ENV as PROGRESS_ENV
from radt_ext.workload_api.progress_sources import counting_off

SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "site")
FAULT_ENV = "RADT_EXT_PROGRESS_FAULT"  # tests: the name of a hook whose body raises on its first call
# the module whose import installs hooks -> (the module of ours that installs them, their source)
HOOKS = {"torch": ("torch_hooks", "torch"), "keras": ("keras_hooks", "keras"), "tf_keras": ("keras_hooks", "keras"),
         "mlflow": ("mlflow_steps", "mlflow-steps")}


def enabled(environ=os.environ) -> bool:
    """Counting is on: a progress file is named and RADT_EXT_NO_PROGRESS is unset, empty or 0."""
    return bool(environ.get(PROGRESS_ENV)) and not counting_off(environ)


def install() -> bool:
    """Install the post-import finder (once); hooks of frameworks already imported go in at once."""
    if not enabled():
        return False
    from radt_ext.workload_api.autoprogress import imports

    imports.watch({name: (f"{__name__}.{module}", src) for name, (module, src) in HOOKS.items()})
    return True

