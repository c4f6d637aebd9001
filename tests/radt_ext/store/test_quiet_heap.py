"""The `radt-ext` command's heap around MLflow's import and its first store connection (store/client.py
quiet_heap): no cycle collection meanwhile, what was made frozen after, once per step, and nothing of the kind
in a program that imports radt_ext (a test, a notebook). Each case in a fresh interpreter: freezing this one's
heap would change every test after it."""
from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.conftest import REPO


def _python(code: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_the_command_imports_without_cycle_collection_then_freezes_what_it_made_once_a_step():
    out = _python("""
        import gc
        from radt_ext.store import client
        client.FREEZE_HEAP = True
        with client.quiet_heap("import"):
            print(gc.isenabled())
            made = [[] for _ in range(1000)]
        print(gc.isenabled(), gc.get_freeze_count() >= 1000)
        gc.unfreeze()
        with client.quiet_heap("import"):  # done once: the collector as it was
            print(gc.isenabled())
        print(gc.get_freeze_count())
        gc.disable()
        with client.quiet_heap("connect"):
            pass
        print(gc.isenabled())  # left off by the program: not turned on
    """)
    assert out == ["False", "True", "True", "True", "0", "False"]


def test_a_program_importing_radt_ext_keeps_its_collector_and_the_command_sets_it():
    out = _python("""
        import contextlib, gc
        from radt_ext.store import client
        with client.quiet_heap("import"):
            print(gc.isenabled())
        print(gc.get_freeze_count())
        from radt_ext import cli
        with contextlib.suppress(SystemExit):
            cli.main.main(["--help"], standalone_mode=False)
        print(client.FREEZE_HEAP)
    """)
    assert out[0:2] == ["True", "0"] and out[-1] == "True"
