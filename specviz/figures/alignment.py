"""Runs lined up by output token position: one row per run, one cell per emitted token.

Runs with different k split their output into different steps, so step n of one run and
step n of another cover different text. Lined up by position instead, column i holds each
run's i-th output token, coloured by where it came from (accepted draft, recovered, bonus);
a tick marks where each step begins and a red line where the outputs first differ.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any, Sequence

from engine.records import EmittedToken
from engine.formats.trace import Trace
from specviz.figures.common import Figure, empty_figure, make_figure
from specviz.style import COLORS, LABELS, TEXT_ON, FigureStyle
from specviz.tokens import short, visible

TITLE = "Output by token position"
SUBTITLE = "column i holds each run's i-th output token; a black tick marks where a step begins"
KINDS = ("accepted", "recovered", "bonus")
CELL_HEIGHT = 0.8


@dataclass(frozen=True)
class PlacedToken:
    """One output token of a run at its position (1-based), with the step that emitted it."""

    position: int
    step: int
    token: EmittedToken
    starts_step: bool


def placed_tokens(trace: Trace) -> list[PlacedToken]:
    """Every emitted token of `trace` in output order, numbered from 1 whatever the step split."""
    placed: list[PlacedToken] = []
    for step in trace.steps:
        for offset, token in enumerate(step.emitted):
            placed.append(PlacedToken(len(placed) + 1, step.index, token, offset == 0))
    return placed


def first_difference(runs: Sequence[Trace]) -> int | None:
    """The first output position (1-based) where two runs differ, or None when one is a prefix of the other."""
    if len(runs) != 2:
        return None
    ids = [[placed.token.id for placed in placed_tokens(run)] for run in runs]
    return next((i + 1 for i, (a, b) in enumerate(zip(*ids)) if a != b), None)


def alignment_figure(runs: dict[str, Trace], style: FigureStyle = FigureStyle()) -> Figure:
    """Runs by name (the first on top), each output token at its position on one shared x axis."""
    if not any(run.steps for run in runs.values()):
        return empty_figure(TITLE, "Press Run A and B.", style)
    names = list(runs)
    rows = {name: len(names) - 1 - index for index, name in enumerate(names)}
    placed = {name: placed_tokens(run) for name, run in runs.items()}
    bars = [_bar(kind, [(rows[name], item) for name in names for item in placed[name] if item.token.kind == kind],
                 name_of={rows[name]: name for name in names}, style=style) for kind in KINDS]
    ticks = [{"type": "line", "name": "step start", "xref": "x", "yref": "y", "x0": item.position - 0.5,
              "x1": item.position - 0.5, "y0": rows[name] - 0.5, "y1": rows[name] + 0.5,
              "line": {"color": "#222222", "width": 2}, "layer": "above"}
             for name in names for item in placed[name] if item.starts_step]
    differ = first_difference(list(runs.values()))
    if differ is not None:
        ticks.append({"type": "line", "name": "first difference", "xref": "x", "yref": "paper", "x0": differ - 0.5,
                      "x1": differ - 0.5, "y0": 0, "y1": 1, "line": {"color": COLORS["rejected"], "width": 3},
                      "layer": "above"})
    longest = max(len(tokens) for tokens in placed.values())
    start = 1 if differ is None else max(1, min(differ - style.timeline_steps // 2, longest - style.timeline_steps + 1))
    return make_figure(
        bars, TITLE, SUBTITLE, style, height=170 + len(names) * 46, barmode="overlay", bargap=0.05, dragmode="pan",
        shapes=ticks,
        yaxis={"tickvals": list(rows.values()), "ticktext": list(rows), "range": [-0.55, len(names) - 0.45],
               "fixedrange": True, "showgrid": False, "zeroline": False},
        xaxis={"title": {"text": "output token position (drag sideways to scroll)"},
               "range": [start - 0.5, start + style.timeline_steps - 0.5], "tickmode": "linear",
               "dtick": 1 if longest <= style.timeline_steps else 5, "showgrid": False, "zeroline": False})


def _bar(kind: str, cells: list[tuple[int, PlacedToken]], name_of: dict[int, str], style: FigureStyle) -> dict[str, Any]:
    """One origin's cells as a bar trace (an invisible cell when there are none, so the legend lists it)."""
    x = [item.position for _, item in cells] or [None]
    base = [row - CELL_HEIGHT / 2 for row, _ in cells] or [None]
    text = [html.escape(short(item.token.text, style.cell_chars), quote=False) for _, item in cells] or [""]
    hover = [f"<b>{name_of[row]}, token {item.position}: {html.escape(visible(item.token.text), quote=False)}</b>"
             f"<br>{LABELS[kind]}, step {item.step}" for row, item in cells] or [""]
    return {
        "type": "bar", "name": LABELS[kind], "meta": kind, "x": x, "y": [CELL_HEIGHT] * len(x), "base": base,
        "text": text, "hovertext": hover, "hovertemplate": "%{hovertext}<extra></extra>", "width": 0.92,
        "marker": {"color": COLORS[kind], "line": {"width": 0}}, "textposition": "inside",
        "insidetextanchor": "middle", "textangle": 0, "constraintext": "none", "cliponaxis": True,
        "textfont": {"color": TEXT_ON[kind], "size": style.cell_font_size, "family": "monospace"},
    }
