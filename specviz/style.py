"""Colours, labels and font sizes shared by every figure and HTML view.

The palette is Okabe-Ito (safe for the common colour-vision deficiencies); each
verdict also differs in lightness, so a greyscale projector still separates them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# Token cell categories: the three draft verdicts plus the two kinds of target token.
CATEGORIES = ("accepted", "rejected", "unverified", "recovered", "bonus")

COLORS = {
    "accepted": "#009E73",     # bluish green
    "rejected": "#D55E00",     # vermillion
    "unverified": "#BBBBBB",   # light grey: never checked, dropped with the rejection
    "recovered": "#0072B2",    # blue: target's token resampled after a rejection
    "bonus": "#CC79A7",        # reddish purple: target's free token after a full accept
    "carryover": "#F0E442",    # yellow: fed to the draft model before it drafts
    "target": "#0072B2",
    "draft": "#E69F00",        # orange
    "cut": "#D55E00",
    "stale": "#CC79A7",        # reddish purple: cache positions that hold no committed text (lab modes)
    "committed": "#555555",
    "model": "#000000",
}

# Okabe-Ito in order, yellow left out (too light on white): one line per series, e.g. per k.
SERIES = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#999999")

TEXT_ON = {                    # readable text colour on each fill
    "accepted": "#FFFFFF",
    "rejected": "#FFFFFF",
    "unverified": "#333333",
    "recovered": "#FFFFFF",
    "bonus": "#FFFFFF",
    "carryover": "#222222",
}

LABELS = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "unverified": "unverified (after a rejection)",
    "recovered": "recovered (target resample)",
    "bonus": "bonus (target, all accepted)",
    "carryover": "carryover fed to draft",
}


NARROW_WIDTH = 700         # viewport pixels below which the page is laid out for a phone


@dataclass(frozen=True)
class FigureStyle:
    """Font sizes for a figure, and how many steps a step axis shows at once; `large` is for projectors."""

    font_size: int = 13
    title_size: int = 16
    cell_font_size: int = 12
    timeline_steps: int = 16          # token cells need room for `cell_chars` characters
    cell_chars: int = 6
    cache_steps: int = 12             # few enough that a cut of one position is visible
    narrow: bool = False              # a phone: side-by-side panels stack

    @classmethod
    def for_screen(cls, large: bool = False, width: float | None = None) -> "FigureStyle":
        """Larger fonts for a projector; fewer steps at once on a narrow (phone) screen of `width` pixels."""
        style = cls(font_size=18, title_size=22, cell_font_size=16, timeline_steps=12, cache_steps=10) if large else cls()
        if isinstance(width, (int, float)) and 0 < width < NARROW_WIDTH:     # API callers may send anything
            steps = max(4, int(width // (70 if large else 52)))
            style = dataclasses.replace(style, timeline_steps=steps, cache_steps=steps, cell_chars=4, narrow=True,
                                        cell_font_size=style.cell_font_size - 1)
        return style
