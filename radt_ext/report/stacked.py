"""Figures as plain figure dicts: one plot (`Figure`), plots side by side (`Columns`: plotly's
make_subplots(rows=1, cols=n)), panels stacked on one shared time axis (`Stacked`: make_subplots(rows=n,
cols=1, shared_xaxes=True), or with `shared=False` rows of their own axes and `heights`). None of plotly's
figure objects: importing, building and validating those took most of a report's time at a run's or a
sweep's end, after the workload. `to_dict()` is drawn by plot.js and by plotly.js alike; `figure()` and
`show()` give it to plotly where it is wanted (a notebook)."""
from __future__ import annotations


def _axis(kind: str, row: int) -> str:
    """The layout key of a row's axis (`xaxis`, `yaxis2`, ...)."""
    return f"{kind}axis" + (str(row) if row > 1 else "")


def _ref(kind: str, row: int) -> str:
    """A trace's reference to a row's axis (`x`, `y2`, ...)."""
    return kind + (str(row) if row > 1 else "")


class Figure:
    """One plot as a plain figure dict: its traces (`{"type": ..., ...}`, scatter where none is said) and layout."""

    def __init__(self, layout: dict | None = None):
        self.data: list[dict] = []
        self.layout: dict = dict(layout or {})

    def add_trace(self, trace: dict) -> None:
        self.data.append({"type": "scatter", **trace})

    def axis_titles(self, x: str, y: str) -> None:
        self.layout.setdefault("xaxis", {})["title"] = {"text": x}
        self.layout.setdefault("yaxis", {})["title"] = {"text": y}

    def update_layout(self, **values) -> None:
        if isinstance(values.get("title"), str):
            values["title"] = {"text": values["title"]}
        self.layout.update(values)

    def to_dict(self) -> dict:
        return {"data": self.data, "layout": self.layout}

    def figure(self):
        """The same figure as a plotly Figure (plotly imported here): for `show()` in a notebook, `write_html`."""
        import plotly.graph_objects as go

        return go.Figure(self.to_dict())

    def show(self, *args, **kwargs):
        return self.figure().show(*args, **kwargs)


def _title(text: str, x: float, y: float) -> dict:
    """A panel's title as make_subplots places it: centred over the panel, on its top edge."""
    return {"font": {"size": 16}, "showarrow": False, "text": text, "x": x, "xanchor": "center", "xref": "paper",
            "y": y, "yanchor": "bottom", "yref": "paper"}


class _Panels(Figure):
    """Panels of their own axes (`xaxis<k>`, `yaxis<k>`), each with a title; a trace goes to panel k."""

    def __init__(self):
        super().__init__({"annotations": []})

    def add_trace(self, trace: dict, k: int = 1) -> None:
        super().add_trace({**trace, "xaxis": _ref("x", k), "yaxis": _ref("y", k)})

    def axis_title(self, kind: str, k: int, text: str) -> None:
        self.layout[_axis(kind, k)]["title"] = {"text": text}


class Columns(_Panels):
    """Plots side by side, each with its own axes and title: plotly's make_subplots(rows=1, cols=n)."""

    def __init__(self, titles: list[str], spacing: float | None = None):
        super().__init__()
        n = len(titles)
        spacing = 0.2 / n if spacing is None else spacing
        width = (1.0 - spacing * (n - 1)) / n
        for col, title in enumerate(titles, start=1):
            left = (col - 1) * (width + spacing)
            self.layout[_axis("x", col)] = {"anchor": _ref("y", col), "domain": [left, min(1.0, left + width)]}
            self.layout[_axis("y", col)] = {"anchor": _ref("x", col), "domain": [0.0, 1.0]}
            self.layout["annotations"].append(_title(title, left + width / 2, 1.0))


class Stacked(_Panels):
    def __init__(self, titles: list[str], spacing: float = 0.03, heights: list[float] | None = None,
                 shared: bool = True):
        super().__init__()
        n = len(titles)
        heights = heights or [1.0] * n
        room = 1.0 - spacing * (n - 1)
        top = 1.0
        for row, title in enumerate(titles, start=1):
            height = room * heights[row - 1] / sum(heights)
            x = {"anchor": _ref("y", row), "domain": [0.0, 1.0]}
            if shared and row < n:  # every panel's time axis follows the bottom one, whose labels alone are shown
                x.update(matches=_ref("x", n), showticklabels=False)
            self.layout[_axis("x", row)] = x
            self.layout[_axis("y", row)] = {"anchor": _ref("x", row), "domain": [max(0.0, top - height), top]}
            self.layout["annotations"].append(_title(title, 0.5, top))
            top -= height + spacing

    def add_shapes(self, shapes: list[dict]) -> None:
        if shapes:
            self.layout.setdefault("shapes", []).extend(shapes)
