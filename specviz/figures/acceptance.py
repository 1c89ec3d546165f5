"""Acceptance figures: accepted drafts per step (with tokens per step), acceptance by draft
position, and how many drafts each step accepted against the i.i.d. (truncated geometric) model.

The quantities keep the names, symbols and definitions of specviz/quantities.py: tokens per step τ
(accepted + 1 per step that verified drafts, the recovered or bonus token included; engine/metrics.py) and
acceptance by position are measured;
the model lines are the i.i.d. model at the run's expected acceptance α = Σ min(p, q), the same α the
predicted-speedup card and the Explore tab use (a tree run records no α, so it has no model lines).
A run on a vLLM server may add the whole server's acceptance by position over the run (its /metrics).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.metrics import expected_histogram, expected_tokens_per_step, running_tokens_per_step
from engine.formats.trace import Trace
from specviz.figures.common import Figure, empty_figure, make_figure
from specviz.quantities import ALPHA, BY_POSITION, TOKENS_PER_STEP, alpha_text, hover_tip, shown_alpha
from specviz.style import COLORS, FigureStyle, pattern
from specviz.tokens import percent

if TYPE_CHECKING:
    from specviz.serving.server_interval import ServerShare

PER_STEP_TITLE = "Accepted per step"
POSITION_TITLE = "Acceptance by position"
HISTOGRAM_TITLE = "Drafts accepted per step: histogram"
A_MODEL = f"{ALPHA.name} {ALPHA.symbol} = Σ min(p, q)"
PER_STEP_SUBTITLE = f"drafts accepted, and {TOKENS_PER_STEP.label}<br>(accepted + 1, vLLM's mean acceptance length)"
POSITION_SUBTITLE = f"{BY_POSITION.symbol};<br>model line: one {A_MODEL} for all"
HISTOGRAM_SUBTITLE = f"vs the i.i.d. model at {A_MODEL}:<br>each draft accepted with chance {ALPHA.symbol}"
TREE_PER_STEP_SUBTITLE = (f"tree nodes drafted, path tokens accepted, and {TOKENS_PER_STEP.label}<br>"
                          "(path + 1, one target forward each)")
TREE_POSITION_SUBTITLE = ("P(the path goes on at depth i | the walk reached depth i);<br>a tree records no α, so no "
                          "model line")
TREE_HISTOGRAM_SUBTITLE = "how long each step's accepted path was;<br>a tree records no α, so no i.i.d. model"
MODEL_LINE = {"color": COLORS["bonus"], "dash": "dash", "width": 2}


def _height(style: FigureStyle) -> int:
    return 400 + 2 * style.font_size


WHILE_LIVE = "Drawn when the run ends: this chart sums up the whole run."


def held_while_live(style: FigureStyle = FigureStyle()) -> tuple[Figure, Figure, Figure]:
    """The per-step, by-position and histogram charts while a run streams: each sums up the whole
    run, and redrawing the three at every update cost the browser 70 ms of the 160 ms its figures
    take, which a 2-core machine running browser and models took from the models (docs/benchmark.md,
    "In the app")."""
    def held(title: str) -> Figure:
        return empty_figure(title, WHILE_LIVE, style, height=_height(style))     # the page keeps its layout
    return held(PER_STEP_TITLE), held(POSITION_TITLE), held(HISTOGRAM_TITLE)


def per_step_figure(trace: Trace | None, style: FigureStyle = FigureStyle()) -> Figure:
    """Bars of accepted drafts (of k drafted) per step, and the running tokens per step (accepted + 1)."""
    if trace is None or not trace.steps:
        return empty_figure(PER_STEP_TITLE, "No steps yet.", style)
    steps = [step.index for step in trace.steps]
    running = running_tokens_per_step(trace.steps)       # the steps that verified drafts, as the τ card
    tree = trace.config.is_tree          # a tree step drafts nodes and accepts a path
    drafted = [len(step.tree.nodes) if step.tree is not None else step.k for step in trace.steps]
    traces = [
        {"type": "bar", "x": steps, "y": drafted, "name": "tree nodes drafted" if tree else "drafted (k)",
         "meta": "drafted", "marker": {"color": "rgba(0,0,0,0.08)", "line": {"width": 0}},
         "hovertemplate": "step %{x}: %{y} " + ("tree nodes drafted" if tree else "drafted") + "<extra></extra>"},
        {"type": "bar", "x": steps, "y": [step.num_accepted for step in trace.steps],
         "name": "path tokens accepted" if tree else "accepted", "meta": "accepted",
         "marker": {"color": COLORS["accepted"]},
         "hovertemplate": "step %{x}: %{y} " + ("path tokens accepted" if tree else "accepted") + "<extra></extra>"},
        {"type": "scatter", "x": steps, "y": running, "name": f"{TOKENS_PER_STEP.label}, mean so far (accepted + 1)",
         "meta": "running", "mode": "lines", "line": {"color": COLORS["recovered"], "width": 3},
         "hovertemplate": f"after step %{{x}}: {TOKENS_PER_STEP.symbol} = %{{y:.2f}}<br>"
                          f"{hover_tip(TOKENS_PER_STEP)}<extra></extra>"},
    ]
    alpha = trace.summary.estimated_alpha
    if alpha is not None:
        k = max(step.k for step in trace.steps)
        expected = expected_tokens_per_step(shown_alpha(alpha), k)
        traces.append({"type": "scatter", "x": [steps[0] - 0.5, steps[-1] + 0.5], "y": [expected, expected],
                       "mode": "lines", "meta": "model", "line": MODEL_LINE, "hoverinfo": "skip",
                       "name": f"model: E = {expected:.2f} tokens per step at {ALPHA.symbol} = {alpha_text(alpha)}, k = {k}"})
    subtitle = TREE_PER_STEP_SUBTITLE if tree else PER_STEP_SUBTITLE
    return make_figure(traces, PER_STEP_TITLE, subtitle, style, _height(style),
                       barmode="overlay", bargap=0.15, xaxis={"title": {"text": "step"}},
                       yaxis={"title": {"text": "tokens"}, "rangemode": "tozero"})


def position_figure(trace: Trace | None, style: FigureStyle = FigureStyle(),
                    server: ServerShare | None = None) -> Figure:
    """P(draft i accepted | it was verified) for each draft position i; with `server` (a vLLM run), the same
    from the server's /metrics counters over the run beside it, named as covering the whole server."""
    summary = None if trace is None else trace.summary
    if summary is None or not summary.per_position_acceptance:
        return empty_figure(POSITION_TITLE, "No drafts verified yet.", style)
    reached = _reached_counts(trace)
    tree = trace.config.is_tree          # a tree's main line: the path, then the child refused where it stopped
    labels = [f"{'depth ' if tree else 'd'}{i}" for i in range(1, len(reached) + 1)]
    traces = [{
        "type": "bar", "x": labels, "y": [rate if rate is not None else 0.0 for rate in summary.per_position_acceptance],
        "name": BY_POSITION.name, "meta": "per_position", "marker": {"color": COLORS["accepted"]},
        "customdata": reached,
        "hovertemplate": f"%{{x}}: %{{y:.1%}} accepted of %{{customdata}} times it was checked<br>"
                         f"{hover_tip(BY_POSITION)}<extra></extra>"}]
    if server is not None:
        traces.append(_server_bars(server, len(labels)))
    alpha = summary.estimated_alpha
    if alpha is not None:
        traces.append({"type": "scatter", "x": labels, "y": [alpha] * len(labels), "mode": "lines", "meta": "model",
                       "name": f"model: the same {ALPHA.symbol} = {alpha_text(alpha)} at every position",
                       "line": {**MODEL_LINE, "shape": "hvh"}, "hoverinfo": "skip"})
    # Each bar's share and count sit under it, in its tick label: drawn above the bar they crossed the model
    # line wherever the share came near α (issue #33 item 3).
    shares = [f"{label}<br>{percent(rate, 0)} of {n}" if rate is not None else f"{label}<br>not reached"
              for label, rate, n in zip(labels, summary.per_position_acceptance, reached)]
    return make_figure(traces, POSITION_TITLE, TREE_POSITION_SUBTITLE if tree else POSITION_SUBTITLE, style,
                       _height(style) + 2 * style.font_size,
                       xaxis={"title": {"text": "depth in the tree" if tree else "draft position"},
                              "tickmode": "array", "tickvals": labels, "ticktext": shares},
                       yaxis={"range": [0, 1.05], "tickformat": ".0%", "title": {"text": "accepted"}})


def _server_bars(server: ServerShare, positions: int) -> dict:
    """The whole server's interval (specviz/serving/server_interval.py) as hatched bars beside the run's."""
    count = min(positions, len(server.rates))
    labels = [f"d{i}" for i in range(1, count + 1)]
    rates = list(server.rates[:count])
    return {"type": "bar", "x": labels, "y": [rate or 0.0 for rate in rates], "meta": "server",
            "name": "whole server over this run (/metrics: all its traffic)",
            "marker": {"color": COLORS["recovered"], "pattern": pattern("rejected")},
            "text": [f"{percent(rate, 0)}<br>of {n}" if rate is not None else "not reached"
                     for rate, n in zip(rates, server.reached)],
            "textposition": "outside", "cliponaxis": False, "customdata": list(server.reached[:count]),
            "hovertemplate": f"%{{x}}: %{{y:.1%}} accepted of %{{customdata}} verify steps that reached it, over the "
                             f"whole server<br>{server.note}<extra></extra>"}


def histogram_figure(trace: Trace | None, style: FigureStyle = FigureStyle()) -> Figure:
    """Share of steps that accepted exactly n drafts, with the truncated geometric model overlaid."""
    summary = None if trace is None else trace.summary
    if summary is None or not summary.verify_steps:
        return empty_figure(HISTOGRAM_TITLE, "No step has verified drafts yet.", style)
    counts = list(summary.accepted_length_histogram)
    ns = list(range(len(counts)))
    left_out = summary.undrafted_steps        # one token each, nothing verified: vLLM leaves them out too
    name = f"measured ({summary.verify_steps} steps that verified drafts; {left_out} that drafted nothing left out)" \
        if left_out else "measured"
    traces = [{"type": "bar", "x": ns, "y": [count / summary.verify_steps for count in counts], "name": name,
               "meta": "measured", "marker": {"color": COLORS["accepted"]}, "customdata": counts,
               "hovertemplate": "%{x} accepted: %{customdata} steps (%{y:.1%})<extra></extra>"}]
    alpha = summary.estimated_alpha
    if alpha is not None:
        model = expected_histogram(shown_alpha(alpha), [step.k for step in trace.steps if step.k], len(counts) - 1)
        traces.append({"type": "scatter", "x": ns, "y": model, "name": f"model αⁿ(1−α), αᵏ at n=k; α = {alpha_text(alpha)}",
                       "meta": "model", "mode": "lines+markers", "line": {**MODEL_LINE, "width": 3},
                       "marker": {"size": 10, "symbol": "diamond"},
                       "hovertemplate": "model: P(%{x} accepted) = %{y:.1%}<extra></extra>"})
    tree = trace.config.is_tree
    return make_figure(traces, HISTOGRAM_TITLE, TREE_HISTOGRAM_SUBTITLE if tree else HISTOGRAM_SUBTITLE, style,
                       _height(style), xaxis={"title": {"text": "path length accepted in the step" if tree
                                                        else "drafts accepted in the step"}, "dtick": 1},
                       yaxis={"title": {"text": "share of steps"}, "tickformat": ".0%", "rangemode": "tozero"})


def _reached_counts(trace: Trace) -> list[int]:
    max_k = max(step.k for step in trace.steps)
    reached = [0] * max_k
    for step in trace.steps:
        for position, verdict in enumerate(step.verdicts):
            reached[position] += verdict != "unverified"
    return reached
