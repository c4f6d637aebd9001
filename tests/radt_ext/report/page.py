"""Read a report page back as what it shows, whatever plotly version wrote it.

`figures(page)` decodes the figure JSON that plotly embeds in each `Plotly.newPlot(id, data, layout, ...)`
call, so a test checks the figures themselves and not how one plotly version escapes their text
(plotly 7 writes `°` as `\\u00b0`). `text(page)` is what a browser shows outside the figures.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser

from plotly.offline import get_plotlyjs

_NEW_PLOT = re.compile(r'Plotly\.newPlot\(\s*"[^"]+"\s*,\s*')
_SEPARATOR = re.compile(r"\s*,\s*")


def figures(page: str) -> list[dict]:
    """Every figure on the page as {"data": [traces], "layout": {...}}, in page order."""
    decoder, found = json.JSONDecoder(), []
    for call in _NEW_PLOT.finditer(page):
        data, end = decoder.raw_decode(page, call.end())
        layout, _ = decoder.raw_decode(page, _SEPARATOR.match(page, end).end())
        found.append({"data": data, "layout": layout})
    return found


def _title(node) -> str | None:
    return node.get("text") if isinstance(node, dict) else node


def titles(fig: dict) -> list[str]:
    """The figure's title, then its subplot titles (plotly keeps those as layout annotations)."""
    layout = fig["layout"]
    return [t for t in [_title(layout.get("title"))] + [a.get("text") for a in layout.get("annotations", [])] if t]


def trace_names(fig: dict) -> list[str]:
    return [t["name"] for t in fig["data"] if t.get("name")]


def trace_texts(fig: dict) -> list[str]:
    """The per-point text labels of every trace."""
    out = []
    for t in fig["data"]:
        text = t.get("text")
        out += text if isinstance(text, list) else [text] if isinstance(text, str) else []
    return out


def plotlyjs_copies(page: str) -> int:
    """How many copies of the plotly.js bundle that this plotly ships are embedded in the page."""
    return page.count(get_plotlyjs())


class _Visible(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in ("script", "style")

    def handle_endtag(self, tag):
        self._hidden -= tag in ("script", "style") and self._hidden > 0

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data)


def text(page: str) -> str:
    """The page's text outside scripts and styles, entities decoded, whitespace collapsed."""
    parser = _Visible()
    parser.feed(page)
    parser.close()
    return " ".join(" ".join(parser.parts).split())
