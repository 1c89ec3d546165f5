"""Lab figure: each KV cache's stale and missing positions, step by step, drawn apart.

Stale positions (above 0) are kept in a cache but hold no committed text: rejected
drafts a lab stage did not cut (engine.lab.cache_positions reads them from the KV
records). Missing positions (below 0) are committed tokens a cache never fed: the
draft's d_k after a fully accepted step when the carryover is off (stage A). 0 is a
correct cache, a fresh prefill of the committed text. A specviz.trace/1 record knows
only the net of the two, and says so in the hover.
"""

from __future__ import annotations

from typing import Any

from engine.lab import CachePositions, cache_positions
from engine.formats.trace import Trace
from specviz.figures.common import Figure, empty_figure, highlight, make_figure
from specviz.figures.timeline import divergence_line
from specviz.style import COLORS, FigureStyle

TITLE = "Stale and missing KV cache positions"
SUBTITLE = "above 0: stale (kept, no committed text) · below 0: missing (never fed) · 0: a correct cache"


def drift_figure(trace: Trace | None, divergence: int | None = None, style: FigureStyle = FigureStyle(),
                 selected: int | None = None, last_step: int | None = None) -> Figure:
    """Stale (up) and missing (down) positions of the target and draft caches per step, the
    correct-cache line at 0, the divergence line and the selected step; the x axis runs to
    `last_step` when given, so every stage of a lab set is drawn on the same steps."""
    if trace is None or not trace.steps:
        return empty_figure(TITLE, "No steps recorded.", style)
    counts = cache_positions(trace)
    steps = [step.index for step in trace.steps]
    end = max(steps[-1], last_step if last_step is not None else steps[-1])
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "x": [steps[0] - 0.5, end + 0.5], "y": [0, 0], "meta": "correct",
         "name": "correct cache (0)", "line": {"color": COLORS["committed"], "width": 1.5, "dash": "dot"},
         "hoverinfo": "skip"}]
    for model, name in (("target", "target cache"), ("draft", "draft cache")):
        column = [pair[0] if model == "target" else pair[1] for pair in counts]
        if all(count is None for count in column):
            continue
        traces.append(_line(steps, column, model, f"{name}: stale", "stale"))
        if any(count is not None and count.missing for count in column):
            traces.append(_line(steps, column, model, f"{name}: missing", "missing"))
    values = [v for trace_ in traces for v in trace_["y"] if v is not None]
    low, high = min(values + [0]), max(values + [0])
    pad = max(1.0, (high - low) * 0.1)
    return make_figure(traces, TITLE, SUBTITLE, style, height=340 + 2 * style.font_size,
                       shapes=highlight(selected, outline=False) + divergence_line(divergence),
                       xaxis={"title": {"text": "step"}, "zeroline": False, "range": [steps[0] - 0.5, end + 0.5]},
                       yaxis={"title": {"text": "positions"}, "range": [low - pad, high + pad], "zeroline": False})


def _line(steps: list[int], column: list[CachePositions | None], model: str, name: str,
          kind: str) -> dict[str, Any]:
    """Stale counts as they are, missing ones negated (drawn below 0, dashed)."""
    values = [None if count is None else count.stale if kind == "stale" else -count.missing for count in column]
    return {"type": "scatter", "mode": "lines+markers", "x": steps, "y": values, "meta": f"{model}.{kind}",
            "name": name, "customdata": [words(count) for count in column],
            "line": {"color": COLORS[model], "width": 2.5, "shape": "hv", "dash": "solid" if kind == "stale" else "dash"},
            "marker": {"size": 6, "symbol": "circle" if kind == "stale" else "triangle-down"},
            "hovertemplate": f"step %{{x}}, {model} cache: %{{customdata}}<extra></extra>"}


def words(count: CachePositions | None) -> str:
    """'12 stale positions kept, 2 missing', 'correct', or the net of a specviz.trace/1 record."""
    if count is None:
        return "–"
    parts = [f"{count.stale} stale position{'s' * (count.stale != 1)} kept"] if count.stale else []
    if count.missing:
        parts.append(f"{count.missing} position{'s' * (count.missing != 1)} missing")
    text = ", ".join(parts) or "correct"
    return text if count.known else f"{text} (net only: this trace/1 file does not record stale positions)"
