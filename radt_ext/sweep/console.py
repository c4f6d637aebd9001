"""rich's console, progress bar and tables, or plain lines where rich is not installed
(the GPU machines carry only what MLflow needs)."""
from __future__ import annotations

import contextlib
import sys

try:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    HAVE_RICH = True
except ImportError:  # pragma: no cover - exercised on machines without rich
    HAVE_RICH = False


class PlainConsole:
    def print(self, obj="", **_kw) -> None:
        print(obj if isinstance(obj, str) else str(obj), file=sys.stderr, flush=True)


class PlainTable:
    def __init__(self, *columns, title: str = ""):
        self.columns, self.title, self.rows = list(columns), title, []

    def add_row(self, *cells) -> None:
        self.rows.append([str(c) for c in cells])

    def __str__(self) -> str:
        lines = [self.title] if self.title else []
        lines.append(" | ".join(self.columns))
        lines += [" | ".join(r) for r in self.rows]
        return "\n".join(lines)


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


def console():
    return Console(stderr=True) if HAVE_RICH else PlainConsole()


def table(*columns, title: str = ""):
    return Table(*columns, title=title) if HAVE_RICH else PlainTable(*columns, title=title)


@contextlib.contextmanager
def progress(con):
    if HAVE_RICH and isinstance(con, Console):
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=con) as bar:
            yield bar
    else:
        yield PlainProgress(con)
