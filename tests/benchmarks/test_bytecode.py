"""benchmarks/startup/bytecode.py: the packages imported without bytecode beside their source, and each
compiled whole, in a fresh interpreter that writes none itself (as a host with PYTHONDONTWRITEBYTECODE)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.conftest import REPO


def test_a_package_imported_without_bytecode_is_named_then_compiled_whole(tmp_path):
    pkg = tmp_path / "nobytecode"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from nobytecode import used\n")
    (pkg / "used.py").write_text("X = 1\n")
    (pkg / "later.py").write_text("Y = 2\n")  # not imported: compiled with its package
    code = textwrap.dedent("""
        import json
        import nobytecode
        from benchmarks.startup import bytecode
        before = bytecode.lacking().get("nobytecode")
        names, ok = bytecode.compile_lacking()
        print(json.dumps([before, "nobytecode" in names, ok, bytecode.lacking().get("nobytecode")]))
    """)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.pathsep.join([str(tmp_path), REPO, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == [2, True, True, None]
    assert {p.name.split(".")[0] for p in (pkg / "__pycache__").iterdir()} == {"__init__", "used", "later"}
