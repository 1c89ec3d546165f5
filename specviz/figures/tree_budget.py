"""Trees vs chain (issue #19): what a token tree buys and costs as its node budget grows.

Three panels over the node budgets of a sweep (`python -m engine sweep --tree-budgets 0,4,8,16,32`),
the chain of the same depth k first as the reference: tokens per step τ (one target forward each:
accepted + 1, the bonus or recovered token included), measured tokens/s (target-only decoding as a dotted line) and
the verify cost, one verify forward over one target-only token's forward (the sweep's per-run
`verify_ms / target_token_ms`). One line per temperature through the cells' means; each run is a
small hollow point beside it. The words (`budget_verdicts`) say where the extra verify cost stops
paying; specviz/explore/trees.py puts them beside the figure with the machine they were measured on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from engine.formats.sweep_format import SweepCell
from engine.formats.sweep_reader import RunPoint, SweepTable
from specviz.figures.common import (LEGEND_ROOM, Figure, axis, empty_figure, legend_px, make_figure, run_points,
                                    text_px)
from specviz.quantities import TOKENS_PER_STEP
from specviz.style import COLORS, SERIES, FigureStyle

TITLE = "Trees vs chain"
NO_SWEEP = "No sweep loaded."
NO_BUDGETS = ("No tree budgets in this sweep: it measured chains only. Record one with "
              "python -m engine sweep --tree-budgets 0,4,8,16,32 and load it here.")
PANELS: tuple[tuple[str, str, Callable[[SweepCell], float | None], Callable[[RunPoint], float | None], str], ...] = (
    # (meta, y-axis title, a cell's mean, one run's value, hover format)
    ("length", TOKENS_PER_STEP.label, lambda c: c.mean_accepted_length, lambda r: r.mean_accepted_length,
     f"{TOKENS_PER_STEP.symbol} = {{:.2f}} tokens per step (one target forward each)"),
    ("speed", "tokens/s (measured)", lambda c: c.tokens_per_s, lambda r: r.tokens_per_s, "{:.2f} tokens/s"),
    ("verify", "verify forward ÷ one token's", lambda c: c.verify_cost, lambda r: r.verify_cost,
     "verify forward = {:.2f}× one target token's"),
)
PANEL_PX = 180              # one of a phone's or a projector's stacked panels, its plot area
PANEL_TITLES = ("<b>What the tree buys</b>", "<b>What you get</b>", "<b>What it costs</b>")


def tree_depth(table: SweepTable | None) -> int | None:
    """The depth k the budgets were swept at (the smallest such k); None without any tree cell."""
    ks = sorted({cell.k for cell in table.cells if cell.tree_nodes > 0}) if table is not None else []
    return ks[0] if ks else None


def budget_label(tree_nodes: int, k: int) -> str:
    return f"chain of {k} tokens" if tree_nodes == 0 else f"tree of {tree_nodes} nodes"


def _tick(tree_nodes: int, k: int, narrow: bool) -> str:
    """An x tick: 'chain<br>5 tokens' / 'tree<br>8 nodes'; on a phone 'chain' / '8', short enough to stay level."""
    if narrow:
        return "chain" if tree_nodes == 0 else str(tree_nodes)
    return budget_label(tree_nodes, k).replace(" of ", "<br>")


def budget_cells(table: SweepTable, k: int, temperature: float) -> list[SweepCell]:
    """The chain of depth k, then every tree budget at depth k, at one temperature (missing ones left out)."""
    cells = [table.cell(k, temperature, budget) for budget in table.tree_budgets]
    return [cell for cell in cells if cell is not None]


def tree_budget_figure(table: SweepTable | None, style: FigureStyle = FigureStyle()) -> Figure:
    """The three panels over the node budgets, one line per temperature; a clear note without budgets."""
    if table is None or not table.cells:
        return empty_figure(TITLE, NO_SWEEP, style)
    k = tree_depth(table)
    if k is None:
        return empty_figure(TITLE, NO_BUDGETS, style)
    budgets = table.tree_budgets
    position = {budget: i for i, budget in enumerate(budgets)}
    cramped = style.narrow or style.font_size > FigureStyle().font_size       # a phone or a projector
    gap = 0.1 if cramped else 0.08
    span = (1 - 2 * gap) / 3
    domains = [[i * (span + gap), i * (span + gap) + span] for i in range(3)]
    traces: list[dict[str, Any]] = []
    layout: dict[str, Any] = {"annotations": []}
    subtitle = (f"each tree at most {k} deep; the chain drafts {k} tokens · chain and trees on the same prompts "
                f"and seeds · hollow points: one run each")
    stacked = _stacked(style, subtitle) if cramped else None
    for panel, (meta, title, mean, one, words) in enumerate(PANELS):
        suffix = "" if panel == 0 else str(panel + 1)
        axes = {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
        for number, temperature in enumerate(table.temperatures):
            color = SERIES[number % len(SERIES)]
            cells = [c for c in budget_cells(table, k, temperature) if mean(c) is not None]
            traces += _spread(table, cells, one, meta, temperature, color, position, words, k, axes,
                              legend=panel == 0 and number == 0)
            traces.append({
                "type": "scatter", "mode": "lines+markers", "meta": f"{meta}.T={temperature:g}",
                "name": f"T = {temperature:g} (mean of the runs)", "legendgroup": f"T={temperature:g}",
                "showlegend": panel == 0, "x": [position[c.tree_nodes] for c in cells], "y": [mean(c) for c in cells],
                "customdata": [[budget_label(c.tree_nodes, k), c.runs] for c in cells],
                "line": {"color": color, "width": 2.5}, "marker": {"color": color, "size": 10},
                "hovertemplate": f"T = {temperature:g}, %{{customdata[0]}}: " + words.replace("{:.2f}", "%{y:.2f}")
                                 + " (mean of %{customdata[1]} runs)<extra></extra>",
                **axes})
        if meta == "speed":
            traces += _baselines(table, k, len(budgets), axes)
        if meta == "verify":
            traces.append({"type": "scatter", "mode": "lines", "x": [-0.5, len(budgets) - 0.5], "y": [1.0, 1.0],
                           "meta": "one_token", "name": "one target token's forward (1×)", "hoverinfo": "skip",
                           "line": {"color": COLORS["committed"], "dash": "dash", "width": 1.5}, **axes})
        column = domains[panel] if not cramped else [0.0, 1.0]
        row = [0.0, 1.0] if stacked is None else stacked.rows[panel]
        layout[f"xaxis{suffix}"] = axis(style, domain=column, anchor=f"y{suffix}", tickmode="array",
                                        tickvals=list(range(len(budgets))),
                                        ticktext=[_tick(b, k, style.narrow) for b in budgets],
                                        title={"text": "node budget (k-deep trees)" if style.narrow else ""},
                                        range=[-0.5, len(budgets) - 0.5], zeroline=False, fixedrange=True)
        layout[f"yaxis{suffix}"] = axis(style, domain=row, anchor=f"x{suffix}", title={"text": title},
                                        rangemode="tozero", fixedrange=True)
        layout["annotations"].append({"text": PANEL_TITLES[panel], "showarrow": False, "x": 0.5, "y": 1.0,
                                      "xref": f"x{suffix} domain", "yref": f"y{suffix} domain", "yanchor": "bottom",
                                      "yshift": 6, "font": {"size": style.font_size + 1}})
    if stacked is None:
        return make_figure(traces, TITLE, subtitle, style, height=430 + 3 * style.font_size,
                           margin={"t": 110, "b": 60 + 3 * LEGEND_ROOM // 2}, **layout)
    bottom = max(60 + 3 * LEGEND_ROOM // 2, stacked.gap_px + legend_px(
        [t["name"] for t in traces if t.get("showlegend", True) and isinstance(t.get("name"), str)], style))
    return make_figure(traces, TITLE, subtitle, style, height=stacked.top_px + stacked.plot_px + bottom,
                       margin={"t": stacked.top_px, "b": bottom}, **layout)


@dataclass(frozen=True)
class _Stack:
    """A phone's or a projector's three panels one above the other, in pixels: each panel's title over it, its
    tick labels and axis title under it, so no panel's words run into the next one's (a phone with large text
    drew 'node budget (k-deep trees)' over 'What it costs' when the panels took fixed thirds of the figure)."""
    top_px: int                         # the figure's title and subtitle, and the first panel's title
    plot_px: int                        # the three panels and the two gaps between them
    gap_px: int                         # under a panel: its tick labels and axis title, then the next one's title
    rows: tuple[list[float], ...]       # each panel's y domain, top panel first


def _stacked(style: FigureStyle, subtitle: str) -> _Stack:
    line = 1.4 * style.font_size
    panel_title = int(1.4 * (style.font_size + 1)) + 10
    top = (text_px(f"<b>{TITLE}</b>", style.line_chars(style.title_size, bold=True), style.title_size, 1.25)
           + text_px(subtitle, style.line_chars(style.font_size), style.font_size) + 16 + panel_title)
    gap = int(3 * line) + 16 + panel_title          # two lines of tick labels and the axis title, the next title
    plot = 3 * PANEL_PX + 2 * gap
    rows = tuple([1 - (i * (PANEL_PX + gap) + PANEL_PX) / plot, 1 - i * (PANEL_PX + gap) / plot] for i in range(3))
    return _Stack(max(110, top), plot, gap, rows)


def _spread(table: SweepTable, cells: list[SweepCell], one: Callable[[RunPoint], float | None], meta: str,
            temperature: float, color: str, position: dict[int, int], words: str, k: int, axes: dict[str, str],
            legend: bool) -> list[dict[str, Any]]:
    """Every run behind the cells as a small hollow point, nudged sideways by prompt and seed."""
    points = [(cell.tree_nodes, run, one(run)) for cell in cells
              for run in table.runs_at(cell.k, cell.temperature, cell.tree_nodes)]
    points = [(budget, run, value) for budget, run, value in points if value is not None]
    if not points:
        return []
    placed = [(position[budget], run, value) for budget, run, value in points]
    return [{**run_points(placed, color, widest=0.1), "meta": f"runs.{meta}.T={temperature:g}",
             "showlegend": legend, "legendgroup": "runs",
             "customdata": [[budget_label(budget, k), run.prompt_index + 1, run.seed] for budget, run, _ in points],
             "hovertemplate": f"T = {temperature:g}, %{{customdata[0]}}, prompt %{{customdata[1]}}, seed "
                              f"%{{customdata[2]}}: " + words.replace("{:.2f}", "%{y:.2f}") + "<extra></extra>",
             **axes}]


def _baselines(table: SweepTable, k: int, width: int, axes: dict[str, str]) -> list[dict[str, Any]]:
    """Target-only decoding's tokens/s at each temperature, measured beside the runs: a dotted line."""
    lines = []
    for number, temperature in enumerate(table.temperatures):
        chain = table.cell(k, temperature, 0) or next(iter(budget_cells(table, k, temperature)), None)
        if chain is None:
            continue
        lines.append({"type": "scatter", "mode": "lines", "x": [-0.5, width - 0.5],
                      "y": [chain.baseline_tokens_per_s] * 2, "meta": f"target_only.T={temperature:g}",
                      "name": f"target alone, T = {temperature:g}", "legendgroup": f"T={temperature:g}",
                      "line": {"color": SERIES[number % len(SERIES)], "dash": "dot", "width": 1.5},
                      "hovertemplate": f"target-only decoding, T = {temperature:g}: %{{y:.2f}} tokens/s<extra></extra>",
                      **axes})
    return lines


def budget_verdicts(table: SweepTable | None) -> list[str]:
    """One sentence per temperature: which budget was fastest and where the extra verify cost stopped paying."""
    k = tree_depth(table)
    if table is None or k is None:
        return []
    sentences = []
    for temperature in table.temperatures:
        cells = budget_cells(table, k, temperature)
        chain = next((c for c in cells if c.tree_nodes == 0), None)
        trees = [c for c in cells if c.tree_nodes > 0]
        if not trees:
            continue
        best = max(cells, key=lambda c: (c.tokens_per_s, -c.tree_nodes))
        larger = [c for c in trees if c.tree_nodes > best.tree_nodes]
        head = f"At T = {temperature:g}"
        if best.tree_nodes == 0:
            sentences.append(f"{head} the chain of {k} is fastest ({best.tokens_per_s:.2f} tokens/s): already at "
                             f"{_costs(trees[0], best, k)}.")
            continue
        versus = f"{best.tokens_per_s:.2f} tokens/s" + (
            f" against the chain's {chain.tokens_per_s:.2f}" if chain is not None else "")
        if not larger:
            sentences.append(f"{head} every budget up to the largest paid: the {best.tree_nodes}-node tree is fastest "
                             f"({versus}).")
            continue
        sentences.append(f"{head} the extra verify cost stops paying after {best.tree_nodes} nodes: that tree is "
                         f"fastest ({versus}); at {_costs(larger[0], best, k)}.")
    return sentences


def _costs(cell: SweepCell, reference: SweepCell, k: int) -> str:
    """'16 nodes a verify forward costs 2.10× one target token's and brings 3.10 tokens per target forward
    (vs 2.90 for the tree of 8 nodes), for 3.20 tokens/s': what a budget bought and cost against
    `reference` (a tree or the chain of k), as recorded."""
    cost = ("" if cell.verify_cost is None else
            f" a verify forward costs {cell.verify_cost:.2f}× one target token's and")
    mine, theirs = cell.mean_accepted_length, reference.mean_accepted_length
    gain = (f" brings {TOKENS_PER_STEP.symbol} = {mine:.2f} tokens per step (vs {theirs:.2f} for the "
            f"{budget_label(reference.tree_nodes, k)})"
            if mine is not None and theirs is not None
            else " brings")
    return f"{cell.tree_nodes} nodes{cost}{gain}, for {cell.tokens_per_s:.2f} tokens/s"
