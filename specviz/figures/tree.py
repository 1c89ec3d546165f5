"""Draft tree of one step (issue #19): depth left to right, siblings stacked, the accepted path highlighted.

Each candidate token is a cell at its depth, tagged with its node id (the ids the step's text
names); a node's children sit in the rows from its own row down, in the draft's ranking, so the top
row is the line of the draft's first choices (what a chain would draft) and every row below it is a
sibling the tree added. Cells say what the target did: accepted (solid), rejected (tried and
refused: hatched), unreached (never tried: pale, cross-hatched, since its parent was refused or a
sibling before it was accepted). After the path comes the token the target adds itself: *recovered*
(every child of the stop node was rejected; drawn in its own row under them) or *bonus* (the stop
node is a leaf). Under the tree, the KV gather: the target cache's rows before and after it, with an
arrow from each kept row's place to its new one (specviz/figures/tree_gather.py). The title's caption
says what happened, whether a sibling rescued the step, and what the gather kept
(specviz/figures/tree_text.py). Every kind has its own fill pattern (specviz/style.py PATTERNS).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from engine.records import EmittedToken, StepRecord, TreeNode
from engine.formats.trace import Trace
from specviz.figures.common import Figure, LEGEND_ROOM, empty_figure, make_figure, wrap
from specviz.figures.tree_gather import AFTER_FORWARD, AFTER_GATHER, gather_panel, gather_tick_size
from specviz.figures.tree_geometry import (TreeGeometry, fitted, gather_row_px, id_tag_size, line_chars,
                                           tree_geometry)
from specviz.figures.tree_text import (extra_token, ordinal, pending_rows, ranked_children, rescue_sentence,
                                       sibling_ranks, stop_node, tree_summary)
from specviz.quantities import probability_text
from specviz.run.step_detail import find_step
from specviz.style import COLORS, TEXT_ON, TITLE_INDENT, TREE_LABELS, TREE_MIN_PX, FigureStyle, pattern
from specviz.tokens import number, two_lines, visible

TITLE = "Draft tree"
CELL_WIDTH = 0.8            # of one depth column
CELL_HEIGHT = 0.78          # of one row
ROOT = "context"
CATEGORIES = ("accepted", "rejected", "unreached", "recovered", "bonus", ROOT)
NODE_KINDS = ("accepted", "rejected", "unreached")       # the cells that carry an id tag
NAMES = {**{kind: TREE_LABELS[kind] for kind in ("accepted", "rejected", "recovered", "bonus")},
         "unreached": TREE_LABELS["unverified"], ROOT: "committed text"}
FILLS = {"accepted": COLORS["accepted"], "rejected": COLORS["rejected"], "unreached": COLORS["unreached"],
         "recovered": COLORS["recovered"], "bonus": COLORS["bonus"], ROOT: COLORS["committed"]}
TEXTS = {**TEXT_ON, "unreached": "#555555", ROOT: "#FFFFFF"}
STYLE_KIND = {"accepted": "accepted", "rejected": "rejected", "unreached": "unverified", "recovered": "recovered",
              "bonus": "bonus", ROOT: "committed"}             # each cell's pattern: specviz/style.py PATTERNS
GATHER_AXIS = "target KV cache row"
SCROLL_HINT = "Swipe the tree sideways: it is wider than this screen."
DESKTOP_CHARS = 120         # caption characters per line when the screen's width is unknown
GATHER_TITLE = ("<b>The KV gather</b>: the target kept the pending row{s} and the accepted path's rows, each moved "
                "from its row after the verify forward to its row after the gather (arrows); the rest were cropped")


@dataclass
class _Cells:
    x: list[float] = field(default_factory=list)
    y: list[int] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    hover: list[str] = field(default_factory=list)


def is_tree_trace(trace: Trace | None) -> bool:
    """True for a tree run's trace. Its config says so: every step of a tree run records its tree and
    no step of a chain run does (the trace reader refuses anything else, engine/formats/trace_tree.py)."""
    return trace is not None and trace.config.is_tree


def tree_figure(trace: Trace | None, selected_step: int | None = None, style: FigureStyle = FigureStyle()) -> Figure:
    """The tree of the step whose index is `selected_step` (None: the newest step)."""
    if trace is None or not trace.steps:
        return empty_figure(TITLE, "No steps yet: press Run.", style)
    step = find_step(trace, selected_step)
    if step.tree is None:
        return empty_figure(f"{TITLE}, step {step.index}", "This step drafted no tree (a chain step).", style)
    return step_tree_figure(step, style)


def step_tree_figure(step: StepRecord, style: FigureStyle = FigureStyle()) -> Figure:
    """The figure for one tree step (see the module docstring): the tree above, the KV gather below."""
    tree = step.tree
    assert tree is not None, "step_tree_figure needs a tree step"
    extra = extra_token(step)
    rows = _rows(step, extra)
    stop = stop_node(tree)
    stop_depth = 0 if stop is None else _node(step, stop).depth
    depth = max(max((node.depth for node in tree.nodes), default=0), stop_depth + (extra is not None))
    cells = {name: _Cells() for name in CATEGORIES}
    digits = len(str(max(len(tree.nodes) - 1, 0)))
    grid = tree_geometry(style, max(depth, 3) + 1, CELL_WIDTH, CELL_HEIGHT, digits)
    whole = CELL_WIDTH * grid.column_px           # the context's and the extra token's cells carry no id tag
    extra_chars = line_chars(whole, style.cell_font_size)
    if (any(len(visible(node.token.text)) > grid.cell_chars for node in tree.nodes)      # a token on two lines
            or (extra is not None and len(visible(extra.text)) > extra_chars)):
        grid = tree_geometry(style, max(depth, 3) + 1, CELL_WIDTH, CELL_HEIGHT, digits, token_lines=2)
    _add(cells[ROOT], 0, 0, fitted(ROOT, whole, style.cell_font_size), _root_hover(step))
    ranks = sibling_ranks(tree)
    for node in tree.nodes:       # a cell too small for an id tag beside its token: the id is the cell's first line
        token = "\n".join(two_lines(visible(node.token.text), grid.cell_chars))
        text = f"{node.id}\n{token}" if grid.stacked else token
        _add(cells[node.verdict], node.depth, rows[node.id], text, _node_hover(step, node, ranks[node.id]))
    if extra is not None:
        _add(cells[extra.kind], stop_depth + 1, rows["extra"],
             "\n".join(two_lines(visible(extra.text), extra_chars)) if extra_chars >= 2 else "",
             _extra_hover(step, extra))
    gather_traces, gather_notes, gather_ticks = gather_panel(step, style)
    bars = [_bar(name, cell, style, grid.stacked) for name, cell in cells.items()]
    traces = _edges(step, rows, extra) + bars + gather_traces
    count = 1 + max(rows.values())
    # a phone's tree is wider than its screen (its box scrolls): the first line says so (issue #41: a student saw
    # the tree cut after depth 2 and no way on)
    scrolls = style.narrow and (style.line_px is None or style.line_px + TITLE_INDENT < TREE_MIN_PX)
    sentences = [SCROLL_HINT if scrolls else "", tree_summary(step), rescue_sentence(step), _gather_words(step)]
    caption = wrap("<br>".join(html.escape(line, quote=False) for line in sentences if line),
                   style.line_chars(style.font_size) or DESKTOP_CHARS)       # counted, to size the top margin
    lines = caption.split("<br>")
    row_px = grid.row_px
    top = 50 + len(lines) * int(style.font_size * 1.5)           # title and caption
    bottom = 60 + LEGEND_ROOM + (2 * LEGEND_ROOM if style.narrow else 0)   # axis title, legend (a phone: a key a row)
    tree_px = max(count, 2) * row_px + 20
    panel_title = GATHER_TITLE.format(s="s" * (pending_rows(step.kv_target, step.tree) != 1))
    title_lines = wrap(panel_title, style.line_chars(style.font_size, bold=True) or DESKTOP_CHARS).count("<br>") + 1
    # the depth ticks and the axis title (a line each), then the gather's title: no more, so a projector's
    # figure is as short as its text allows (issue #33; at 1280 x 720 the gather still sits under the tour's sheet)
    gap_px = 36 + int((2 + title_lines) * style.font_size * 1.5)
    # two rows of cells a row apart, so the arrows between them stand apart (issue #41: bunched), their row numbers
    gather_px = (AFTER_FORWARD - AFTER_GATHER + 1) * gather_row_px(style) + 40 + 2 * style.font_size
    plot_px = tree_px + gap_px + gather_px
    tree_share, gather_share = tree_px / plot_px, gather_px / plot_px
    depth_title = ("depth: tokens after the committed text" if grid.fits("context", style.font_size)
                   else "depth (0: the committed text)")          # a phone: short enough for its width
    gather_tick = gather_tick_size(style)
    depth_axis, gather_axis, axis_notes = _axis_titles(depth_title, gather_tick, style)
    return make_figure(
        traces, f"{TITLE}, step {step.index}", caption, style,
        height=top + bottom + plot_px, barmode="overlay", dragmode="pan",
        hoverlabel={"align": "left"}, margin={"t": top, "b": bottom, "l": grid.left_px},
        **({"legend": {"orientation": "v"}} if style.narrow else {}),   # a phone's figure scrolls: keys in one column
        xaxis={"tickvals": list(range(depth + 1)), "ticktext": _depth_ticks(depth, grid, style), "tickangle": 0,
               "range": [-0.5, max(depth, 3) + 0.5], "showgrid": False, "zeroline": False, "fixedrange": True,
               "title": {"text": depth_axis}, "anchor": "y"},
        yaxis={"tickvals": [0], "ticktext": ["draft's<br>1st<br>choices" if style.narrow else "draft's 1st<br>choices"],
               "range": [count - 0.45, -0.55],
               "showgrid": False, "zeroline": False, "fixedrange": True, "domain": [1 - tree_share, 1.0]},
        xaxis2={"showgrid": False, "zeroline": False, "fixedrange": True, "anchor": "y2",
                "tickfont": {"size": gather_tick}, "title": {"text": gather_axis},
                **gather_ticks},
        yaxis2={"tickvals": [AFTER_FORWARD, AFTER_GATHER], "ticktext": (["forward", "gather"] if style.narrow
                                                 else ["after the<br>verify forward", "after the<br>gather"]),
                "range": [AFTER_GATHER - 0.6, AFTER_FORWARD + 0.6], "showgrid": False, "zeroline": False,
                "fixedrange": True, "domain": [0.0, gather_share], "anchor": "x2"},
        annotations=(([] if grid.stacked else _node_ids(step, rows, style)) + gather_notes
                     + [_panel_title(panel_title, gather_share, style)]
                     + axis_notes),
        shapes=[{"type": "rect", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": -0.5, "y1": 0.5,
                 "fillcolor": "rgba(0,0,0,0.04)", "line": {"width": 0}, "layer": "below"}])


def _depth_ticks(depth: int, grid: TreeGeometry, style: FigureStyle) -> list[str]:
    """'context', 'depth 1', ... where they fit a column; else the bare depths (the axis title says what 0 is),
    so no two tick labels can be drawn over each other however narrow the screen."""
    words = ["context", *(f"depth {d}" for d in range(1, depth + 1))]
    return words if all(grid.fits(word, style.font_size) for word in words) else [str(d) for d in range(depth + 1)]


def _gather_words(step: StepRecord) -> str:
    """The caption's line on the gather (the panel below draws it row by row)."""
    cache, tree = step.kv_target, step.tree
    pending = pending_rows(cache, tree)
    kept = cache.after_cutoff - cache.before - pending
    if not tree.nodes:
        return ""
    if not kept:
        return f"The KV gather (below) cropped all {len(tree.nodes)} node rows: no node is on an accepted path."
    return (f"The KV gather (below) kept the {kept} accepted path row{'s' * (kept != 1)} (node"
            f"{'s' * (kept != 1)} {', '.join(str(n) for n in tree.path[:kept])}), moved into place after the "
            f"pending row{'s' * (pending != 1)}, and cropped the other {cache.cutoff}.")


def _axis_titles(depth_title: str, gather_tick: int, style: FigureStyle) -> tuple[str, str, list[dict[str, Any]]]:
    """The tree's and the gather's axis titles: Plotly's own (centred under their plots), or on a phone none of
    those but two notes under the tick labels at the plot's left edge. A phone's figure is TREE_MIN_PX wide in a
    box that scrolls, so titles centred on the whole figure sat half out of the part on screen (issue #41:
    "depth: tokens after" and "target KV" cut at the screen's edge)."""
    if not style.narrow:
        return depth_title, GATHER_AXIS, []
    below = {"showarrow": False, "xref": "paper", "x": 0.0, "xanchor": "left", "yanchor": "top", "align": "left",
             "font": {"size": style.font_size, "color": "#222222"}, "captureevents": False}
    depth = {**below, "text": depth_title, "yref": "y domain", "y": 0.0, "yshift": -int(1.5 * style.font_size + 8)}
    gather = {**below, "text": GATHER_AXIS, "yref": "y2 domain", "y": 0.0,
              "yshift": -int(2 * 1.3 * gather_tick + 10)}                  # under a two-line '0–<br>63' tick
    return "", "", [{**depth, "name": "axis title"}, {**gather, "name": "axis title"}]


def _panel_title(text: str, gather_share: float, style: FigureStyle) -> dict[str, Any]:
    return {"text": text, "showarrow": False, "xref": "paper", "yref": "paper", "x": 0.0, "xanchor": "left",
            "y": gather_share, "yanchor": "bottom", "yshift": 12, "align": "left",
            "font": {"size": style.font_size, "color": "#222222"}, "name": "panel title"}


def _node_ids(step: StepRecord, rows: dict[Any, int], style: FigureStyle) -> list[dict[str, Any]]:
    """Each node's id in a small white tag at its cell's top-left corner: the ids the text names."""
    return [{"x": node.depth - CELL_WIDTH / 2, "y": rows[node.id] - CELL_HEIGHT / 2, "xref": "x", "yref": "y",
             "text": str(node.id), "showarrow": False, "xanchor": "left", "yanchor": "top", "xshift": 1,
             "yshift": -1, "bgcolor": "#FFFFFF", "bordercolor": "#222222", "borderwidth": 1, "borderpad": 1,
             "font": {"size": id_tag_size(style), "color": "#222222", "family": "monospace"},
             "captureevents": False, "name": "node id"} for node in step.tree.nodes]


def _rows(step: StepRecord, extra: EmittedToken | None) -> dict[Any, int]:
    """Row of every node (and of the extra token, key "extra"): a node shares its first child's row,
    later children take the next free rows, so the first choices line up in row 0."""
    tree = step.tree
    children: dict[Any, list[Any]] = {key: [c.id for c in kids] for key, kids in ranked_children(tree).items()}
    if extra is not None:
        children.setdefault(stop_node(tree), []).append("extra")
    rows: dict[Any, int] = {}
    free = 0

    def place(key: Any) -> int:
        nonlocal free
        kids = children.get(key, [])
        if not kids:
            rows[key], free = free, free + 1
            return rows[key]
        first = [place(kid) for kid in kids][0]
        rows[key] = first
        return first

    place(None)
    rows.pop(None, None)
    return rows


def _edges(step: StepRecord, rows: dict[Any, int], extra: EmittedToken | None) -> list[dict[str, Any]]:
    """Elbow lines from each parent's cell to its children's, in the gap between the columns."""
    tree = step.tree
    on_path = set(tree.path)
    groups: dict[str, tuple[list, list]] = {name: ([], []) for name in ("edge", "path", "extra")}   # x, y
    links = [(node.parent, node.id, node.depth, "path" if node.id in on_path else "edge") for node in tree.nodes]
    if extra is not None:
        stop = stop_node(tree)
        links.append((stop, "extra", 1 if stop is None else _node(step, stop).depth + 1, "extra"))
    for parent, child, depth, group in links:
        parent_row = 0 if parent is None else rows[parent]
        xs, ys = groups[group]
        start, middle, end = depth - 1 + CELL_WIDTH / 2, depth - 0.5, depth - CELL_WIDTH / 2
        xs += [start, middle, middle, end, None]
        ys += [parent_row, parent_row, rows[child], rows[child], None]
    lines = {"edge": {"color": "#B0B0B0", "width": 1.5}, "path": {"color": COLORS["accepted"], "width": 4},
             "extra": {"color": COLORS[extra.kind] if extra else "#999999", "width": 3, "dash": "dot"}}
    names = {"edge": "drafted link", "path": "accepted path", "extra": "the target's token after the path"}
    return [{"type": "scatter", "mode": "lines", "x": xs, "y": ys, "name": names[group], "meta": f"tree.{group}",
             "line": lines[group], "hoverinfo": "skip", "showlegend": group == "path"}
            for group, (xs, ys) in groups.items() if xs]


def _add(cells: _Cells, depth: int, row: int, text: str, hover: str) -> None:
    cells.x.append(depth)
    cells.y.append(row)
    cells.text.append(html.escape(text, quote=False).replace("\n", "<br>"))   # a phone's id line
    cells.hover.append(hover)


def _bar(name: str, cells: _Cells, style: FigureStyle, stacked: bool) -> dict[str, Any]:
    """One category's cells as horizontal bars (an empty category keeps its legend entry); a node's token sits
    at its cell's right end, clear of the id tag at its left, unless the id is the text's first line (`stacked`)."""
    if not cells.x:
        cells = _Cells(x=[None], y=[None], text=[""], hover=[""])  # type: ignore[list-item]
    marker: dict[str, Any] = {"color": FILLS[name], "line": {"width": 0}}
    if pattern(STYLE_KIND[name]):       # patterned as well as coloured: no colour needed to tell kinds apart
        marker["pattern"] = pattern(STYLE_KIND[name])
    if name in ("recovered", "bonus"):
        marker["line"] = {"width": 2, "color": "#222222"}
    return {"type": "bar", "orientation": "h", "name": NAMES[name], "meta": name, "y": cells.y,
            "x": [CELL_WIDTH] * len(cells.x), "base": [None if x is None else x - CELL_WIDTH / 2 for x in cells.x],
            "width": CELL_HEIGHT, "text": cells.text, "hovertext": cells.hover,
            "hovertemplate": "%{hovertext}<extra></extra>", "marker": marker, "textposition": "inside",
            "insidetextanchor": "end" if name in NODE_KINDS and not stacked else "middle", "textangle": 0,
            "constraintext": "none", "cliponaxis": False, "textfont": {"color": TEXTS[name], "size": style.cell_font_size, "family": "monospace"}}


def _node(step: StepRecord, node_id: int) -> TreeNode:
    return step.tree.nodes[node_id]            # a node's id is its index (engine/formats/trace_tree.py)


def _token(text: str) -> str:
    return html.escape(visible(text), quote=False)


def _root_hover(step: StepRecord) -> str:
    return (f"<b>step {step.index}: the committed text</b> ({step.context_len} tokens)<br>"
            "every depth-1 cell is a candidate for the next token")


def _node_hover(step: StepRecord, node: TreeNode, rank: int) -> str:
    """`rank`: 1 when the node is the draft's first choice among its siblings, 2 for the second, ..."""
    parent = ("the committed text" if node.parent is None
              else f"node {node.parent} ‘{_token(_node(step, node.parent).token.text)}’")
    lines = [f"<b>node {node.id}, depth {node.depth}: ‘{_token(node.token.text)}’</b> ({node.verdict})",
             f"after {parent}; the draft's {ordinal(rank)} choice there",
             f"q (draft prob) = {probability_text(node.q)}", f"p (target prob) = {probability_text(node.p)}"]
    if node.verdict == "unreached":
        lines.append("never tried: its parent was not accepted, or a sibling tried before it was")
    elif node.accept_prob is None:
        lines.append("greedy: accepted" if node.verdict == "accepted" else "greedy: rejected, not the target's argmax")
        if node.verdict == "accepted":
            lines[-1] += ", it is the target's argmax"
    else:
        renormalised = " (p with the siblings refused before it removed, renormalised)" if rank > 1 else ""
        lines.append(f"accepted with probability {probability_text(node.accept_prob)}{renormalised}")
        if node.draw is not None:
            lines.append(f"random draw u = {number(node.draw)} ("
                         + ("u < that: accept" if node.verdict == "accepted" else "u ≥ that: reject") + ")")
    return "<br>".join(lines)


def _extra_hover(step: StepRecord, extra: EmittedToken) -> str:
    stop = stop_node(step.tree)
    where = "the committed text" if stop is None else f"node {stop}"
    why = (f"every child of {where} was rejected, so the target's own token was drawn from what is left of p "
           "(greedy: its argmax)" if extra.kind == "recovered"
           else f"{where} is a leaf: the same target forward gave the distribution after it, so this token is free")
    return f"<b>step {step.index}: ‘{_token(extra.text)}’</b> ({extra.kind})<br>{why}"
