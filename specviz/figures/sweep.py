"""Sweep figures: k x temperature heatmaps, the measured-vs-theory overlay, per-position acceptance.

Heatmap columns are the swept k values side by side (an unswept k leaves no gap) and
rows the temperatures. In the speedup heatmap the fastest k of each temperature (highest
measured speedup) is outlined and starred; r's and τ's heatmaps carry no star (issue 41: a star
there read as the best r or τ, and saying whose star it was took a second line their narrow boxes
cannot spare). The theory overlay draws Leviathan et al.'s i.i.d. model, E(k) = (1 - a^(k+1)) /
(1 - a) tokens per step (the bonus token included) and speedup(k) = E / (k c + 1), from the sweep's
own estimates of a and c.
"""

from __future__ import annotations

from typing import Any, Callable

from engine.device_costs import DeviceCosts
from engine.metrics import expected_speedup, expected_tokens_per_step
from engine.formats.sweep_format import SweepCell
from engine.formats.sweep_reader import SweepTable
from specviz.figures.common import (LEGEND_ROOM, Figure, axis, empty_figure, legend_px, make_figure, run_points,
                                    text_px)
from specviz.quantities import (ACCEPTANCE_RATE, ALPHA, BY_POSITION, TOKENS_PER_STEP, Quantity, alpha_text, hover_tip,
                                shown_alpha)
from specviz.style import COLORS, SERIES, TITLE_INDENT, FigureStyle

THEORY_PLOTS_PX = 420        # the two stacked plots of a phone's or a projector's theory chart and the gap between
MODEL_LINE = {"color": COLORS["bonus"], "dash": "dash", "width": 3}
BEST_MARK = {"symbol": "star", "size": 15, "color": "#F0E442", "line": {"color": "#222222", "width": 1.5}}
SUBTITLE_GAP = 10   # px between a heatmap's subtitle and its top row (issue 41: "accepted / drafted" sat on it)
NO_SWEEP = "No sweep yet: press Run sweep, or upload a sweep JSON."
NO_CHAINS = "This sweep has no chain cells at T = {t:g}, only token trees: see Trees vs chain below."

METRICS: dict[str, tuple[str, str, Callable[[SweepCell], float | None], str, Quantity | None]] = {
    # name -> (title, subtitle, value of a cell, cell text format, the named quantity it shows)
    "acceptance": (ACCEPTANCE_RATE.title, "accepted / drafted", lambda c: c.acceptance_rate, "{:.0%}",
                   ACCEPTANCE_RATE),
    "length": (TOKENS_PER_STEP.title, "per target forward, bonus incl.", lambda c: c.mean_accepted_length,
               "{:.2f}", TOKENS_PER_STEP),
    "speedup": ("Speedup ×", "vs target-only; ★ fastest k", lambda c: c.speedup, "{:.2f}", None),
}
SCALES = {
    "acceptance": [[0.0, "#FFFFFF"], [1.0, COLORS["accepted"]]],
    "length": [[0.0, "#FFFFFF"], [1.0, COLORS["recovered"]]],
    "speedup": [[0.0, COLORS["rejected"]], [0.5, "#FFFFFF"], [1.0, COLORS["recovered"]]],   # centred on 1x
}


def heatmap_figure(table: SweepTable | None, metric: str, style: FigureStyle = FigureStyle()) -> Figure:
    """`metric` ("acceptance", "length" or "speedup") over k (x) x temperature (y); missing cells stay blank."""
    title, subtitle, value, text_format, quantity = METRICS[metric]
    if table is None or not table.cells:
        return empty_figure(title, NO_SWEEP, style)
    ks, temperatures = table.ks, table.temperatures
    z: list[list[float | None]] = []
    text: list[list[str]] = []
    for temperature in temperatures:
        cells = [table.cell(k, temperature) for k in ks]
        values = [None if cell is None else value(cell) for cell in cells]
        z.append(values)
        text.append(["" if v is None else text_format.format(v) for v in values])
    present = [v for row in z for v in row if v is not None]
    scale: dict[str, Any] = {"colorscale": SCALES[metric]}
    if metric == "speedup":
        spread = max([abs(v - 1.0) for v in present] + [0.25])
        scale |= {"zmin": 1.0 - spread, "zmax": 1.0 + spread}
    elif metric == "acceptance":
        scale |= {"zmin": 0.0, "zmax": 1.0}
    heatmap = {
        "type": "heatmap", "x": list(range(len(ks))), "y": list(range(len(temperatures))), "z": z, "text": text,
        "texttemplate": "%{text}", "textfont": {"size": cell_text_size(style, len(ks), text)}, "meta": metric,
        "name": title,
        "customdata": [[[k, t] for k in ks] for t in temperatures], "xgap": 2, "ygap": 2, "showscale": False,
        "hovertemplate": "k = %{customdata[0]}, T = %{customdata[1]}: %{text}"
                         + (f"<br>{hover_tip(quantity)}" if quantity is not None else "") + "<extra></extra>", **scale}
    if metric == "length":       # τ beside 1 + k × r: why the two do not multiply out (multiply_note)
        heatmap["customdata"] = [[[k, t, *multiplied(table.cell(k, t))] for k in ks] for t in temperatures]
        heatmap["hovertemplate"] = ("k = %{customdata[0]}, T = %{customdata[1]}: τ = %{text}<br>1 + k × r = "
                                    "%{customdata[2]:.2f}; the runs drafted (τ − 1) / r ≈ %{customdata[3]:.2f} tokens a "
                                    f"step, not k<br>{hover_tip(TOKENS_PER_STEP)}<extra></extra>")
    best = [(ks.index(k), row, k, t) for row, t in enumerate(temperatures)
            if metric == "speedup" and (k := table.best_k(t)) is not None]
    (across, up), mark = star_corner(style, len(ks))
    marks = {"type": "scatter", "mode": "markers", "meta": "best_k", "name": "★ fastest k at this temperature",
             "x": [column + across for column, *_ in best], "y": [row + up for _, row, *_ in best],
             "customdata": [[k, t] for *_, k, t in best], "marker": mark, "cliponaxis": False,
             "hovertemplate": "fastest at T = %{customdata[1]}: k = %{customdata[0]}<extra></extra>"}
    outlines = [{"type": "rect", "xref": "x", "yref": "y", "x0": column - 0.5, "x1": column + 0.5, "y0": row - 0.5,
                 "y1": row + 0.5, "line": {"color": "#222222", "width": 3}} for column, row, *_ in best]
    figure = make_figure(
        [heatmap, marks], title, subtitle, style, height=150 + (40 + style.font_size) * len(temperatures),
        shapes=outlines, showlegend=False, margin={"l": 40, "b": 56, "r": 10},
        xaxis={"title": {"text": "k (draft tokens per step)"}, "tickvals": list(range(len(ks))),
               "ticktext": [str(k) for k in ks], "showgrid": False, "zeroline": False, "fixedrange": True,
               "range": [-0.5, len(ks) - 0.5]},
        yaxis={"title": {"text": "T"}, "tickvals": list(range(len(temperatures))),
               "ticktext": [f"{t:g}" for t in temperatures], "showgrid": False, "zeroline": False,
               "fixedrange": True, "range": [-0.5, len(temperatures) - 0.5]})
    return figure.with_layout(title={"pad": {"b": SUBTITLE_GAP}})     # automargin keeps the title under the subtitle


OUTLINE_PX = 3               # the fastest k's outline; a star sits inside it, clear of it by STAR_GAP_PX
STAR_GAP_PX = 2
STAR_EXTENT = 0.67           # half a drawn star's box over its marker size, its line included (20 px for 15, measured)
WIDE_CORNER = (0.34, 0.26)   # a star's place from its cell's centre, in cells, where the chart's width is unknown
SMALL_STAR = 11              # a phone's star (its cells are about 38 px wide): 15 px ran over the outline


def star_corner(style: FigureStyle, columns: int) -> tuple[tuple[float, float], dict[str, Any]]:
    """Where a fastest-k star sits from its cell's centre (in cells, across and up) and its marker: in the top
    right corner inside the cell's outline. Where the chart's width is known the corner is worked out in pixels,
    the column's from the chart's width and the row's from its height per temperature (at least 40 px plus a line
    of text), and a phone's star is smaller (issue #41: a 15 px star at 0.34 of a 38 px column ran over the
    outline, and a projector's large text made the rows too short for it); where the width is unknown the fixed
    WIDE_CORNER holds it."""
    if style.line_px is None or not columns:
        return WIDE_CORNER, BEST_MARK
    column_px = (style.line_px + TITLE_INDENT - HEATMAP_SIDE_PX) / columns
    row_px = 40 + style.font_size
    mark = {**BEST_MARK, "size": SMALL_STAR} if style.narrow else BEST_MARK
    reach = STAR_EXTENT * mark["size"] + OUTLINE_PX + STAR_GAP_PX
    return (max(0.0, 0.5 - reach / column_px), max(0.0, 0.5 - reach / row_px)), mark


HEATMAP_SIDE_PX = 50          # the heatmap's left and right margins, less the title's indent: its plot is the rest
VALUE_EM = 0.68               # a cell value's mean glyph width in font sizes: digits 0.56, '%' 0.89 (Arial and its kin)


def cell_text_size(style: FigureStyle, columns: int, text: list[list[str]]) -> int:
    """The cells' font size: the style's, or smaller where the chart's known width leaves a column too narrow
    for its longest value with a gap (a phone with large text drew '74%77%69%' edge to edge)."""
    longest = max((len(value) for row in text for value in row), default=0)
    if style.line_px is None or not style.narrow or not longest or not columns:
        return style.cell_font_size
    column_px = (style.line_px + TITLE_INDENT - HEATMAP_SIDE_PX) / columns
    fits = int(0.8 * column_px / (longest * VALUE_EM))
    return max(8, min(style.cell_font_size, fits))


def multiplied(cell: SweepCell | None) -> tuple[float | None, float | None]:
    """(1 + k × r, the drafts a step the runs made, (τ − 1) / r): τ = 1 + k × r would hold if every step
    drafted k, but a step drafts only what the run's token budget leaves room for (k = tokens left − 1),
    so its last steps draft fewer; and a cell averages its runs' r and τ apart. None where unknown."""
    if cell is None or cell.acceptance_rate is None or cell.mean_accepted_length is None:
        return None, None
    drafts = (cell.mean_accepted_length - 1) / cell.acceptance_rate if cell.acceptance_rate > 0 else None
    return 1 + cell.k * cell.acceptance_rate, drafts


def theory_figure(table: SweepTable | None, temperature: float | None,
                  style: FigureStyle = FigureStyle(), device_costs: DeviceCosts | None = None) -> Figure:
    """Measured tokens/step and speedup vs k at one temperature (each run a small point, the mean a
    large one), with the i.i.d. model at the temperature's α: ideal (verify costs one forward), at each
    k's measured draft and verify costs (specviz/explore/gap.py splits the gap to it) and, on a server that
    measured its device when the pair loaded (engine/device_costs.py), at that device's costs."""
    title = "Measured vs theory"
    if table is None or not table.cells or temperature not in table.temperatures:
        return empty_figure(title, NO_SWEEP, style)
    cells = table.at(temperature)
    if not cells:
        return empty_figure(title, NO_CHAINS.format(t=temperature), style)
    fit = table.theory(temperature)
    ks = [cell.k for cell in cells]
    curve_ks = list(range(1, max(ks) + 1))
    left = {"xaxis": "x", "yaxis": "y"}
    right = {"xaxis": "x2", "yaxis": "y2"}
    traces: list[dict[str, Any]] = [
        *_spread(table, cells, "length", COLORS["accepted"], left),
        _points(ks, [c.mean_accepted_length for c in cells], f"measured {TOKENS_PER_STEP.label} (mean)",
                "measured.length", COLORS["accepted"],
                f"k = %{{x}}: {TOKENS_PER_STEP.symbol} = %{{y:.2f}} (mean of the runs)<br>{hover_tip(TOKENS_PER_STEP)}",
                left),
        *_spread(table, cells, "speedup", COLORS["recovered"], right),
        _points(ks, [c.speedup for c in cells], "measured speedup (mean)", "measured.speedup", COLORS["recovered"],
                "k = %{x}: %{y:.2f}× target-only (mean of the runs)", right),
        {"type": "scatter", "mode": "lines", "x": [0.5, max(ks) + 0.5], "y": [1.0, 1.0], "meta": "target_only",
         "name": "target-only (1×)", "line": {"color": COLORS["committed"], "dash": "dot", "width": 1.5},
         "hoverinfo": "skip", **right},
    ]
    verify = [(c.k, c.verify_cost) for c in cells if c.verify_cost is not None]
    measured_costs = [(c.k, c.draft_cost, c.verify_cost) for c in cells
                      if c.draft_cost is not None and c.verify_cost is not None]
    if fit is not None:
        alpha = shown_alpha(fit.alpha)           # the curves use the digits the legend shows
        traces.insert(2, {"type": "scatter", "mode": "lines", "x": curve_ks, "meta": "model.length",
                          "y": [expected_tokens_per_step(alpha, k) for k in curve_ks], "line": MODEL_LINE,
                          "name": f"model E = (1 − αᵏ⁺¹)/(1 − α), {ALPHA.symbol} = {alpha_text(alpha)}",
                          "hovertemplate": f"model, k = %{{x}}: E = %{{y:.2f}} tokens per step<br>{hover_tip(ALPHA)}"
                                           "<extra></extra>", **left})
        draft = fit.draft_cost if fit.draft_cost is not None else fit.cost_ratio
        if draft is not None:
            traces.append({"type": "scatter", "mode": "lines", "x": curve_ks, "meta": "model.speedup",
                           "y": [expected_speedup(alpha, k, draft) for k in curve_ks],
                           "line": {**MODEL_LINE, "color": COLORS["draft"]},
                           "name": "model, ideal: verify of k + 1 tokens = 1 forward",
                           "hovertemplate": "ideal model, k = %{x}: %{y:.2f}×<extra></extra>", **right})
        if measured_costs:
            traces.append({"type": "scatter", "mode": "lines+markers", "x": [k for k, _, _ in measured_costs],
                           "y": [expected_speedup(alpha, k, c, v) for k, c, v in measured_costs],
                           "customdata": [[k + 1, v, c] for k, c, v in measured_costs],
                           "meta": "model.speedup_measured_verify",
                           "line": {"color": COLORS["committed"], "width": 2.5}, "marker": {"symbol": "diamond",
                                                                                              "size": 9},
                           "name": "model at the measured costs",
                           "hovertemplate": "k = %{x}: a draft token = %{customdata[2]:.2f}×, verify of "
                                            "%{customdata[0]} tokens = %{customdata[1]:.2f}× one token's forward → "
                                            "%{y:.2f}×<extra></extra>", **right})
        if device_costs is not None and device_costs.cost_ratio is not None:
            device_ks = [k for k in curve_ks if k in device_costs.ks]
            traces.append({"type": "scatter", "mode": "lines", "x": device_ks, "meta": "model.speedup_this_device",
                           "y": [device_costs.speedup(alpha, k) for k in device_ks],
                           "line": {"color": COLORS["cut"], "dash": "dashdot", "width": 2.5},
                           "name": f"model at this server's {device_costs.device} costs",
                           "hovertemplate": f"k = %{{x}} on this {device_costs.device} (c = "
                                            f"{device_costs.cost_ratio:.2f}, v measured per k): %{{y:.2f}}×"
                                            "<extra></extra>", **right})
    cramped = style.narrow or style.font_size > FigureStyle().font_size         # a phone or a projector
    lines = [f"T = {temperature:g} · {_fit_words(fit, len(cells))}",
             "E counts the bonus token (α = 1: k + 1 per step)" if cramped else
             "E: tokens per step, the bonus token counted (at α = 1 every step emits k + 1)", _cost_words(fit, verify)]
    subtitle = "<br>".join(line for line in lines if line)
    ticks = {"tickmode": "array", "tickvals": curve_ks, "range": [0.5, max(ks) + 0.5], "zeroline": False}
    # Side by side on a desktop; stacked on a phone or a projector.
    left_x, right_x = ([0.0, 1.0], [0.0, 1.0]) if cramped else ([0.0, 0.45], [0.56, 1.0])
    top_y, bottom_y = ([0.62, 1.0], [0.0, 0.38]) if cramped else ([0.0, 1.0], [0.0, 1.0])
    # As tall as its wrapped title, subtitle and legend leave the plots room for (a phone with large text wraps
    # them to a line or two of words each: a fixed height left the plots -2 px, and Plotly's "Something went
    # wrong with axis scaling" stopped the page drawing the rest of the Explore tab).
    top = max(150 if cramped else 110,
              text_px(f"<b>{title}</b>", style.line_chars(style.title_size, bold=True), style.title_size, 1.25)
              + text_px(subtitle, style.line_chars(style.font_size), style.font_size) + 24)
    bottom = max(60 + 3 * LEGEND_ROOM // 2, 60 + legend_px([t["name"] for t in traces if t.get("showlegend", True)],
                                                           style))
    height = max((700 if cramped else 440) + 3 * style.font_size, top + bottom + (THEORY_PLOTS_PX if cramped else 0))
    return make_figure(
        traces, title, subtitle, style, height=height, margin={"t": top, "b": bottom},
        xaxis=axis(style, domain=left_x, anchor="y", title={"text": "k"}, **ticks),
        xaxis2=axis(style, domain=right_x, anchor="y2", title={"text": "k"}, **ticks),
        yaxis={"title": {"text": TOKENS_PER_STEP.label}, "rangemode": "tozero", "domain": top_y},
        yaxis2=axis(style, anchor="x2", domain=bottom_y, title={"text": "speedup ×"},
                    rangemode="tozero"))


def _spread(table: SweepTable, cells: list[SweepCell], metric: str, color: str,
            axes: dict[str, str]) -> list[dict[str, Any]]:
    """Every run behind the cells as a small hollow point, nudged sideways by prompt and seed."""
    runs = [(cell.k, run) for cell in cells for run in table.runs_at(cell.k, cell.temperature, cell.tree_nodes)]
    values = [(k, run, run.mean_accepted_length if metric == "length" else run.speedup) for k, run in runs]
    values = [(k, run, value) for k, run, value in values if value is not None]
    if not values:
        return []
    unit = "tokens per step" if metric == "length" else "× target-only"
    return [{**run_points(values, color, widest=0.08), "meta": f"runs.{metric}", "showlegend": metric == "length",
             "customdata": [[k, run.prompt_index + 1, run.seed] for k, run, _ in values],
             "hovertemplate": f"k = %{{customdata[0]}}, prompt %{{customdata[1]}}, seed %{{customdata[2]}}: "
                              f"%{{y:.2f}} {unit}<extra></extra>", **axes}]


def _cost_words(fit: Any, verify: list[tuple[int, float]]) -> str:
    """The costs the speedup curves use, named: a draft token's, and the verify forward's at the largest k."""
    if fit is None or (fit.draft_cost is None and fit.cost_ratio is None):
        return ""
    if fit.draft_cost is None:
        return (f"c = {fit.cost_ratio:.2f} (a draft token / a verify forward); this sweep did not record the "
                "verify cost, so only the ideal model (verify of k + 1 tokens = 1 forward)")
    draft = f"a draft token = {fit.draft_cost:.2f}× one target token's forward"
    if not verify:
        return draft
    k, cost = verify[-1]
    return f"{draft} · measured: verify of {k + 1} tokens = {cost:.2f}× one token (ideal: 1×)"


def positions_figure(table: SweepTable | None, temperature: float | None,
                     style: FigureStyle = FigureStyle()) -> Figure:
    """P(draft i accepted | it was checked) by draft position i, one line per k, at one temperature."""
    title = BY_POSITION.name[:1].upper() + BY_POSITION.name[1:]
    if table is None or not table.cells or temperature not in table.temperatures:
        return empty_figure(title, NO_SWEEP, style)
    if not table.at(temperature):
        return empty_figure(title, NO_CHAINS.format(t=temperature), style)
    traces = []
    for number, cell in enumerate(table.at(temperature)):
        positions = list(range(1, len(cell.per_position_acceptance) + 1))
        traces.append({"type": "scatter", "mode": "lines+markers", "x": positions,
                       "y": list(cell.per_position_acceptance), "name": f"k = {cell.k}", "meta": f"k={cell.k}",
                       "line": {"color": SERIES[number % len(SERIES)], "width": 2}, "connectgaps": False,
                       "hovertemplate": f"k = {cell.k}, d%{{x}}: %{{y:.1%}} accepted<br>{hover_tip(BY_POSITION)}"
                                        "<extra></extra>"})
    return make_figure(traces, title, f"T = {temperature:g} · {BY_POSITION.symbol}", style,
                       height=400 + 2 * style.font_size, margin={"t": 90},
                       xaxis={"title": {"text": "draft position i"}, "dtick": 1},
                       yaxis={"title": {"text": "accepted"}, "tickformat": ".0%", "range": [0, 1.05]})


def _points(ks: list[int], values: list[float | None], name: str, meta: str, color: str, hover: str,
            axes: dict[str, str]) -> dict[str, Any]:
    return {"type": "scatter", "mode": "markers", "x": ks, "y": values, "name": name, "meta": meta,
            "marker": {"color": color, "size": 11, "line": {"color": "#FFFFFF", "width": 1}},
            "hovertemplate": hover + "<extra></extra>", **axes}


def _fit_words(fit: Any, num_cells: int) -> str:
    if fit is None:
        return f"no model: these runs recorded no Σ min(p, q), so no {ALPHA.name} {ALPHA.symbol}"
    return (f"{ALPHA.name} {ALPHA.symbol} = Σₓ min(p(x), q(x)) = {alpha_text(fit.alpha)}, mean over {num_cells} k "
            f"(above the {ACCEPTANCE_RATE.label}, which also counts the drafts after a rejection, never checked)")
