"""Everything the page shows for one Trace, rendered in one place (figures, HTML, scrubber range)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection

import gradio as gr

from engine.formats.trace import Trace
from specviz.figures.acceptance import held_while_live, histogram_figure, per_step_figure, position_figure
from specviz.figures.common import Figure
from specviz.figures.kv_cache import kv_cache_figure
from specviz.figures.timeline import timeline_figure
from specviz.figures.tree import is_tree_trace, tree_figure
from specviz.run.output_view import metrics_html, output_html
from specviz.run.step_detail import find_step, step_detail_html
from specviz.style import FigureStyle
from specviz.updates import ComponentFields


@dataclass(frozen=True)
class Scrubber:
    minimum: int
    maximum: int
    value: int
    interactive: bool

    def update(self) -> dict[str, Any]:
        """The gr.Slider update that shows this range and value."""
        return gr.update(minimum=self.minimum, maximum=self.maximum, value=self.value, interactive=self.interactive)


@dataclass(frozen=True)
class Views(ComponentFields):
    """One value per output component, in the order of `names()`."""

    trace: Trace | None
    timeline: Figure
    tree: Figure | None               # the selected step's draft tree; None (hidden) in a chain run
    kv_cache: Figure
    per_step: Figure
    positions: Figure
    histogram: Figure
    scrubber: Scrubber
    detail: str
    output: str
    metrics: str
    status: str

    def outputs(self, unchanged: Collection[str] = ()) -> tuple[Any, ...]:
        """The values in `names()` order; the scrubber as the slider update the page needs, the tree
        figure shown only for a tree run; the views named in `unchanged` left as the page has them."""
        special = {"scrubber": self.scrubber.update(), "tree": shown_tree(self.tree),
                   **{name: gr.update() for name in unchanged}}
        return tuple(special[name] if name in special else getattr(self, name) for name in self.names())


HELD_WHILE_LIVE = ("per_step", "positions", "histogram")    # live: held_while_live's stand-ins, drawn once


def render(trace: Trace | None, status: str, selected: int | None = None, live: bool = False,
           style: FigureStyle = FigureStyle()) -> Views:
    """All views of `trace`; `selected` is a step index (None: the last step); `live` follows the newest
    steps and holds the acceptance charts (HELD_WHILE_LIVE) until the run ends."""
    step = find_step(trace, selected) if trace is not None and trace.steps else None
    index = None if step is None else step.index
    per_step, positions, histogram = (held_while_live(style) if live else
                                      (per_step_figure(trace, style=style), position_figure(trace, style=style),
                                       histogram_figure(trace, style=style)))
    return Views(
        trace=trace,
        timeline=timeline_figure(trace, selected_step=index, follow_end=live, style=style),
        tree=tree_figure(trace, selected_step=index, style=style) if is_tree_trace(trace) else None,
        kv_cache=kv_cache_figure(trace, selected_step=index, follow_end=live, style=style),
        per_step=per_step,
        positions=positions,
        histogram=histogram,
        scrubber=scrubber_for(trace, index),
        detail=step_detail_html(trace, index),
        output=output_html(trace, index),
        metrics=metrics_html(trace),
        status=status,
    )


def shown_tree(figure: Figure | None) -> dict[str, Any]:
    """The tree plot's update: `figure` shown, or the plot hidden (a chain run has no tree)."""
    return gr.update(value=figure, visible=True) if figure is not None else gr.update(value=None, visible=False)


def scrubber_for(trace: Trace | None, index: int | None) -> Scrubber:
    """Slider range over the trace's step indices (a one-step trace still gets a valid range)."""
    if trace is None or not trace.steps or index is None:
        return Scrubber(0, 1, 0, interactive=False)
    first, last = trace.steps[0].index, trace.steps[-1].index
    return Scrubber(first, max(last, first + 1), index, interactive=last > first)
