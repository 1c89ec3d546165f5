"""The tour's place on the page (specviz/layout.py calls `tour_panel` in the header): the open button, and the
sheet the controller drives; its CSS is the "Tour" section of specviz/style.py, kept compact by sheet.py's rules
loaded after it."""

from __future__ import annotations

import gradio as gr

from specviz.style import TOUR_CSS
from specviz.tour.chapters import build_tour
from specviz.tour.controller import TOUR_JS
from specviz.tour.sheet import SHEET_CSS
from specviz.tour.sources import TourSources
from specviz.tour.view import tour_html


def tour_panel(sources: TourSources) -> gr.HTML:
    """The tour over `sources` (what the page shows first); an empty, invisible block when no chapter fits."""
    chapters = build_tour(sources)
    return gr.HTML(tour_html(chapters), js_on_load=TOUR_JS, head=f"<style id='sv-tour-css'>{TOUR_CSS}{SHEET_CSS}</style>",
                   elem_id="sv-tour", visible=bool(chapters), padding=False)
