"""The tour sheet kept compact (issue 41): at 1280 x 720 with large text the sheet took about 250 of the 720 px,
so chapter 1's table showed only its first draft above it. These rules load after the tour's own CSS
(specviz/style.py, "Tour") and win over its sizes: one short navigation row, tighter lines, and large text at the
size a projector's back row still reads (the chart and page text keep their own large sizes). A chapter's text
longer than the sheet's height scrolls inside the sheet, never over the evidence."""

from __future__ import annotations

LARGE_SHEET_FONT_PX = 18          # the sheet's text with large text on (the tour's own CSS says 21)
SHEET_HEIGHT = "32vh"             # at most this much of the screen, text scrolling inside beyond it

SHEET_CSS = f"""
.sv-tour .sv-tour-sheet {{ max-height: {SHEET_HEIGHT}; line-height: 1.35; padding-top: 4px; padding-bottom: 6px; }}
.sv-tour .sv-tour-nav {{ gap: 4px; }}
.sv-tour .sv-tour-nav button, .sv-tour .sv-tour-nav select, .sv-tour .sv-tour-link {{ min-height: 30px;
  padding: 1px 8px; line-height: 1.3; }}
.sv-tour .sv-tour-text {{ margin: 2px 0; }}
.sv-tour .sv-tour-answer {{ margin-top: 2px; padding: 2px 8px; }}
body.sv-large .sv-tour .sv-tour-sheet {{ font-size: {LARGE_SHEET_FONT_PX}px; max-height: {SHEET_HEIGHT}; }}
body.sv-large .gradio-container .sv-tour .sv-tour-nav button,
body.sv-large .gradio-container .sv-tour .sv-tour-nav select {{ font-size: {LARGE_SHEET_FONT_PX}px !important; }}
@media (max-width: 700px) {{
  .sv-tour .sv-tour-sheet {{ max-height: 40vh; }}
  body.sv-large .sv-tour .sv-tour-sheet {{ max-height: 40vh; }}
}}
"""
