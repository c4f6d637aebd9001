"""radt-ext as a user installs it without `-e`: its wheel, built from a copy of this checkout (the build
leaves nothing in the checkout), installed with `pip install --target` into a folder that a child process
then has as its only PYTHONPATH. Needs pip and setuptools (the `test` extra); no network."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ("radt_ext", "listeners", "setup.cfg", "pyproject.toml", "README.md")  # what the wheel is built from


def _pip(*args: str, cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def build_wheel(root: Path) -> Path:
    """radt-ext's wheel in root/dist, built with `pip wheel --no-deps --no-build-isolation`."""
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        path = os.path.join(REPO, name)
        if os.path.isdir(path):
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy(path, src / name)
    _pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(root / "dist"), str(src), cwd=root)
    (wheel,) = (root / "dist").glob("radt_ext-*.whl")
    return wheel


def install_target(wheel: Path, target: Path) -> Path:
    """`pip install --no-deps --target target wheel`: the folder to put on PYTHONPATH."""
    _pip("install", "-q", "--no-deps", "--no-compile", "--target", str(target), str(wheel), cwd=wheel.parent)
    return target


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without radt-ext's, MLflow's and the PYTHONPATH that may name the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RADT_EXT_", "MLFLOW_")) and k != "PYTHONPATH"}
    env.update(extra)
    return env
