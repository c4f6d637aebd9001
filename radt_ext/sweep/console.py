"""rich's console and progress bar, or plain lines where rich is not installed (the GPU machines carry
only what MLflow needs); tables as `report.tables.DataTable`: rich on a terminal, a plain table at full
width in a file or a pipe, CSV or JSON with `--output`."""
from __future__ import annotations

import contextlib
import importlib.util
import sys

from radt_ext.report.tables import NOISE_MARK, Column, DataTable, Stat, emit  # noqa: F401  (the sweep's tables)

HAVE_RICH = importlib.util.find_spec("rich") is not None  # imported at the console's first use (LazyConsole)


class PlainConsole:
    def print(self, obj="", **_kw) -> None:
        print(obj if isinstance(obj, str) else str(obj), file=sys.stderr, flush=True)


class PlainProgress:
    def __init__(self, console):
        self.console = console

    def add_task(self, _description, total=0):
        return 0

    def update(self, _task, description="", **_kw):
        if description:
            self.console.print(f"... {description}")

    def advance(self, _task):
        pass


class LazyConsole:
    """rich's Console on stderr, made at its first use: rich's import (10-20 ms) then comes after a sweep's
    first job started, not before it."""

    def __init__(self):
        self._real = None

    def real(self):
        if self._real is None:
            from rich.console import Console

            self._real = Console(stderr=True)
        return self._real

    def __getattr__(self, name):
        return getattr(self.real(), name)


def console():
    return LazyConsole() if HAVE_RICH else PlainConsole()


def table(*columns, title: str = "", note: str = "") -> DataTable:
    return DataTable(*columns, title=title, note=note)


def show(tbl: DataTable, con, output: str = "table") -> None:
    """The table for people on the console (rich on a terminal, plain elsewhere), or CSV/JSON on stdout."""
    emit(tbl, output, con)


@contextlib.contextmanager
def progress(con):
    con = con.real() if isinstance(con, LazyConsole) else con
    if HAVE_RICH:
        from rich.console import Console
    if HAVE_RICH and isinstance(con, Console):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=con) as bar:
            yield bar
    else:
        yield PlainProgress(con)
