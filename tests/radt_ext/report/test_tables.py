"""Tables for people and scripts: rich on a terminal (cells folded, never cut), a plain table at full
width elsewhere, CSV and JSON with a mean's interval in fields of its own."""
from __future__ import annotations

import csv
import io
import json

from rich.console import Console

from radt_ext.figures.repeats import estimate
from radt_ext.report.tables import Column, DataTable, Stat, show

LONG = "exclusive-and-then-some"


def table() -> DataTable:
    t = DataTable("#", "mode", Column("samples/s", "{:.1f}", key="throughput_samples_per_s"), "start-up %",
                  title="results")
    t.add_row(0, LONG, Stat(estimate([100.0, 102.0, 98.0])), 12.5)
    t.add_row(1, "mps", Stat(estimate([101.0, 99.0, 103.0]), noise=True), None)
    return t


def test_a_file_or_a_pipe_gets_a_plain_table_with_every_cell_whole():
    out = io.StringIO()
    show(table(), Console(file=out, width=40))  # not a terminal, 40 columns: nothing is cut for that
    lines = out.getvalue().splitlines()
    assert lines[0] == "results" and lines[1].split() == ["#", "mode", "samples/s", "start-up", "%"]
    assert LONG in lines[3] and "100.0 ± 5.0" in lines[3] and "101.0 ± 5.0 ≈" in lines[4] and lines[4].endswith("-")
    assert max(len(ln) for ln in lines) > 40 and "…" not in out.getvalue()


def test_a_terminal_gets_rich_with_cells_folded_not_cut():
    out = io.StringIO()
    show(table(), Console(file=out, width=40, force_terminal=True, color_system=None))
    text = out.getvalue()
    assert "┃" in text or "│" in text  # drawn by rich
    assert "…" not in text and "exclusive" in text


def test_csv_and_json_give_the_figures_to_scripts():
    t = table()
    rows = list(csv.DictReader(io.StringIO(t.csv())))
    assert list(rows[0]) == ["index", "mode", "throughput_samples_per_s", "throughput_samples_per_s_n",
                             "throughput_samples_per_s_ci95_low", "throughput_samples_per_s_ci95_high",
                             "throughput_samples_per_s_within_noise", "start_up_pct"]
    records = json.loads(t.json())
    est = estimate([100.0, 102.0, 98.0])
    assert records[0]["throughput_samples_per_s"] == est.mean and records[0]["throughput_samples_per_s_n"] == 3
    assert records[0]["throughput_samples_per_s_ci95_low"] == est.low
    assert records[1]["throughput_samples_per_s_within_noise"] is True and records[1]["start_up_pct"] is None
    assert rows[1]["start_up_pct"] == "" and rows[0]["mode"] == LONG
