"""How big the draft tree's cells are on the screen, so its labels fit them (issue #33: a phone, a projector).

The tree figure (specviz/figures/tree.py) puts one depth per column; the chart's width is what the figure
style knows of the page (FigureStyle.line_px), so a column's width in pixels follows, and from it how many
characters of a token fit a cell and whether the "depth N" tick labels fit their column or must shorten to
the bare depth. On a phone a cell is too narrow for its node id and its token side by side, so the id goes
on a line of its own above the token and rows grow to hold two lines. Monospace glyphs are MONO_EM font
sizes wide (DejaVu Sans Mono and its kin: 0.60); proportional text uses the style's CHAR_EM.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.style import CHAR_EM, TITLE_INDENT, FigureStyle

MONO_EM = 0.6               # one monospace glyph's width, in font sizes
LINE_EM = 1.25              # one line of text's height, in font sizes
DESKTOP_CHART_PX = 896      # a desktop chart's width when the style does not know the page's (style.VIEWS_SHARE)
RIGHT_MARGIN = 16           # figures/common.py's right margin
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


def tree_geometry(style: FigureStyle, columns: int, cell_width: float, cell_height: float) -> TreeGeometry:
    """The grid of a tree `columns` depths wide (the context's column included), whose cells take
    `cell_width` of a column and `cell_height` of a row."""
    left = 70 if style.narrow else 110
    chart = DESKTOP_CHART_PX if style.line_px is None else style.line_px + TITLE_INDENT
    column = max(1.0, (chart - left - RIGHT_MARGIN) / columns)
    glyph = style.cell_font_size * MONO_EM
    chars = max(2, int((column * cell_width - 2 * CELL_PAD_PX) / glyph))
    lines = 2 if style.narrow else 1
    row = max(30 + 2 * (style.cell_font_size - 12),
              int((lines * LINE_EM * style.cell_font_size + 2 * CELL_PAD_PX) / cell_height) + 1)
    return TreeGeometry(left_px=left, column_px=column, row_px=row, cell_chars=chars, stacked=style.narrow)
