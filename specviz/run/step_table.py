"""A step table's cells carry their column's name (`data-label`), so a narrow box can show the table another
way without losing a column (issue #33 item 3; the CSS: assets/specviz.css, "Step tables that fit").

A table as wide as its columns (the sampled draft-vs-target table needs about 63 em) overflowed a desktop's
876 px box, and on a phone only pos..verdict showed, the "why" scrolled out of sight. In a box under 64 em the
top alternatives move under their row, each named; under 46 em (a phone, a projector's large text) every row
is a stack of "name value" lines. Every column stays: none is dropped.

The p, q and min(1, p/q) cells of a sampled table (chain and tree) are written here too, so a ratio comes out
of its own row's shown digits or says why not (issue #33 item 2: 'q 0.009, p 0.008, min(1, p/q) 0.955'); the
CSS keeps each number on one line in a column as wide as its longest value (issue #41).
"""

from __future__ import annotations

import re
from html import escape, unescape

from specviz.quantities import probability_text, ratio_text
from specviz.tokens import number

_HEAD_CELL = re.compile(r"<th\b[^>]*>(.*?)</th>", re.S)
_ROW = re.compile(r"(<tr\b[^>]*>)(.*?)(</tr>)", re.S)


def column_names(head: str) -> list[str]:
    """The header row's column names as plain text ('q<br><small>draft prob</small>' -> 'q (draft prob)')."""
    names = []
    for cell in _HEAD_CELL.findall(head):
        main, _, small = cell.partition("<br>")
        small = re.sub(r"<[^>]+>", "", small).strip()
        names.append(re.sub(r"<[^>]+>", "", main).strip() + (f" ({small})" if small else ""))
    return names


def labelled(rows: str, names: list[str]) -> str:
    """`rows` (tr elements) with each td's column name as its data-label, in column order."""
    quoted = [escape(unescape(name), quote=True) for name in names]

    def label_row(row: re.Match) -> str:
        cells = iter(quoted)
        body = re.sub(r"<td\b", lambda _: f"<td data-label='{next(cells, '')}'", row.group(2))
        return row.group(1) + body + row.group(3)
    return _ROW.sub(label_row, rows)


def probability_cell(value: float | None) -> str:
    """A p or q cell's text: 3 significant digits below 0.1, so the ratio beside it comes out of its digits."""
    return number(None) if value is None else probability_text(value)


def ratio_cell(ratio: float | None, p: float | None, q: float | None, tested: bool = True) -> str:
    """The min(1, p/q) cell, saying so where the shown p and q do not give its digits. The note is a line of its
    own: under the row's numbers in the grid (not squeezed into the column: issue #41), under the value where a
    row stacks; an untested draft (`tested` False: unverified, after a rejection) gets none, no test used it."""
    shown, rounding = ratio_text(ratio, p, q)
    note = (f"<small class='sv-ratio-note'>min(1, p/q) {shown} is {escape(rounding)}</small>"
            if rounding and tested else "")
    return f"<td class='sv-col-test sv-ratio'><span class='sv-num'>{shown}</span>{note}</td>"
