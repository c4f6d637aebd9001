"""Tables for people and for scripts: a rich table on a terminal, a plain table at full width in a
file or a pipe (a log keeps every column whole), CSV or JSON for scripts (`--output csv|json`).

    table = DataTable(Column("mode"), Column("samples/s", "{:.1f}", key="throughput_samples_per_s"),
                      title="sweep results")
    table.add_row("mps", Stat(estimate([410.0, 405.5, 409.1]), noise=True))
    show(table, console)              # rich on a terminal, plain text elsewhere
    print(table.csv())                # one column per field; a mean's interval in columns of its own

Cells are text, numbers, None (shown "-"), or a `Stat`: a mean with its 95 % interval over repeats and
whether its difference from the baseline lies within the noise ("≈").
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
import sys
from dataclasses import dataclass

OUTPUTS = ("table", "csv", "json")
NOISE_MARK = "≈"
MISSING = "-"


@dataclass
class Column:
    header: str
    fmt: str | None = None  # for numbers, e.g. "{:.2f}"; text as it is
    key: str | None = None  # the field's name in CSV/JSON (default: the header made a name)

    def __post_init__(self):
        words = self.header.lower().replace("#", " index ").replace("%", " pct ").replace("/", " per ")
        self.key = self.key or re.sub(r"[^0-9a-z]+", "_", words).strip("_") or "column"


@dataclass
class Stat:
    """A figure over a setting's repeats: `est` (repeats.Estimate: n, mean, half-width), and whether it
    lies within the noise of the baseline (None: not compared, or no repeats to tell)."""
    est: object
    noise: bool | None = None


def _number(value, fmt: str | None) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return (fmt or "{:g}").format(value)


def text_of(value, fmt: str | None = None) -> str:
    if value is None:
        return MISSING
    if isinstance(value, Stat):
        est = value.est
        if est is None:
            return MISSING
        text = _number(est.mean, fmt)
        if est.half is not None:
            text += f" ± {_number(est.half, fmt)}"
        return text + (f" {NOISE_MARK}" if value.noise else "")
    return _number(value, fmt)


class DataTable:
    def __init__(self, *columns, title: str = "", note: str = ""):
        self.columns = [c if isinstance(c, Column) else Column(str(c)) for c in columns]
        self.title, self.note = title, note
        self.rows: list[list] = []

    def add_row(self, *cells) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(list(cells))

    # -- for scripts ------------------------------------------------------------------
    def _stat_columns(self) -> set[int]:
        return {i for row in self.rows for i, cell in enumerate(row) if isinstance(cell, Stat)}

    def records(self) -> list[dict]:
        """One dict per row: raw values; a Stat column gives `key` (the mean), `key_n`,
        `key_ci95_low`, `key_ci95_high` and `key_within_noise`."""
        stats = self._stat_columns()
        out = []
        for row in self.rows:
            rec = {}
            for i, (col, cell) in enumerate(zip(self.columns, row)):
                if i in stats:
                    est = cell.est if isinstance(cell, Stat) else None
                    mean = est.mean if est is not None else cell if isinstance(cell, (int, float)) else None
                    rec[col.key] = mean
                    rec[f"{col.key}_n"] = est.n if est is not None else (1 if mean is not None else 0)
                    rec[f"{col.key}_ci95_low"] = est.low if est is not None else None
                    rec[f"{col.key}_ci95_high"] = est.high if est is not None else None
                    rec[f"{col.key}_within_noise"] = cell.noise if isinstance(cell, Stat) else None
                else:
                    rec[col.key] = cell
            out.append(rec)
        return out

    def csv(self) -> str:
        records = self.records()
        fields = list(records[0]) if records else [c.key for c in self.columns]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        for rec in records:
            writer.writerow({k: "" if v is None else v for k, v in rec.items()})
        return buf.getvalue()

    def json(self) -> str:
        clean = [{k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in rec.items()}
                 for rec in self.records()]
        return json.dumps(clean, indent=1, default=str) + "\n"

    # -- for people ---------------------------------------------------------------------
    def cells(self) -> list[list[str]]:
        return [[text_of(cell, col.fmt) for col, cell in zip(self.columns, row)] for row in self.rows]

    def text(self) -> str:
        """A plain table: every cell whole, columns aligned (numbers to the right)."""
        cells = self.cells()
        headers = [c.header for c in self.columns]
        widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
        right = [any(isinstance(row[i], (int, float, Stat)) and not isinstance(row[i], bool) for row in self.rows)
                 for i in range(len(headers))]

        def line(values):
            return "  ".join(v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)).rstrip()

        out = [self.title] if self.title else []
        out += [line(headers), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in cells]
        if self.note:
            out.append(self.note)
        return "\n".join(out) + "\n"

    def __str__(self) -> str:
        return self.text()

    def rich(self):
        from rich.table import Table

        table = Table(title=self.title or None, caption=self.note or None)
        for i, col in enumerate(self.columns):
            numeric = any(isinstance(row[i], (int, float, Stat)) and not isinstance(row[i], bool) for row in self.rows)
            table.add_column(col.header, justify="right" if numeric else "left", overflow="fold")
        for row in self.cells():
            table.add_row(*row)
        return table


def show(table: DataTable, console=None) -> None:
    """On a terminal a rich table; anywhere else (a file, a pipe, no rich) the plain table, full width."""
    file = getattr(console, "file", None) if console is not None else None
    terminal = getattr(console, "is_terminal", False)
    if terminal:
        console.print(table.rich())
        return
    file = file or sys.stderr
    file.write(table.text())
    file.flush()


def emit(table: DataTable, output: str, console=None) -> None:
    """`--output`: table (to the console, as `show`), csv or json (to stdout, for scripts)."""
    if output == "table":
        show(table, console)
    else:
        sys.stdout.write(table.csv() if output == "csv" else table.json())
        sys.stdout.flush()
