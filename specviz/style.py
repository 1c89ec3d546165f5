"""Colours, labels and font sizes shared by every figure and HTML view.

The palette is Okabe-Ito (safe for the common colour-vision deficiencies); each
verdict also differs in lightness, so a greyscale projector still separates them: accepted is a darker
shade of Okabe-Ito's bluish green and unverified a lighter grey, so that under simulated deuteranopia
accepted, bonus and unverified sit about 25 apart in CIELAB instead of 15-22 (issue #33 item 5; they stepped
in lightness 36 / 63 / 87; tests/test_ui_colour_distance.py). Besides
its colour every kind has its own fill pattern (PATTERNS, the same in every figure; the
page's chips and text follow it in assets/specviz.css), so a student with a colour-vision
deficiency tells the kinds apart in every view (tests/test_ui_browser_colour_blind.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

# Token cell categories: the three draft verdicts plus the two kinds of target token.
CATEGORIES = ("accepted", "rejected", "unverified", "recovered", "bonus")

COLORS = {
    "accepted": "#00664A",     # bluish green, darkened: the lightness step below bonus and unverified
    "rejected": "#D55E00",     # vermillion
    "unverified": "#DADADA",   # light grey: never checked, dropped with the rejection
    "recovered": "#0072B2",    # blue: target's token resampled after a rejection
    "bonus": "#CC79A7",        # reddish purple: target's free token after a full accept
    "carryover": "#F0E442",    # yellow: fed to the draft model before it drafts
    "target": "#0072B2",
    "draft": "#E69F00",        # orange
    "cut": "#D55E00",
    "stale": "#CC79A7",        # reddish purple: cache positions that hold no committed text (lab modes)
    "committed": "#555555",
    "unreached": "#E4E4E4",    # pale: a tree node never tried
    "model": "#000000",
}

# Okabe-Ito in order, yellow left out (too light on white): one line per series, e.g. per k.
SERIES = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#999999")

# One fill pattern per kind (Plotly's pattern shapes); "" is the one solid fill. Light fills get a dark
# pattern (PATTERN_INK), dark ones a light one.
PATTERNS = {"accepted": "", "rejected": "/", "unverified": "x", "recovered": "-", "bonus": ".", "carryover": "|",
            "committed": "+"}
PATTERN_INK = {"unverified": "rgba(0,0,0,0.45)", "carryover": "rgba(0,0,0,0.45)"}


def pattern(kind: str, size: int = 8, solidity: float = 0.3) -> dict:
    """The marker pattern of `kind` for a Plotly bar ({} for the solid kinds)."""
    shape = PATTERNS.get(kind, "")
    if not shape:
        return {}
    return {"shape": shape, "fillmode": "overlay", "fgcolor": PATTERN_INK.get(kind, "rgba(255,255,255,0.6)"),
            "size": size, "solidity": solidity}


TEXT_ON = {                    # readable text colour on each fill
    "accepted": "#FFFFFF",
    "rejected": "#000000",     # black on the vermillion: white read at 3.9, under WCAG's 4.5
    "unverified": "#333333",
    "recovered": "#FFFFFF",
    "bonus": "#222222",        # dark on the mid-light pink: white was hard to read (issue #33)
    "carryover": "#222222",
}

LABELS = {
    "accepted": "accepted draft",
    "rejected": "rejected draft",
    "unverified": "unverified (after a rejection)",
    "recovered": "recovered (target's token at the rejection)",
    "bonus": "bonus (target, all accepted)",
    "carryover": "carryover fed to draft",
}
TREE_LABELS = {                # the same kinds, named after a tree step's own events (specviz/figures/tree.py)
    **LABELS,
    "accepted": "accepted (on the path)",
    "rejected": "rejected (tried, refused)",
    "unverified": "unreached (never tried)",
    "recovered": "recovered (target's own token)",
    "bonus": "bonus (target, after a leaf)",
}


def kind_labels(tree: bool) -> dict[str, str]:
    """The legend's names for each kind: a tree run's (its bonus follows a leaf, not 'all accepted') or a chain's."""
    return TREE_LABELS if tree else LABELS


NARROW_WIDTH = 700         # viewport pixels below which the page is laid out for a phone
PAGE_WIDTH = 1600          # .gradio-container's max-width (assets/specviz.css)
VIEWS_SHARE = 0.64         # a desktop chart's width / the page's: the views column (measured 896 of 1400 px)
PHONE_GUTTER = 64          # a phone chart's width = the viewport's minus the page's padding (326 of 390 px)
TITLE_INDENT = 60          # a title starts at the plot area, the left margin in (specviz/figures/common.py)
CHAR_EM = 0.55             # a generous average width of one character, in font sizes (bold: CHAR_EM + 0.03)
MONO_EM = 0.6              # one monospace glyph's width, in font sizes (DejaVu Sans Mono and its kin)
# Issue #41: a token cell is made wide enough for its text, never the text squeezed to the screen. A timeline
# cell holds TOKEN_CHARS characters ('·Return' whole, not '·Retu…') on every screen, so a narrow one shows
# fewer steps at once and scrolls sideways (drag) to the others; a phone's draft tree is drawn at least
# TREE_MIN_PX wide in a box that scrolls sideways (SIZES_CSS), its captions wrapped to the screen.
TOKEN_CHARS = 7
SHRINK_FLOOR = 0.7         # a longer token's cell font shrinks to fit, to no less than this share of the cell font


def shrunk_chars(chars: int) -> int:
    """The most characters a cell of `chars` characters draws whole, in a font shrunk to SHRINK_FLOOR (10 for 7)."""
    return int(chars / SHRINK_FLOOR + 1e-9)
BAR_SHARE = 0.92           # a timeline cell's width / its step column's (specviz/figures/timeline.py)
CELL_PAD_PX = 3            # kept clear on either side of a cell's text
RIGHT_MARGIN = 16          # figures/common.py's right margin
TREE_MIN_PX = 600          # a phone's draft tree figure, at least this wide (it scrolls sideways in its box)


@dataclass(frozen=True)
class FigureStyle:
    """Font sizes for a figure, and how many steps a step axis shows at once; `large` is for projectors."""

    font_size: int = 13
    title_size: int = 16
    cell_font_size: int = 12
    timeline_steps: int = 14          # token cells need room for `cell_chars` characters
    cell_chars: int = TOKEN_CHARS
    cache_steps: int = 12             # few enough that a cut of one position is visible
    narrow: bool = False              # a phone: side-by-side panels stack
    line_px: int | None = None        # the width a title or legend line has; None: unknown, lines are not wrapped

    def line_chars(self, size: int, bold: bool = False) -> int | None:
        """How many characters of text at `size` px fit on one line (None: no limit known)."""
        if self.line_px is None:
            return None
        return max(12, int(self.line_px / (size * (CHAR_EM + (0.03 if bold else 0.0)))))

    def step_column_px(self) -> float:
        """The narrowest step column of the timeline whose cell holds `cell_chars` monospace characters."""
        return (self.cell_chars * MONO_EM * self.cell_font_size + 2 * CELL_PAD_PX) / BAR_SHARE

    def timeline_left_px(self) -> float:
        """The timeline's left margin: its widest row label, 'target +1', at the figure's font size."""
        return max(TITLE_INDENT, len("target +1") * CHAR_EM * self.font_size + 10)

    @classmethod
    def for_screen(cls, large: bool = False, width: float | None = None) -> "FigureStyle":
        """Larger fonts for a projector; fewer steps at once on a narrow (phone) screen of `width` pixels;
        with a `width`, titles, subtitles and legend entries wrap to the chart's width (figures/common.py), and
        the timeline shows only as many steps as have room for their cells' text (the others a drag away)."""
        style = cls(font_size=18, title_size=22, cell_font_size=16, timeline_steps=12, cache_steps=10) if large else cls()
        if not isinstance(width, (int, float)) or not 0 < width < 100_000:   # API callers may send anything
            return style
        chart_px = width - PHONE_GUTTER if width < NARROW_WIDTH else min(width, PAGE_WIDTH) * VIEWS_SHARE
        style = dataclasses.replace(style, line_px=max(120, int(chart_px - TITLE_INDENT)))
        if width < NARROW_WIDTH:
            steps = max(4, int(width // (70 if large else 52)))
            style = dataclasses.replace(style, cache_steps=steps, narrow=True, cell_font_size=style.cell_font_size - 1)
        plot_px = chart_px - style.timeline_left_px() - RIGHT_MARGIN
        fitting = max(3, int(plot_px // style.step_column_px()))
        return dataclasses.replace(style, timeline_steps=min(style.timeline_steps, fitting))


# ---------------------------------------------------------------------------------------------------------------
# Tour (specviz/tour/, issue #33): the sheet fixed to the bottom of the screen, and the outline around the one
# element a chapter points at. Its own section, handed to the page by the tour's view (specviz/tour/panel.py).
# ---------------------------------------------------------------------------------------------------------------
TOUR_OUTLINE = COLORS["draft"]     # orange: apart from every verdict colour, and dark enough on white

# The outline, as a rule on the chapter's selector (specviz/tour/controller.py): it survives the redraws that
# replace the element (a large-text restyle, a new step).
TOUR_OUTLINE_CSS = f"outline: 4px solid {TOUR_OUTLINE} !important; outline-offset: 3px; border-radius: 4px;"

TOUR_CSS = f"""
.sv-tour button.sv-tour-open {{ margin: 0; padding: 4px 12px; border: 2px solid {TOUR_OUTLINE} !important;
  border-radius: 8px; background: #fff8ec !important; color: #1f2937; font-weight: 600; cursor: pointer; }}
.sv-tour-sheet {{ display: none; position: fixed; left: 0; right: 0; bottom: 0; z-index: 1000;
  max-height: 40vh; overflow-y: auto; background: #ffffff; color: #1f2937; border-top: 4px solid {TOUR_OUTLINE};
  box-shadow: 0 -4px 16px rgba(0, 0, 0, 0.18); padding: 8px max(12px, calc((100vw - 1100px) / 2)) 10px;
  font-size: 15px; line-height: 1.45; box-sizing: border-box; }}
.sv-tour[data-open="1"] .sv-tour-sheet {{ display: block; }}
.sv-tour-nav {{ display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }}
.sv-tour-nav button, .sv-tour-nav select, .sv-tour-link {{ font: inherit; padding: 4px 10px; border-radius: 6px;
  border: 1px solid #94a3b8; background: #f8fafc; color: inherit; min-height: 36px; box-sizing: border-box; }}
.sv-tour-nav button:disabled {{ opacity: 0.45; }}
.sv-tour-list {{ flex: 1 1 180px; min-width: 0; max-width: 100%; }}
.sv-tour-link {{ text-decoration: underline; display: inline-flex; align-items: center; }}
.sv-tour .sv-tour-chapter h3 {{ position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%);
  margin: 0; }}                       /* the chapter list shows the title; a phone's narrow list needs it shown */
.sv-tour-no {{ display: inline-block; min-width: 1.6em; text-align: center; border-radius: 999px;
  background: {TOUR_OUTLINE}; color: #000000; font-weight: 700; }}
.sv-tour-text {{ margin: 2px 0 4px; overflow-wrap: anywhere; }}
.sv-tour-question summary {{ cursor: pointer; overflow-wrap: anywhere; }}
.sv-tour-reveal {{ text-decoration: underline; white-space: nowrap; color: #1d4ed8; }}
.sv-tour-question[open] .sv-tour-reveal {{ display: none; }}
.sv-tour-answer {{ margin: 4px 0 0; padding: 4px 8px; border-left: 4px solid {TOUR_OUTLINE}; background: #fff8ec;
  overflow-wrap: anywhere; }}
.sv-tour-status:empty {{ display: none; }}
.sv-tour-status {{ margin: 4px 0 0; font-style: italic; }}
body.sv-large .sv-tour-sheet {{ font-size: 21px; max-height: 46vh; }}
@media (max-width: 700px) {{
  .sv-tour-sheet {{ max-height: 46vh; font-size: 14px; padding: 6px 10px 8px; }}
  #sv-tour {{ margin-top: calc(-1 * var(--layout-gap, 16px) + 2px); }}     /* Run stays on a phone's first screen */
  #sv-tour .html-container {{ padding: 0 !important; }}
  .sv-tour button.sv-tour-open {{ padding: 2px 10px; font-size: 14px; line-height: 1.5; }}
  .sv-tour-nav {{ gap: 4px; }}
  .sv-tour-nav button, .sv-tour-nav select, .sv-tour-link {{ padding: 4px 6px; }}
  .sv-tour-list {{ flex-basis: 90px; }}
  .sv-tour .sv-tour-chapter h3 {{ position: static; width: auto; height: auto; clip-path: none;
    margin: 6px 0 2px; font-size: 1.1em !important; }}
  body.sv-large .sv-tour-sheet {{ font-size: 18px; }}
}}
"""


# ---------------------------------------------------------------------------------------------------------------
# Sizes (issue #41): a phone's draft tree keeps cells wide enough for their tokens (TREE_MIN_PX, the same number
# specviz/figures/tree_geometry.py draws it for) and scrolls sideways in its box; passed to the page with the
# rest of the css (specviz/theme.py).
# ---------------------------------------------------------------------------------------------------------------
SIZES_CSS = f"""
@media (max-width: {NARROW_WIDTH}px) {{
  #sv-tree, #sv-lab-tree {{ overflow-x: auto !important; overflow-y: hidden; }}
  #sv-tree .js-plotly-plot, #sv-lab-tree .js-plotly-plot {{ min-width: {TREE_MIN_PX}px; }}
}}
"""
