"""What every SpecViz figure shares: the figure itself as dicts, the common look, and the placeholder shown
before any trace exists.

A figure is built in one shot as dicts (`make_figure` returns a `Figure`) and sent without plotly.py's validation.
plotly.py's `go.Figure` checks every property of every trace as it is built, then copies it all again to
serialise it. The page redraws after each step on a 2-core machine that is also running the models, and that
was most of a redraw's time (scripts/figure_send.py measures it: benchmarks/data/figure-send-*.json). A `Figure`
keeps the dicts and writes the same JSON plotly.py writes: the layout's named template (SpecViz uses "none") is
replaced by that template's content, and properties set to None are left out, as plotly.py leaves them out.
gr.Plot sends a value that is no matplotlib, bokeh or altair figure as Plotly JSON through its `to_json()`, which
is what `Figure` provides.

What plotly.py's validation checked is still checked where it is worth its time: `Figure.plotly` builds (once)
the validated `go.Figure` of the same spec, and reading `data` or `layout` reads that figure, so a test that
reads a figure reads it the way plotly.py would, with its checks (a misspelt property raises there);
tests/test_figure_json.py checks that the JSON of every view's figures (each bundled file's, the Lab's, Compare's,
a live run's) is the JSON plotly.py writes for them. Builders make new figures (`Figure.with_layout`) rather than
change a figure's dicts in place: a validated copy already read would not see the change.
"""

from __future__ import annotations

import copy
import functools
import html
import json
import re
from typing import Any, Sequence

import plotly.graph_objects as go
import plotly.io as pio

from specviz.style import CHAR_EM, FigureStyle

FONT_FAMILY = "Inter, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"
LEGEND_ROOM = 64          # pixels under the x axis for a one- or two-row legend
MIN_PLOT_PX = 120         # the least a figure leaves its plot area under its title and over its legend
MIN_COLUMNS = 8           # a step axis always has room for this many steps
LINE_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
WORD = re.compile(r"(?:<[^<>]*>|[^\s<]|<(?![^<>]*>))+")     # a run of non-spaces; a tag stays whole
TAG = re.compile(r"<[^<>]*>")
PLOTLY_VIEWS = frozenset({"data", "layout", "to_dict", "to_plotly_json"})       # read from Figure.plotly


class Figure:
    """A Plotly figure as `traces` (one dict each) and `spec` (the layout dict)."""

    def __init__(self, traces: Sequence[dict[str, Any]], spec: dict[str, Any]):
        self.traces = list(traces)
        self.spec = spec

    def with_layout(self, **changes: Any) -> Figure:
        """A new figure with `changes` merged into the layout (nested dicts key by key); this one is left as it is
        (its validated copy, once read, would not see a change made in place)."""
        return Figure(self.traces, merge(self.spec, changes))

    def to_json(self) -> str:
        """The figure as Plotly JSON, as plotly.py writes it for the validated figure (what gr.Plot sends)."""
        return pio.to_json({"data": [without_none(trace) for trace in self.traces],
                            "layout": without_none(with_template(self.spec))}, validate=False)

    @functools.cached_property
    def plotly(self) -> go.Figure:
        """The validated plotly.py figure of this spec (built on first use, from copies: plotly.py changes the dicts
        it is given): for exports and for reading."""
        return go.Figure(data=copy.deepcopy(self.traces), layout=copy.deepcopy(self.spec))

    def __getattr__(self, name: str) -> Any:
        """`data`, `layout` and plotly.py's dict of the figure come from the validated figure (`plotly`)."""
        if name in PLOTLY_VIEWS:
            return getattr(self.plotly, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __eq__(self, other: object) -> bool:
        """Two figures are equal when the page would draw them the same: their JSON is the same."""
        if not isinstance(other, Figure):
            return NotImplemented
        return json.loads(self.to_json()) == json.loads(other.to_json())

    __hash__ = None                  # a figure's dicts can change, as a plotly.py figure's can

    def __repr__(self) -> str:
        title = self.spec["title"].get("text") or "" if isinstance(self.spec.get("title"), dict) else ""
        return f"Figure({len(self.traces)} traces, {title[:60]!r})"


@functools.cache
def template(name: str) -> dict[str, Any]:
    """A named plotly.py template's content, as plotly.py writes it into a figure's layout."""
    return pio.templates[name].to_plotly_json()


def with_template(layout: dict[str, Any]) -> dict[str, Any]:
    """`layout` with its template given by name replaced by its content, as plotly.py writes it (no template: plotly.py's
    default one; a template given as a dict stays)."""
    name = layout.get("template", pio.templates.default)
    return {**layout, "template": template(name)} if isinstance(name, str) else layout


def without_none(value: Any) -> Any:
    """`value` with every dict entry that is None left out, at every depth (plotly.py leaves unset properties out);
    a None inside a list of values stays (Plotly's gap in a line, or a cell without a value)."""
    if isinstance(value, dict):
        return {key: without_none(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)) and any(isinstance(item, (dict, list, tuple)) for item in value):
        return [without_none(item) for item in value]
    return value


def make_figure(traces: Sequence[dict[str, Any]], title: str, subtitle: str, style: FigureStyle, height: int,
                **layout: Any) -> Figure:
    """A figure with the common look (bold title with a one-line explanation, legend under the plot);
    `layout` entries are merged over it (dicts merged key by key). Titles, subtitles and legend entries
    wrap to the width `style` knows (FigureStyle.line_px), so a phone or a projector clips none of them."""
    title, subtitle = wrap(title, style.line_chars(style.title_size, bold=True)), \
        wrap(subtitle, style.line_chars(style.font_size))
    names = style.line_chars(style.font_size)
    traces = [{**trace, "name": wrap(trace["name"], names)} if isinstance(trace.get("name"), str) else trace
              for trace in traces]
    if isinstance(layout.get("annotations"), list):          # panel titles and labels above a plot
        layout = {**layout, "annotations": [_wrapped_note(note, style) for note in layout["annotations"]]}
    # The title's automargin grows the top margin to its wrapped lines; a figure whose height leaves its plot
    # less than MIN_PLOT_PX under them (a phone with large text: Explore's gap chart had -20 px, and Plotly's
    # "Something went wrong with axis scaling" stopped the page drawing the rest of the tab) grows instead.
    margin = {"t": 24, "b": 60 + LEGEND_ROOM, **layout.get("margin", {})}
    heading = (text_px(f"<b>{title}</b>", None, style.title_size, 1.25) + text_px(subtitle, None, style.font_size)
               + title_pad(title, style) + 16)
    names = [trace["name"] for trace in traces if isinstance(trace.get("name"), str) and trace.get("showlegend", True)
             and trace.get("type", "scatter") in ("scatter", "bar")]
    legend = 60 + legend_px(names, style) if names and layout.get("showlegend", True) else 0
    height = max(height, max(margin["t"], heading) + max(margin["b"], legend) + MIN_PLOT_PX)
    base = {
        "template": "none",
        "height": height,
        "font": {"family": FONT_FAMILY, "size": style.font_size, "color": "#222222"},
        "title": {"text": f"<b>{title}</b>",
                  "subtitle": {"text": subtitle, "font": {"size": style.font_size, "color": "#555555"}},
                  "font": {"size": style.title_size}, "x": 0.0, "xanchor": "left", "xref": "paper",
                  "y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": title_pad(title, style)},
                  "automargin": True},
        "margin": {"l": 60, "r": 16, "t": 24, "b": 60 + LEGEND_ROOM},
        "legend": {"orientation": "h", "x": 0.0, "xanchor": "left", "y": 0.0, "yref": "container",
                   "yanchor": "bottom", "font": {"size": style.font_size}},
        "hoverlabel": {"font": {"size": style.font_size, "family": FONT_FAMILY}},
        "paper_bgcolor": "#FFFFFF",
        "plot_bgcolor": "#FFFFFF",
        "xaxis": axis(style),
        "yaxis": axis(style),
    }
    return Figure(traces, merge(base, layout))


def text_px(text: str, chars: int | None, size: int, leading: float = 1.35) -> int:
    """The height of `text` wrapped to `chars` characters a line (as make_figure wraps it) at `size` px."""
    return int(len(LINE_BREAK.split(wrap(text, chars))) * leading * size) if text else 0


def legend_px(names: Sequence[str], style: FigureStyle) -> int:
    """The height of a horizontal legend of `names` under a chart as wide as `style` knows (desktop: 896 px), each
    entry wrapped as make_figure wraps it: as many rows as entries of the widest one fit side by side (a phone:
    one a row), each as tall as its tallest entry."""
    chars = style.line_chars(style.font_size)
    entries = [wrap(name, chars).split("<br>") for name in names]
    if not entries:
        return 0
    widest = max(len(line) for lines in entries for line in lines) * CHAR_EM * style.font_size + 46   # its symbol
    across = max(1, int(((style.line_px or 836) + 60) // widest))
    rows = [entries[start:start + across] for start in range(0, len(entries), across)]
    return int(sum(max(len(lines) for lines in row) for row in rows) * 1.4 * style.font_size) + 12


def title_pad(title: str, style: FigureStyle) -> int:
    """The room above a title. Plotly anchors a title of two or more lines (with a subtitle under it) by its
    bottom, so the lines run up past the top of the figure and are clipped (measured in chromium: about
    1.25 title sizes a line); the pad moves them back into the figure."""
    lines = len(LINE_BREAK.split(title))
    return 8 if lines == 1 else int(lines * 1.25 * style.title_size + 4)


def wrap(text: str, chars: int | None) -> str:
    """`text` (Plotly's HTML subset) with a <br> before any word that would take a line past `chars`
    visible characters; tags are kept whole and do not count, existing <br>s stay. None: unchanged."""
    if chars is None or not text:
        return text
    lines = []
    for line in LINE_BREAK.split(text):
        current, used = [], 0
        for word in WORD.findall(line):
            size = len(html.unescape(TAG.sub("", word)))
            if current and used + 1 + size > chars:
                lines.append(" ".join(current))
                current, used = [], 0
            current.append(word)
            used += size + (1 if used else 0)
        lines.append(" ".join(current))
    return "<br>".join(lines)


def _wrapped_note(note: Any, style: FigureStyle) -> Any:
    if not isinstance(note, dict) or not isinstance(note.get("text"), str):
        return note
    size = (note.get("font") or {}).get("size") or style.font_size
    text = wrap(note["text"], style.line_chars(size, bold="<b>" in note["text"]))
    if text == note["text"]:
        return note
    align = note.get("xanchor") if note.get("xanchor") in ("left", "right") else "center"
    return {"align": align, **note, "text": text}


def axis(style: FigureStyle, **settings: Any) -> dict[str, Any]:
    """Axis settings with the common grid and font sizes."""
    return merge({"gridcolor": "#E8E8E8", "linecolor": "#BBBBBB", "zerolinecolor": "#CCCCCC", "automargin": True,
                  "title": {"font": {"size": style.font_size}}, "tickfont": {"size": style.font_size}}, settings)


def merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`base` updated with `changes`, nested dicts merged rather than replaced."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def run_points(points: Sequence[tuple[float, Any, float]], color: str, widest: float) -> dict[str, Any]:
    """What a sweep figure's "one run" points share: each (x, run, value) drawn as a small hollow
    point in `color`, nudged sideways by the run's (prompt, seed) so that runs at one x stand apart
    (each step of the nudge at most `widest`). The caller adds meta, legend, hover and axes."""
    labels = sorted({(run.prompt_index, run.seed) for _, run, _ in points})
    nudge = {label: (i - (len(labels) - 1) / 2) * min(widest, 0.5 / len(labels)) for i, label in enumerate(labels)}
    return {"type": "scatter", "mode": "markers", "name": "one run (prompt, seed)",
            "x": [x + nudge[(run.prompt_index, run.seed)] for x, run, _ in points],
            "y": [value for *_, value in points],
            "marker": {"size": 6, "color": "rgba(0,0,0,0)", "line": {"color": color, "width": 1.5}}}


def empty_figure(title: str, message: str, style: FigureStyle = FigureStyle(), height: int = 220) -> Figure:
    """A figure with no data and a centred note, e.g. before the first run; `height` in pixels (keep the
    figure's own, where it stands in for one about to be drawn)."""
    return make_figure([], title, "", style, height=height, margin={"b": 20},
                       xaxis={"visible": False}, yaxis={"visible": False},
                       annotations=[{"text": message, "showarrow": False, "x": 0.5, "y": 0.5, "xref": "paper",
                                     "yref": "paper", "font": {"size": style.font_size + 2, "color": "#777777"}}])


def highlight(step: int | None, yref: str = "paper", outline: bool = True) -> list[dict[str, Any]]:
    """A light band (outlined or not) behind the selected step, as a layout shape; none for None."""
    if step is None:
        return []
    return [{"type": "rect", "xref": "x", "yref": yref, "x0": step - 0.5, "x1": step + 0.5, "y0": 0, "y1": 1,
             "fillcolor": "rgba(0,0,0,0.07)", "line": {"color": "#222222", "width": 2 if outline else 0},
             "layer": "below"}]


def step_window(indices: Sequence[int], visible: int, selected: int | None = None,
                follow_end: bool = False) -> tuple[int, int] | None:
    """First and last step index to show: all when they fit, else `visible` steps around the
    selected one (or the newest ones while streaming, or the first ones)."""
    if len(indices) <= visible:
        return None
    if follow_end:
        start = len(indices) - visible
    elif selected is not None and selected in indices:
        start = min(max(indices.index(selected) - visible // 2, 0), len(indices) - visible)
    else:
        start = 0
    return indices[start], indices[start + visible - 1]


def x_range(indices: Sequence[int], window: tuple[int, int] | None) -> list[float]:
    """The x range for a step axis: the window, or room for at least MIN_COLUMNS steps, so the
    first steps of a live run are drawn at their final width instead of filling the plot."""
    if window is not None:
        return [window[0] - 0.5, window[1] + 0.5]
    return [indices[0] - 0.5, indices[0] + max(len(indices), MIN_COLUMNS) - 0.5]
