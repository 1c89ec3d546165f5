"""The tour sheet kept compact (issue 41): at 1280 x 720 with large text the sheet took about 250 of the 720 px,
so chapter 1's table showed only its first draft above it. These rules load after the tour's own CSS
(specviz/style.py, "Tour") and win over its sizes: one short navigation row, tighter lines, and large text at the
size a projector's back row still reads (the chart and page text keep their own large sizes). A chapter's text
longer than the sheet's height scrolls inside the sheet, never over the evidence. A phone's sheet keeps its
navigation on one row (the buttons' arrows, the chapter list between them: the chapter's title is its heading) and
takes at most PHONE_SHEET_HEIGHT of the screen, its chapter list showing "Chapter 4 of 9 ▾" (the native list, kept
as the control under it, cut the chapter's title). "Hide text" folds the sheet to its one row of buttons."""

from __future__ import annotations

LARGE_SHEET_FONT_PX = 18          # the sheet's text with large text on (the tour's own CSS says 21)
SHEET_HEIGHT = "32vh"             # at most this much of the screen, text scrolling inside beyond it
PHONE_SHEET_HEIGHT = "30vh"       # a phone: its nav in one row of arrows and the list (two rows took 80 px), so
                                  # the sheet took up to 40% of 844 px and hid the rows a chapter's question reads

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
/* the question stays in sight at the sheet's bottom while a long chapter's words scroll above it (a phone's
   chapter 8 ended at "How many rows does the target's", the question's end and its answer under the fold) */
.sv-tour .sv-tour-question:not([open]) {{ position: sticky; bottom: 0; background: #ffffff; padding-top: 2px;
  box-shadow: 0 -8px 8px -8px rgba(0, 0, 0, 0.35); }}
.sv-tour[data-folded="1"] .sv-tour-chapter, .sv-tour[data-folded="1"] .sv-tour-status {{ display: none !important; }}
.sv-tour-pick {{ display: contents; }}
.sv-tour-pick-label {{ display: none; }}
@media (max-width: 700px) {{
  .sv-tour .sv-tour-sheet {{ max-height: {PHONE_SHEET_HEIGHT}; line-height: 1.3; padding: 4px 8px 6px; }}
  body.sv-large .sv-tour .sv-tour-sheet {{ max-height: {PHONE_SHEET_HEIGHT}; }}
  .sv-tour .sv-tour-nav {{ flex-wrap: nowrap; }}
  .sv-tour .sv-tour-nav .sv-tour-word {{ display: none; }}
  .sv-tour .sv-tour-nav button, .sv-tour .sv-tour-nav select, .sv-tour .sv-tour-link {{ flex: 0 0 auto;
    min-height: 32px; min-width: 36px; padding: 1px 6px; }}
  .sv-tour .sv-tour-nav .sv-tour-pick {{ display: block; position: relative; flex: 1 1 0; min-width: 0; }}
  .sv-tour .sv-tour-pick-label {{ display: flex; align-items: center; justify-content: center; min-height: 32px;
    box-sizing: border-box; border: 1px solid #94a3b8; border-radius: 6px; padding: 1px 6px; white-space: nowrap;
    background: #f8fafc; }}
  .sv-tour .sv-tour-nav .sv-tour-pick select {{ position: absolute; inset: 0; width: 100%; height: 100%; opacity: 0;
    min-width: 0; }}
  .sv-tour .sv-tour-chapter h3 {{ margin: 3px 0 0; }}
  /* more of the chapter below: a shadow along the sheet's bottom edge, covered once it is scrolled to its end */
  .sv-tour .sv-tour-sheet {{ background: linear-gradient(rgba(255, 255, 255, 0), #ffffff 70%) 0 100% / 100% 28px
      no-repeat local, radial-gradient(farthest-side at 50% 100%, rgba(0, 0, 0, 0.3), rgba(0, 0, 0, 0)) 0 100% /
      100% 12px no-repeat scroll, #ffffff; }}
}}
"""
