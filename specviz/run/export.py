"""Export a trace: its JSON, and its figures as one standalone HTML page (plotly.js inlined,
so it opens offline on a classroom machine); PNGs only when kaleido happens to be installed."""

from __future__ import annotations

import importlib.util
import shutil
from html import escape
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from engine.trace import Trace

KEEP_EXPORTS = 20         # export folders kept in the temp directory


def export_files(trace: Trace, figures: dict[str, go.Figure], directory: Path) -> list[Path]:
    """Write specviz-trace.json, specviz-figures.html (and <name>.png with kaleido) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    trace_path = directory / "specviz-trace.json"
    trace_path.write_text(trace.to_json(), encoding="utf-8")
    html_path = directory / "specviz-figures.html"
    html_path.write_text(figures_page(trace, figures), encoding="utf-8")
    paths = [trace_path, html_path]
    if importlib.util.find_spec("kaleido") is not None:
        for name, fig in figures.items():
            png = directory / f"specviz-{name}.png"
            fig.write_image(png, width=1400, height=fig.layout.height or 500, scale=1)
            paths.append(png)
    return paths


def figures_page(trace: Trace, figures: dict[str, go.Figure]) -> str:
    """One HTML document holding every figure; plotly.js is inlined once, in the first."""
    parts = [pio.to_html(fig, full_html=False, include_plotlyjs=(i == 0), default_width="100%")
             for i, fig in enumerate(figures.values())]
    title = escape(f"SpecViz: {trace.config.target or 'trace'} ({trace.summary.steps} steps)")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body style='font-family:sans-serif;max-width:1400px;margin:auto'><h1>{title}</h1>"
            f"<p>Prompt: <code>{escape(trace.prompt.text)}</code></p>{''.join(parts)}</body></html>")


def prune_exports(root: Path, keep: int = KEEP_EXPORTS) -> None:
    """Delete all but the newest `keep` export folders (Gradio has copied older ones to its cache)."""
    folders = sorted(root.glob("specviz-export-*"), key=lambda path: path.stat().st_mtime, reverse=True)
    for folder in folders[keep:]:
        shutil.rmtree(folder, ignore_errors=True)
