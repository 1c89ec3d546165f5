"""KV cache timeline: each model's cache length before a step, after its forward, after the cutoff.

Per step a grey segment rises from *before* to *after forward* (pending tokens and
drafts written), then a vermillion segment drops by the positions cut (rejected
drafts removed for real). In the lab modes that keep rejected positions nothing is
cut; a reddish purple bar under each *after cutoff* point spans the cache's stale
positions (no committed text, cumulative). The dotted line is the committed length
(prompt + output) for reference. The bottom panel repeats the cut sizes as bars.
A specviz.trace/1 file does not know its stale positions: the subtitle says so.
In a token-tree run the rise is the pending rows plus every drafted node, and the drop is the
gather: only the accepted path's rows stay (moved into place); the hover counts each.
On a static cache (docs/architecture.md §7) the drop is the write pointer moving back: a dashed
segment above each *after cutoff* point spans the rows still in memory past the pointer (masked).
"""

from __future__ import annotations

from typing import Any, Sequence

from engine.records import CacheLengths, StepRecord
from engine.formats.trace import Trace
from specviz.figures.common import Figure, axis, empty_figure, highlight, make_figure, step_window, x_range
from specviz.figures.tree_text import gather_sentence
from specviz.run.step_detail import cache_sentence
from specviz.style import COLORS, FigureStyle

TITLE = "KV cache length"
SUBTITLE = "before each step → after the forward pass → after cutting the rejected positions"
TREE_SUBTITLE = "before → after the forward (pending rows + every tree node) → after the gather (accepted path kept)"
UNKNOWN_STALE = "stale positions unknown (a specviz.trace/1 file)"
STATIC_SUBTITLE = "static cache: a cut moves the write pointer back; the cut rows stay in memory, masked (dotted)"
OFFSET = 0.28           # x offset of the before / after-cutoff points from the step centre
GAP = 0.09              # vertical gap between panels (fraction of the plot height)

# "overlay": the hatch is drawn over the bar's colour (plotly's default "replace" draws the hatch alone, in fgcolor)
CUT_PATTERNS = {"target": {},
                "draft": {"pattern": {"shape": "/", "fillmode": "overlay", "fgcolor": "#FFFFFF", "solidity": 0.3}}}
STAGES = {               # stage -> (legend label, marker symbol, colour, x offset)
    "before": ("before step", "circle-open", "#555555", -OFFSET),
    "after_forward": ("after forward", "triangle-up", COLORS["target"], 0.0),
    "after_cutoff": ("after cutoff", "circle", COLORS["accepted"], OFFSET),
}


def kv_cache_figure(trace: Trace | None, selected_step: int | None = None, follow_end: bool = False,
                    style: FigureStyle = FigureStyle()) -> Figure:
    """Cache lengths of the target (and draft, when it has a cache) for every step of `trace`;
    `style.cache_steps` steps are shown around `selected_step` (the newest with `follow_end`)."""
    if trace is None or not trace.steps:
        return empty_figure(TITLE, "No steps yet.", style)
    models = [("target", [step.kv_target for step in trace.steps])]
    if all(step.kv_draft is not None for step in trace.steps):
        models.append(("draft", [step.kv_draft for step in trace.steps]))
    steps = [step.index for step in trace.steps]
    committed = [step.context_len + step.num_emitted for step in trace.steps]
    window = step_window(steps, style.cache_steps, selected_step, follow_end)
    domains = _domains([1.0] * len(models) + [0.6])
    traces: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"annotations": [], "shapes": []}
    for row, (name, caches) in enumerate(models, start=1):
        traces += _cache_traces(row, name, steps, caches, committed, trace.config.cutoff_mode, show_legend=row == 1,
                                records=trace.steps)
        layout[_axis_name("yaxis", row)] = axis(style, domain=domains[row - 1],
                                                range=_y_range(steps, caches, committed, window))
        layout["annotations"].append(_panel_title(f"{name} model cache (tokens)", row, domains[row - 1], style))
    cut_row = len(models) + 1
    for name, caches in models:
        traces.append({"type": "bar", "x": steps, "y": [c.cutoff for c in caches], "name": f"{name} positions cut",
                       "meta": f"{name}.cutoff", "marker": {"color": COLORS[name], **CUT_PATTERNS[name]},
                       "showlegend": False,
                       "text": [str(c.cutoff) if c.cutoff else "" for c in caches], "textposition": "outside",
                       "cliponaxis": False, "xaxis": _axis_ref("x", cut_row), "yaxis": _axis_ref("y", cut_row),
                       "hovertemplate": f"step %{{x}}: {name} cache cut %{{y}} positions<extra></extra>"})
    cut_title = ("positions cut per step (blue: target, orange hatched: draft)" if len(models) == 2
                 else "positions cut per step")
    layout["annotations"].append(_panel_title(cut_title, cut_row, domains[-1], style))
    most_cut = max((c.cutoff for _, caches in models for c in caches), default=0)
    layout[_axis_name("yaxis", cut_row)] = axis(style, domain=domains[-1], range=[0, max(1, most_cut) * 1.35])
    ticks = {"range": x_range(steps, window), "showgrid": False, "tickmode": "linear",
             "dtick": 1 if window or len(steps) <= 20 else 5}
    for row in range(1, cut_row + 1):
        bottom = row == cut_row
        layout[_axis_name("xaxis", row)] = axis(
            style, anchor=_axis_ref("y", row), matches=None if row == 1 else "x", showticklabels=bottom,
            title={"text": ("step (drag sideways to scroll)" if window else "step") if bottom else ""}, **ticks)
        layout["shapes"] += highlight(selected_step, yref=f"{_axis_ref('y', row)} domain", outline=False)
    known = all(c.stale is not None for _, caches in models for c in caches)
    base = TREE_SUBTITLE if any(step.tree is not None for step in trace.steps) else SUBTITLE
    subtitle = base if known else f"{base}; {UNKNOWN_STALE}"
    if trace.config.cache == "static":
        subtitle = f"{subtitle}; {STATIC_SUBTITLE}"
    return make_figure(traces, TITLE, subtitle, style, height=230 + 230 * len(models) + 140, barmode="group",
                       bargap=0.3, dragmode="pan", margin={"t": 100 + 2 * style.font_size}, **layout)


def _cache_traces(row: int, model: str, steps: list[int], caches: list[CacheLengths], committed: list[int],
                  cutoff_mode: str, show_legend: bool, records: Sequence[StepRecord] = ()) -> list[dict[str, Any]]:
    """The lines and markers of one model's panel; `records` (the steps) word a tree step's hover as its gather."""
    rise_x: list[float | None] = []
    rise_y: list[int | None] = []
    cut_x: list[float | None] = []
    cut_y: list[int | None] = []
    stale_x: list[float | None] = []
    stale_y: list[int | None] = []
    stale_words: list[str | None] = []
    masked_x: list[float | None] = []
    masked_y: list[int | None] = []
    masked_words: list[str | None] = []
    words = []
    for position, (step, cache) in enumerate(zip(steps, caches)):
        rise_x += [step - OFFSET, step, None]
        rise_y += [cache.before, cache.after_forward, None]
        (cut_x if cache.cutoff else rise_x).extend([step, step + OFFSET, None])
        (cut_y if cache.cutoff else rise_y).extend([cache.after_forward, cache.after_cutoff, None])
        record = records[position] if records else None
        words.append(f"step {step}: " + (gather_sentence(model, cache, record) if record and record.tree else
                                         cache_sentence(model, cache, caches[position - 1] if position else None,
                                                        cutoff_mode)))
        if cache.stale:
            stale_x += [step + OFFSET, step + OFFSET, None]
            stale_y += [cache.num_text, cache.after_cutoff, None]
            stale_words += [words[-1], words[-1], None]
        if cache.masked:
            masked_x += [step + OFFSET, step + OFFSET, None]
            masked_y += [cache.after_cutoff, cache.after_cutoff + cache.masked, None]
            masked_words += [words[-1], words[-1], None]
    axes = {"xaxis": _axis_ref("x", row), "yaxis": _axis_ref("y", row)}
    tree, static = any(r.tree for r in records), any(cache.capacity is not None for cache in caches)
    cut_name = {(True, False): "gather (rows off the accepted path removed)",
                (False, False): "cutoff (rejected positions removed)",
                (True, True): "gather (pointer moved back past the rows off the path)",
                (False, True): "cutoff (the write pointer moves back)"}[tree, static]
    traces = [
        {"type": "scatter", "x": rise_x, "y": rise_y, "mode": "lines", "line": {"color": "#9A9A9A", "width": 2},
         "name": "forward writes", "legendgroup": "rise", "showlegend": show_legend, "hoverinfo": "skip", **axes},
        {"type": "scatter", "x": cut_x, "y": cut_y, "mode": "lines", "line": {"color": COLORS["cut"], "width": 4},
         "name": cut_name, "legendgroup": "cut", "showlegend": show_legend,
         "hoverinfo": "skip", **axes},
    ]
    if stale_x:
        traces.append({"type": "scatter", "x": stale_x, "y": stale_y, "mode": "lines", "meta": f"{model}.stale",
                       "line": {"color": COLORS["stale"], "width": 7}, "name": "stale positions (no committed text)",
                       "legendgroup": "stale", "showlegend": show_legend, "hovertext": stale_words,
                       "hovertemplate": "%{hovertext}<extra></extra>", **axes})
    if masked_x:
        traces.append({"type": "scatter", "x": masked_x, "y": masked_y, "mode": "lines", "meta": f"{model}.masked",
                       "line": {"color": COLORS["cut"], "width": 3, "dash": "dot"},
                       "name": "rows past the pointer (in memory, masked)", "legendgroup": "masked",
                       "showlegend": show_legend, "hovertext": masked_words,
                       "hovertemplate": "%{hovertext}<extra></extra>", **axes})
    for stage, (label, symbol, color, offset) in STAGES.items():
        traces.append({
            "type": "scatter", "x": [s + offset for s in steps], "y": [getattr(c, stage) for c in caches],
            "mode": "markers", "name": label, "meta": f"{model}.{stage}", "legendgroup": stage,
            "showlegend": show_legend, "hovertext": words,
            "hovertemplate": f"%{{hovertext}}<br>{label}: %{{y}}<extra></extra>",
            "marker": {"symbol": symbol, "color": color, "size": 9, "line": {"width": 2, "color": color}}, **axes})
    traces.append({"type": "scatter", "x": [s + OFFSET for s in steps], "y": committed, "mode": "lines",
                   "name": "committed tokens", "meta": f"{model}.committed", "legendgroup": "committed",
                   "showlegend": show_legend, "line": {"color": COLORS["committed"], "dash": "dot", "width": 1.5,
                                                       "shape": "hv"},
                   "hovertemplate": "after step %{x:.0f}: %{y} tokens committed<extra></extra>", **axes})
    return traces


def _y_range(steps: list[int], caches: list[CacheLengths], committed: list[int],
             window: tuple[int, int] | None) -> list[float]:
    """Fit the y axis to the visible steps, so a cut of one position stays visible."""
    shown = [(c, n) for s, c, n in zip(steps, caches, committed) if window is None or window[0] <= s <= window[1]]
    # The empty cache before the prefill would squash every later step: let that one point fall off the bottom.
    low = min(min(c.before if c.before else c.after_cutoff, c.after_cutoff - (c.stale or 0)) for c, _ in shown)
    high = max(max(c.after_forward, c.after_cutoff + (c.masked or 0), n) for c, n in shown)
    pad = max(2.0, (high - low) * 0.08)
    return [low - pad, high + pad]


def _domains(weights: list[float]) -> list[list[float]]:
    """Vertical domains, top panel first, for panels of the given relative heights."""
    usable = 1.0 - GAP * (len(weights) - 1)
    top, domains = 1.0, []
    for weight in weights:
        height = usable * weight / sum(weights)
        domains.append([top - height, top])
        top -= height + GAP
    return domains


def _panel_title(text: str, row: int, domain: list[float], style: FigureStyle) -> dict[str, Any]:
    return {"text": text, "x": 0.5, "xref": "paper", "xanchor": "center", "y": domain[1], "yref": "paper",
            "yanchor": "bottom", "showarrow": False, "font": {"size": style.font_size}}


def _axis_name(kind: str, row: int) -> str:
    return kind if row == 1 else f"{kind}{row}"


def _axis_ref(letter: str, row: int) -> str:
    return letter if row == 1 else f"{letter}{row}"
