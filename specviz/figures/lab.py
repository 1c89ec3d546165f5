"""Lab figure: how far each KV cache drifts from what a correct engine holds, step by step.

Drift = cache length after the cutoff minus the length a correct engine has there
(engine.lab.cache_drift): 0 is a correct cache, above 0 stale positions of rejected
drafts are kept, below 0 a position the draft model never saw is missing. Where the
trace records its stale positions (specviz.trace/2) the hover names both, since a
draft cache can hold stale positions and miss others at once (stage A).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from engine.lab import cache_drift
from engine.trace import Trace
from specviz.figures.common import empty_figure, make_figure
from specviz.figures.timeline import divergence_line
from specviz.style import COLORS, FigureStyle

TITLE = "KV cache drift"
SUBTITLE = "cache length after the cutoff − what a correct engine holds (0 = correct; > 0 stale; < 0 missing)"


def drift_figure(trace: Trace | None, divergence: int | None = None,
                 style: FigureStyle = FigureStyle()) -> go.Figure:
    """Target and draft drift per step, a zero line for the correct engine, and the divergence line."""
    if trace is None or not trace.steps:
        return empty_figure(TITLE, "No steps recorded.", style)
    drift = cache_drift(trace)
    steps = [step.index for step in trace.steps]
    traces: list[dict[str, Any]] = [
        {"type": "scatter", "mode": "lines", "x": [steps[0] - 0.5, steps[-1] + 0.5], "y": [0, 0], "meta": "correct",
         "name": "correct cache (0)", "line": {"color": COLORS["accepted"], "width": 2, "dash": "dot"},
         "hoverinfo": "skip"},
        _line(steps, [target for target, _ in drift], [step.kv_target.stale for step in trace.steps], "target",
              "target cache"),
    ]
    if any(draft is not None for _, draft in drift):
        traces.append(_line(steps, [draft for _, draft in drift],
                            [step.kv_draft.stale if step.kv_draft else None for step in trace.steps], "draft",
                            "draft cache"))
    values = [v for pair in drift for v in pair if v is not None]
    low, high = min(values + [0]), max(values + [0])
    pad = max(1.0, (high - low) * 0.1)
    return make_figure(traces, TITLE, SUBTITLE, style, height=340 + 2 * style.font_size,
                       shapes=divergence_line(divergence),
                       xaxis={"title": {"text": "step"}, "zeroline": False},
                       yaxis={"title": {"text": "positions off"}, "range": [low - pad, high + pad], "zeroline": False})


def _line(steps: list[int], values: list[int | None], stale: list[int | None], model: str,
          name: str) -> dict[str, Any]:
    words = [_words(value, count) for value, count in zip(values, stale)]
    return {"type": "scatter", "mode": "lines+markers", "x": steps, "y": values, "meta": model, "name": name,
            "line": {"color": COLORS[model], "width": 2.5, "shape": "hv"}, "marker": {"size": 6},
            "customdata": words, "hovertemplate": f"step %{{x}}: {name} %{{customdata}}<extra></extra>"}


def _words(drift: int | None, stale: int | None) -> str:
    """What a drift value means: stale and missing positions, or (stale unknown, trace/1) their net."""
    if drift is None:
        return "–"
    if stale is None:
        stale, missing = max(drift, 0), max(-drift, 0)
    else:
        missing = stale - drift
    parts = [f"{stale} stale position{'s' * (stale != 1)} kept"] if stale else []
    if missing:
        parts.append(f"{missing} position{'s' * (missing != 1)} missing")
    return ", ".join(parts) or "correct"
