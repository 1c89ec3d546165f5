"""Export a trace: its JSON, one HTML page per figure framed on the selected step, and one
plotly.min.js beside them that every page loads (`include_plotlyjs="directory"`), instead of
4.6 MB of plotly.js inlined in each page; all of it also in one zip that opens offline on a
classroom machine once unpacked. PNGs only when kaleido happens to be installed."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
import zipfile
from html import escape
from pathlib import Path

import plotly.io as pio

from engine.formats.trace import Trace
from specviz.figures.common import Figure

KEEP_EXPORTS = 20         # export folders kept in the temp directory
PLOTLY_JS = "plotly.min.js"
ZIP_NAME = "specviz-export.zip"


def export_files(trace: Trace, figures: dict[str, Figure], directory: Path,
                 step: int | None = None) -> list[Path]:
    """Write specviz-trace.json, specviz-<figure>.html for each figure, plotly.min.js (written once,
    loaded by every page) and specviz-export.zip holding them all, into `directory`; the zip first."""
    directory.mkdir(parents=True, exist_ok=True)
    trace_path = directory / "specviz-trace.json"
    trace_path.write_text(trace.to_json(), encoding="utf-8")
    pages = []
    for name, fig in figures.items():
        page = directory / f"specviz-{name}.html"
        page.write_text(figure_page(trace, name, fig, step), encoding="utf-8")
        pages.append(page)
    script = directory / PLOTLY_JS
    script.write_text(_plotly_js(), encoding="utf-8")
    paths = [trace_path, *pages, script]
    if importlib.util.find_spec("kaleido") is not None:
        for name, fig in figures.items():
            png = directory / f"specviz-{name}.png"
            fig.plotly.write_image(png, width=1400, height=fig.plotly.layout.height or 500, scale=1)
            paths.append(png)
    archive = directory / ZIP_NAME
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path in paths:
            bundle.write(path, f"specviz-export/{path.name}")
    return [archive, *paths]


def figure_page(trace: Trace, name: str, fig: Figure, step: int | None = None) -> str:
    """One figure as a page that loads plotly.min.js from its own folder."""
    body = pio.to_html(fig.plotly, full_html=False, include_plotlyjs="directory", default_width="100%")
    where = f", step {step}" if step is not None else ""
    title = escape(f"SpecViz {name}: {trace.config.target or 'trace'} ({trace.summary.steps} steps{where})")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body style='font-family:sans-serif;max-width:1400px;margin:auto'><h1>{title}</h1>"
            f"<p>Prompt: <code>{escape(trace.prompt.text)}</code></p>{body}"
            f"<p style='color:#666'>Needs {PLOTLY_JS} in the same folder (it is in the export).</p></body></html>")


def _plotly_js() -> str:
    """The plotly.js bundle that ships with the plotly package (the version the figures were made for)."""
    from plotly.offline import get_plotlyjs
    return get_plotlyjs()


def fresh_export_dir() -> Path:
    """A new temporary folder for one download, older ones pruned (`prune_exports`)."""
    directory = Path(tempfile.mkdtemp(prefix="specviz-export-"))
    prune_exports(directory.parent)
    return directory


def prune_exports(root: Path, keep: int = KEEP_EXPORTS) -> None:
    """Delete all but the newest `keep` export folders (Gradio has copied older ones to its cache)."""
    folders = sorted(root.glob("specviz-export-*"), key=lambda path: path.stat().st_mtime, reverse=True)
    for folder in folders[keep:]:
        shutil.rmtree(folder, ignore_errors=True)
