"""The draft tree's labels never drawn over each other (issue #33): at a phone's 390 px, at 1440 px and on a
projector (1280 px, large text), from the figure's own layout numbers (its height, margins, axis ranges and
domains, and the chart width the style knows), with text measured generously (monospace glyphs 0.6 font sizes
wide, proportional ones specviz.style.CHAR_EM). Every cell's text must sit inside its own cell (so no two cells'
texts can meet), every gather cell's label fits its cell, no cell text meets a node's id tag, and no two depth tick labels
meet. The browser's own check is tests/test_tour_browser.py."""

from __future__ import annotations

import html

import pytest

from specviz.figures.tree import CATEGORIES, CELL_HEIGHT, CELL_WIDTH, step_tree_figure
from specviz.figures.tree_gather import CELL, gather_tick_size
from specviz.figures.tree_geometry import LINE_EM, MONO_EM, plot_px
from specviz.style import CHAR_EM, TOKEN_CHARS, FigureStyle
from specviz.tokens import visible
from tree_factory import SHAPES, make_tree_step

# The Lab's stage T step the tour's chapter 8 shows: 16 nodes, 5 deep, a bonus token after node 10.
DEEP = ((None, 0, None, 1, 2, 1, 1, 3, 4, 5, 7, 7, 7, 9, 8, 8), (0, 1, 3, 7, 10))
SIZES = {"phone": (False, 390), "desktop": (False, 1440), "projector": (True, 1280)}


def boxes(fig, style: FigureStyle):
    """(cell boxes, cell text boxes, tick boxes) in pixels, each (left, right, top, bottom, what)."""
    layout = fig.layout
    left, top = layout.margin.l, layout.margin.t
    width = plot_px(style)          # a phone's tree is wider than the screen (its box scrolls)
    height = layout.height - top - layout.margin.b
    x0, x1 = layout.xaxis.range
    y_low, y_high = layout.yaxis.domain
    y0, y1 = layout.yaxis.range                   # reversed: row 0 at the top
    column = width / (x1 - x0)
    row = height * (y_high - y_low) / (y0 - y1)

    def px(x: float, y: float) -> tuple[float, float]:
        return left + (x - x0) * column, top + height * (1 - y_high) + (y - y1) * row

    cells, texts = [], []
    for trace in fig.data:
        if trace.meta not in CATEGORIES:
            continue
        size = trace.textfont.size
        for base, y, text in zip(trace.base, trace.y, trace.text):
            if base is None:
                continue
            cx, cy = px(base + CELL_WIDTH / 2, y)
            w, h = CELL_WIDTH * column, CELL_HEIGHT * row
            cells.append((cx - w / 2, cx + w / 2, cy - h / 2, cy + h / 2, text))
            lines = [html.unescape(line) for line in text.split("<br>")]
            tw, th = max(len(line) for line in lines) * MONO_EM * size, len(lines) * LINE_EM * size
            if trace.insidetextanchor == "end":         # Plotly keeps 3 px between the text and the bar's end
                texts.append((cx + w / 2 - 3 - tw, cx + w / 2 - 3, cy - th / 2, cy + th / 2, text))
            else:
                texts.append((cx - tw / 2, cx + tw / 2, cy - th / 2, cy + th / 2, text))
    for note in layout.annotations:                     # the id tags at the cells' top-left corners
        if note.name == "node id":
            x, y = px(note.x, note.y)
            x, y = x + note.xshift, y - note.yshift
            pad = note.borderpad + note.borderwidth
            w, h = len(note.text) * MONO_EM * note.font.size + 2 * pad, LINE_EM * note.font.size + 2 * pad
            texts.append((x, x + w, y, y + h, f"id tag {note.text}"))
    size = layout.font.size
    ticks = []
    for value, text in zip(layout.xaxis.tickvals, layout.xaxis.ticktext):
        cx, _ = px(value, 0)
        tw = len(text) * CHAR_EM * size
        ticks.append((cx - tw / 2, cx + tw / 2, 0, size, text))
    return cells, texts, ticks


def meet(a, b) -> bool:
    return min(a[1], b[1]) - max(a[0], b[0]) > 0 and min(a[3], b[3]) - max(a[2], b[2]) > 0


def problems(fig, style: FigureStyle) -> list[str]:
    cells, texts, ticks = boxes(fig, style)
    found = [f"cell text {t[4]!r} runs out of its cell" for c, t in zip(cells, texts)        # tags come last
             if t[0] < c[0] or t[1] > c[1] or t[2] < c[2] or t[3] > c[3]]
    found += [f"cell texts {a[4]!r} and {b[4]!r} meet" for i, a in enumerate(texts) for b in texts[i + 1:] if meet(a, b)]
    width = plot_px(style)                                                    # the gather's cells, one per slot
    slot = CELL * width / len(fig.layout.xaxis2.tickvals)
    found += [f"gather cell text {text!r} runs out of its {slot:.0f} px cell" for trace in fig.data
              if str(trace.meta).startswith("gather.") for text in trace.text
              if len(html.unescape(text)) * MONO_EM * trace.textfont.size > slot]
    found += [f"depth ticks {a[4]!r} and {b[4]!r} meet" for i, a in enumerate(ticks) for b in ticks[i + 1:] if meet(a, b)]
    return found


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("shape", (*SHAPES, DEEP))
def test_no_two_tree_labels_meet(size, shape):
    large, width = SIZES[size]
    style = FigureStyle.for_screen(large=large, width=width)
    step = make_tree_step(1, 50, *shape)
    assert problems(step_tree_figure(step, style), style) == []


def test_a_phone_cell_names_its_node_and_holds_a_seven_character_token():
    """Issue #41: a phone's tree is drawn wider than the screen (it scrolls), so its cells hold '·string' whole
    with the node id on the line above, and its depth labels are words again; a longer token ends in an ellipsis."""
    style = FigureStyle.for_screen(width=390)
    step = make_tree_step(1, 50, *DEEP)
    fig = step_tree_figure(step, style)
    texts = [text for trace in fig.data if trace.meta in ("accepted", "rejected", "unreached")
             for text in trace.text if text]
    assert sorted(int(text.split("<br>")[0]) for text in texts) == list(range(len(step.tree.nodes)))
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks == ["context", *(f"depth {d}" for d in range(1, len(ticks)))]
    tokens = {html.unescape(text.split("<br>")[1]) for text in texts}
    shown = {visible(node.token.text) for node in step.tree.nodes}
    assert all(token in shown or token.endswith("\u2026") and len(token) == TOKEN_CHARS for token in tokens), tokens
    assert all(token in tokens for token in shown if len(token) <= TOKEN_CHARS)
    # and the caption's first line says to swipe (a student saw the tree stop at depth 2 with no way on); a screen
    # as wide as the tree needs no such line
    assert fig.layout.title.subtitle.text.startswith("Swipe the tree sideways")
    wide = step_tree_figure(step, FigureStyle.for_screen(width=1440))
    assert "Swipe" not in wide.layout.title.subtitle.text


def test_a_planted_overlap_is_caught(monkeypatch):
    """On a phone's tree squeezed into the screen again (no TREE_MIN_PX): labels cut three characters longer than
    the cells hold, and the long depth labels kept; a projector's tokens beside their id tags, centred under them; the
    gather's labels left uncut on a projector: caught."""
    style = FigureStyle.for_screen(width=390)
    step = make_tree_step(1, 50, *DEEP)
    import specviz.figures.tree as tree
    import specviz.figures.tree_geometry as geometry
    monkeypatch.setattr(geometry, "TREE_MIN_PX", 0)              # the phone's tree squeezed into its screen again
    real = tree.tree_geometry
    monkeypatch.setattr(tree, "tree_geometry", lambda *a, **kw: real(*a, **kw).__class__(
        **{**real(*a, **kw).__dict__, "cell_chars": real(*a, **kw).cell_chars + 3}))
    assert any("runs out of its cell" in p for p in problems(step_tree_figure(step, style), style))
    monkeypatch.setattr(tree, "tree_geometry", real)
    monkeypatch.setattr(tree, "_depth_ticks", lambda depth, grid, style: ["context", *(f"depth {d}" for d in range(1, depth + 1))])
    assert any("depth ticks" in p for p in problems(step_tree_figure(step, style), style))
    monkeypatch.undo()
    monkeypatch.setattr(geometry, "TOKEN_CHARS", 0)              # a projector's id tags beside the tokens again
    projector = FigureStyle.for_screen(large=True, width=1280)
    centred = step_tree_figure(step, projector)
    for trace in centred.data:
        if trace.meta in ("accepted", "rejected", "unreached"):
            trace.insidetextanchor = "middle"
    assert any("id tag" in p for p in problems(centred, projector))
    import specviz.figures.tree_gather as gather
    monkeypatch.setattr(gather, "whole_or_none", lambda label, width, size: label)      # the block's '0–49' uncut
    assert any("gather cell text" in p for p in problems(step_tree_figure(step, projector), projector))


@pytest.mark.parametrize("size", list(SIZES))
def test_the_gathers_cached_rows_read_on_one_line_where_they_fit(size):
    """'0–51' under the cached block, not '0–' over '51' (a student read it as a number cut in two), wherever the
    column holds it at the tick's font; broken after the dash only where it cannot (the sizes browser test measures
    that no tick runs into another)."""
    large, width = SIZES[size]
    style = FigureStyle.for_screen(large=large, width=width)
    step = make_tree_step(1, 50, *DEEP)
    ticks = list(step_tree_figure(step, style).layout.xaxis2.ticktext)
    whole = ticks[0].replace("<br>", "")
    fits = len(whole) * CHAR_EM * gather_tick_size(style) <= plot_px(style) / len(ticks) - 2
    assert whole == f"0–{step.kv_target.before - 1}" and ("<br>" not in ticks[0]) == fits


LONG_TOKENS = {3: " palindrome", 7: " considering", 10: " representing"}     # 11, 12 and 13 characters shown


@pytest.mark.parametrize("size", list(SIZES))
def test_a_long_token_is_drawn_whole_on_two_lines_of_its_cell(size):
    """Issue #41: tree cells cut tokens longer than a line of the cell ('·palind…'). A step with such tokens gets rows
    a line taller, the tokens go on two lines, and every label still fits its cell and meets no other."""
    import dataclasses
    large, width = SIZES[size]
    style = FigureStyle.for_screen(large=large, width=width)
    step = make_tree_step(1, 50, *DEEP)
    nodes = tuple(dataclasses.replace(node, token=dataclasses.replace(node.token, text=LONG_TOKENS[node.id]))
                  if node.id in LONG_TOKENS else node for node in step.tree.nodes)
    bonus = dataclasses.replace(step.emitted[-1], text=" ignoring")                # the token after the leaf
    long_step = dataclasses.replace(step, tree=dataclasses.replace(step.tree, nodes=nodes),
                                    emitted=(*step.emitted[:-1], bonus))
    fig = step_tree_figure(long_step, style)
    assert problems(fig, style) == []
    texts = [html.unescape(text) for trace in fig.data if trace.meta in ("accepted", "rejected", "unreached", "bonus")
             for text in trace.text if text]
    lines = [text.split("<br>")[1:] if text.split("<br>")[0].isdigit() else text.split("<br>") for text in texts]
    shown = {"".join(parts) for parts in lines}
    assert {visible(text) for text in (*LONG_TOKENS.values(), bonus.text)} <= shown
    assert any(len(parts) == 2 for parts in lines)
    assert fig.layout.height > step_tree_figure(step, style).layout.height       # rows a line taller
