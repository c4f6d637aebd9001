"""One self-contained HTML document holding several figures and small tables.

The figures are plotly figures, drawn in the page by plot.js (about 20 KB, inlined) rather than by
plotly.js (4.8 MB): the report stays small and opens offline and inside MLflow's artifact viewer, which
shows HTML from a blob: URL in a sandboxed frame where no relative or remote script would load
(docs/comparison.md, "Reports"). Each figure's JSON sits in a `Plotly.newPlot(id, data, layout, config)`
call, so plotly.js would draw the same page.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

RENDERER = Path(__file__).with_name("plot.js")

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em 0;font-size:0.9em}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}.better{color:#080}.worse{color:#b00}.note{color:#666;font-size:0.85em}
.radt-figure{width:100%;margin:0 0 1.5em 0}.radt-legend{font-size:0.85em}.radt-legend span{margin-right:1em}
.radt-plot circle:hover{stroke:#000;stroke-width:2}
"""


def fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def table(header: list[str], rows: list[list], classes: list[list[str]] | None = None) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(str(h))}</th>" for h in header) + "</tr>"]
    for r, row in enumerate(rows):
        cells = []
        for c, cell in enumerate(row):
            cls = classes[r][c] if classes and classes[r][c] else ""
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<td{attr}>{html.escape(fmt(cell))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out) + "</table>"


def _compact(value):
    """Numbers cut to what a chart can show (5 significant digits), numpy arrays as lists."""
    if isinstance(value, float):
        return float(f"{value:.5g}") if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _compact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_compact(v) for v in value]
    if hasattr(value, "tolist"):
        return _compact(value.tolist())
    return value


def figure_html(fig, index: int) -> str:
    spec = fig.to_dict()
    layout = spec.get("layout", {})
    layout.pop("template", None)  # plotly's theme: ~10 KB a figure, and plot.js has its own
    data = json.dumps(_compact(spec.get("data", [])), separators=(",", ":")).replace("</", "<\\/")
    layout = json.dumps(_compact(layout), separators=(",", ":")).replace("</", "<\\/")
    div = f"radt-fig-{index}"
    return (f'<div id="{div}" class="radt-figure"></div>'
            f'<script>Plotly.newPlot("{div}", {data}, {layout}, {{"displaylogo": false}})</script>')


def document(title: str, parts: list) -> str:
    """parts: HTML strings and figures (plain dicts or plotly's; None entries are skipped), in order."""
    body, figures = [], 0
    for part in parts:
        if part is None:
            continue
        if isinstance(part, str):
            body.append(part)
            continue
        body.append(figure_html(part, figures))
        figures += 1
    script = f"<script>{RENDERER.read_text()}</script>" if figures else ""
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style>{script}</head><body><h1>{html.escape(title)}</h1>\n" + "\n".join(body) +
            "\n</body></html>")
