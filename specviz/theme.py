"""The Gradio theme and css, passed to `launch()` (Gradio 6 no longer takes them in Blocks): assets/specviz.css and
the rules whose numbers the figures share (specviz/style.py SIZES_CSS)."""

from __future__ import annotations

import gradio as gr

from specviz.assets import ASSETS_DIR, read_css
from specviz.style import SIZES_CSS

# System fonts only: a classroom machine may be offline, so nothing is fetched from a font service.
FONTS = ["Inter", "Segoe UI", "Roboto", "Helvetica Neue", "Arial", "sans-serif"]
MONO_FONTS = ["ui-monospace", "SFMono-Regular", "Menlo", "Consolas", "monospace"]


def theme() -> gr.themes.Base:
    return gr.themes.Soft(primary_hue="blue", neutral_hue="slate", font=FONTS, font_mono=MONO_FONTS)


def css() -> str:
    return read_css(ASSETS_DIR) + SIZES_CSS
