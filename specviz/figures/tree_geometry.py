"""How big the draft tree's cells are on the screen, so its labels fit them (issue #33: a phone, a projector).

The tree figure (specviz/figures/tree.py) puts one depth per column; the chart's width is what the figure
style knows of the page (FigureStyle.line_px), so a column's width in pixels follows, and from it how many
characters of a token fit a cell and whether the "depth N" tick labels fit their column or must shorten to
the bare depth. A phone's tree is drawn at least style.TREE_MIN_PX wide (its box scrolls sideways), so a cell
holds a token of style.TOKEN_CHARS characters instead of two or three (issue #41). Where a cell is too narrow
for its node id and that many characters side by side (a phone, a projector's large text) the id goes on a line
of its own above the token and rows grow to hold two lines, so an id is never drawn over a token; elsewhere the
id is a tag at the cell's top-left corner, the token (anchored at the cell's right end) leaves it room, and a
row is only as tall as its one line needs. A step whose tokens do not all fit one line of a cell gets rows a
line taller, and those tokens go on two lines ('·palin' over 'drome', issue #41: cells cut '·palind…'). Monospace glyphs are MONO_EM font sizes wide (DejaVu Sans Mono and
its kin: 0.60); proportional text uses the style's CHAR_EM.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.style import CHAR_EM, MONO_EM, RIGHT_MARGIN, TITLE_INDENT, TOKEN_CHARS, TREE_MIN_PX, FigureStyle
from specviz.tokens import clip

LINE_EM = 1.25              # one line of text's height, in font sizes
DESKTOP_CHART_PX = 896      # a desktop chart's width when the style does not know the page's (style.VIEWS_SHARE)
MIN_ROW_PX = 30             # a row's height when its text needs less (desktop)
CELL_PAD_PX = 2             # kept clear on either side of a cell's text


@dataclass(frozen=True)
class TreeGeometry:
    """Pixel sizes of the tree's grid for one figure style and depth."""

    left_px: int            # the plot's left margin
    column_px: float        # one depth column's width
    row_px: int             # one row's height
    cell_chars: int         # characters of a token that fit a cell on one line
    stacked: bool           # node id on its own line above the token (a phone)

    def fits(self, text: str, size: int) -> bool:
        """True when `text` (proportional, at `size` px) fits one column with room to spare."""
        return len(text) * size * CHAR_EM <= self.column_px - 2 * CELL_PAD_PX


def id_tag_px(style: FigureStyle, digits: int) -> float:
    """The width of a node's id tag (tree.py's _node_ids: a bordered box at a cell's top-left corner)."""
    return digits * MONO_EM * id_tag_size(style) + 2 * (1 + 1) + 1      # border and pad each side, its shift


def id_tag_size(style: FigureStyle) -> int:
    return max(9, style.cell_font_size - 2)


def plot_px(style: FigureStyle) -> float:
    """The width of the tree's plot area (and of the gather panel under it), in pixels."""
    chart = DESKTOP_CHART_PX if style.line_px is None else style.line_px + TITLE_INDENT
    if style.narrow:
        chart = max(chart, TREE_MIN_PX)     # wider than a phone: the figure's box scrolls (style.SIZES_CSS)
    return chart - left_margin(style) - RIGHT_MARGIN


def left_margin(style: FigureStyle) -> int:
    """Room for the row labels: a phone's one-word ones, else the widest, 'verify forward', at the figure's font
    (at a projector's 18 px it took 139 of 110 px and ran off the figure's left edge)."""
    return 70 if style.narrow else max(110, int(len("verify forward") * CHAR_EM * style.font_size) + 14)


def fitted(label: str, width_px: float, size: int) -> str:
    """`label` (monospace, `size` px) cut with an ellipsis to what fits `width_px`; '' when not even two glyphs do."""
    chars = line_chars(width_px, size)
    return label if len(label) <= chars else (clip(label, chars) if chars >= 2 else "")


def line_chars(width_px: float, size: int) -> int:
    """How many monospace characters at `size` px fit one line of a cell `width_px` wide."""
    return int((width_px - 2 * CELL_PAD_PX) / (MONO_EM * size))


def whole_or_none(label: str, width_px: float, size: int) -> str:
    """`label` where all of it fits `width_px`, else '' (a row number cut to '0–…' says nothing; the tick under
    the cell and its hover still name it)."""
    return label if len(label) * MONO_EM * size <= width_px - 2 * CELL_PAD_PX else ""


def tree_geometry(style: FigureStyle, columns: int, cell_width: float, cell_height: float,
                  id_digits: int = 2, token_lines: int = 1) -> TreeGeometry:
    """The grid of a tree `columns` depths wide (the context's column included), whose cells take
    `cell_width` of a column and `cell_height` of a row; off a phone a cell's text leaves room on its left for
    an id tag of `id_digits` digits (the text is anchored at the cell's right end). `token_lines` 2: a token
    longer than a line of its cell goes on two (specviz/tokens.py two_lines), and every row holds the extra line."""
    column = max(1.0, plot_px(style) / columns)
    glyph = style.cell_font_size * MONO_EM
    beside = int((column * cell_width - id_tag_px(style, id_digits) - 2 * CELL_PAD_PX) / glyph)
    stacked = style.narrow or beside < TOKEN_CHARS        # the id above the token: both whole, never one on the other
    chars = max(2, int((column * cell_width - 2 * CELL_PAD_PX) / glyph) if stacked else beside)
    lines = (2 if stacked else 1) + token_lines - 1
    row = max(MIN_ROW_PX, int((lines * LINE_EM * style.cell_font_size + 2 * CELL_PAD_PX) / cell_height) + 1)
    return TreeGeometry(left_px=left_margin(style), column_px=column, row_px=row, cell_chars=chars, stacked=stacked)


def gather_row_px(style: FigureStyle) -> int:
    """One row of the KV gather's panel: a line of its (smaller) cell text and some air."""
    return max(MIN_ROW_PX, int(2.4 * style.cell_font_size))
