"""The KV gather of a tree step, drawn as cache rows (issue #27): which rows the target kept, from -> to.

Two rows of cells under the tree (specviz/figures/tree.py puts them on its second pair of axes). Top:
the target cache after the verify forward: the rows cached before the step (one block), the pending
rows (the tokens committed but not yet cached; the whole prompt in step 0), then one row per tree node,
node i at row first + i, each drawn like its cell in the tree (accepted, rejected, unreached). Bottom:
the same cache after the gather: the accepted path's rows copied, in path order, to the rows right after
the pending ones, the rest cropped. An arrow runs from each kept row's place before to its place after,
labelled with its row numbers (tree_text.gather_moves). Every cell shows its node id, as the tree does, whole
or not at all where a cell is too narrow for it (the tick under it and its hover still say which row it is:
issue #41, '0–…'). The two rows stand a row apart so that the arrows between them fan out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.records import StepRecord
from specviz.figures.tree_geometry import plot_px, whole_or_none
from specviz.figures.tree_text import gather_moves, pending_rows
from specviz.style import CHAR_EM, COLORS, FigureStyle, pattern

AFTER_FORWARD, AFTER_GATHER = 2, 0              # the two rows' y: a row apart, so the arrows fan out
CELL = 0.84                                     # a slot's width taken by its cell
KIND_FILLS = {"accepted": COLORS["accepted"], "rejected": COLORS["rejected"], "unreached": COLORS["unreached"],
              "cached": "#FFFFFF", "pending": COLORS["committed"]}
KIND_STYLE = {"accepted": "accepted", "rejected": "rejected", "unreached": "unverified", "cached": "",
              "pending": "committed"}
KIND_NAMES = {"cached": "cached before the step", "pending": "pending (committed, not yet cached)"}
TEXT_COLORS = {"accepted": "#FFFFFF", "rejected": "#FFFFFF", "unreached": "#333333", "cached": "#222222",
               "pending": "#FFFFFF"}


@dataclass(frozen=True)
class Slot:
    """One drawn cell of a row: the cache rows it stands for and what they hold."""

    x: int                                      # the slot's place on the panel's axis
    first_row: int
    last_row: int
    kind: str                                   # cached | pending | accepted | rejected | unreached
    label: str                                  # what the cell says: a node id, 'p', or the block's rows
    hover: str


def gather_panel(step: StepRecord, style: FigureStyle) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                 dict[str, Any]]:
    """(traces, annotations, tick settings) of the gather panel, on axes x2 / y2."""
    tree, cache = step.tree, step.kv_target
    assert tree is not None, "gather_panel needs a tree step"
    moves = gather_moves(cache, step)
    pending = pending_rows(cache, tree)
    first = cache.before + pending
    top: list[Slot] = []
    if cache.before:
        top.append(Slot(0, 0, cache.before - 1, "cached", f"0–{cache.before - 1}",
                        f"rows 0–{cache.before - 1}: the committed text, cached before this step"))
    what = "the prompt, fed in this step's forward (the prefill)" if cache.before == 0 else \
        "committed last step, fed with this step's verify forward"
    if pending:
        top.append(Slot(len(top), cache.before, first - 1, "pending",
                        "p" if pending == 1 else f"{cache.before}–{first - 1}",
                        f"row{'s' * (pending != 1)} {cache.before}{'' if pending == 1 else f'–{first - 1}'}: "
                        f"{pending} pending token{'s' * (pending != 1)}, {what}"))
    node_x = {}
    for node in tree.nodes:
        node_x[node.id] = len(top)
        kept = any(node_id == node.id for node_id, _, _ in moves)
        top.append(Slot(len(top), first + node.id, first + node.id, node.verdict, str(node.id),
                        f"row {first + node.id}: node {node.id} ({node.verdict}), depth {node.depth}; "
                        + ("kept by the gather" if kept else "cropped by the gather")))
    bottom = [slot for slot in top if slot.kind in ("cached", "pending")]
    for node_id, before, after in moves:
        bottom.append(Slot(node_x[0] + (after - first), after, after, "accepted", str(node_id),
                           f"row {after}: node {node_id}, moved from row {before}"
                           + (" (already in place: no copy)" if before == after else "")))
    cell_px = CELL * plot_px(style) / len(top)          # a label cut to its cell (a phone's are ~11 px wide)
    traces = [_cells(kind, [s for s in top if s.kind == kind], AFTER_FORWARD, style, cell_px) for kind in KIND_STYLE]
    traces += [_cells(kind, [s for s in bottom if s.kind == kind], AFTER_GATHER, style, cell_px) for kind in KIND_STYLE]
    arrows = [{"x": node_x[0] + (after - first), "y": AFTER_GATHER + CELL / 2, "ax": node_x[node_id],
               "ay": AFTER_FORWARD - CELL / 2, "xref": "x2", "yref": "y2", "axref": "x2", "ayref": "y2",
               "showarrow": True, "arrowhead": 2, "arrowsize": 1.2, "arrowwidth": 2, "arrowcolor": "#222222",
               "text": ""} for node_id, before, after in moves if before != after]
    if not moves:
        arrows.append({"x": len(top) - 1, "y": AFTER_GATHER, "xref": "x2", "yref": "y2", "showarrow": False,
                       "xanchor": "right", "text": f"no node kept: all {len(tree.nodes)} rows cropped",
                       "font": {"size": style.font_size, "color": "#555555"}})
    column_px = plot_px(style) / len(top)
    ticks = {"tickvals": [slot.x for slot in top],
             "ticktext": [_rows(slot, column_px, gather_tick_size(style)) for slot in top],
             "range": [-0.6, len(top) - 0.4]}
    return [trace for trace in traces if trace is not None], arrows, ticks


def gather_tick_size(style: FigureStyle) -> int:
    """The gather's row numbers' font size (tree.py's axis uses it too)."""
    return max(9, style.font_size - 3)


def _rows(slot: Slot, column_px: float, size: int) -> str:
    """A cell's row number, or its block's first–last rows: on one line where it fits its column, else broken
    after the dash (a student read '0–' / '51' as a number cut in two where one line had room)."""
    if slot.first_row == slot.last_row:
        return str(slot.first_row)
    whole = f"{slot.first_row}–{slot.last_row}"
    return whole if len(whole) * CHAR_EM * size <= column_px - 2 else f"{slot.first_row}–<br>{slot.last_row}"


def _cells(kind: str, slots: list[Slot], y: int, style: FigureStyle, cell_px: float) -> dict[str, Any] | None:
    if not slots:
        return None
    size = max(9, style.cell_font_size - 2)
    marker: dict[str, Any] = {"color": KIND_FILLS[kind], "line": {"width": 1, "color": "#888888"}}
    if KIND_STYLE[kind] and pattern(KIND_STYLE[kind]):
        marker["pattern"] = pattern(KIND_STYLE[kind], size=7)
    which = "after the verify forward" if y == AFTER_FORWARD else "after the gather"
    return {"type": "bar", "orientation": "v", "x": [slot.x for slot in slots], "y": [CELL] * len(slots),
            "base": [y - CELL / 2] * len(slots), "width": CELL, "xaxis": "x2", "yaxis": "y2",
            "meta": f"gather.{kind}.{'before' if y == AFTER_FORWARD else 'after'}",
            "name": KIND_NAMES.get(kind, kind), "showlegend": False, "marker": marker,
            "text": [whole_or_none(slot.label, cell_px, size) for slot in slots], "textposition": "inside",
            "insidetextanchor": "middle",
            "textangle": 0, "constraintext": "none", "cliponaxis": False,
            "textfont": {"color": TEXT_COLORS[kind], "size": size, "family": "monospace"},
            "hovertext": [f"<b>{which}</b><br>{slot.hover}" for slot in slots],
            "hovertemplate": "%{hovertext}<extra></extra>"}
