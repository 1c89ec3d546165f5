"""Everything the Explore tab shows for one sweep: heatmaps, theory overlay, per-position lines, a summary."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from engine.config import NGRAM_DRAFTER
from engine.formats.sweep_reader import SweepTable
from specviz.figures.sweep import heatmap_figure, positions_figure, theory_figure
from specviz.serving.notices import duration
from specviz.style import FigureStyle
from specviz.updates import ComponentFields


@dataclass(frozen=True)
class ExploreViews(ComponentFields):
    """One value per output component of the sweep view, in the order of `names()`."""

    table: SweepTable | None
    status: str
    acceptance: go.Figure
    length: go.Figure
    speedup: go.Figure
    theory: go.Figure
    positions: go.Figure
    temperature: Any            # the theory temperature picker: a gr.update of its choices and value
    about: str


def render_sweep(table: SweepTable | None, status: str, temperature: float | None = None,
                 style: FigureStyle = FigureStyle()) -> ExploreViews:
    """All sweep views; `temperature` picks the theory overlay's row (default: greedy, else the lowest)."""
    shown = pick_temperature(table, temperature)
    choices = [(f"{t:g}", t) for t in table.temperatures] if table else []
    return ExploreViews(
        table=table, status=status,
        acceptance=heatmap_figure(table, "acceptance", style),
        length=heatmap_figure(table, "length", style),
        speedup=heatmap_figure(table, "speedup", style),
        theory=theory_figure(table, shown, style),
        positions=positions_figure(table, shown, style),
        temperature=gr.update(choices=choices, value=shown),
        about=about_html(table))


def pick_temperature(table: SweepTable | None, wanted: float | None) -> float | None:
    """`wanted` when the sweep has it, else its lowest temperature with chain cells (a sweep of trees
    alone: its lowest), which the theory overlay can draw."""
    if table is None or not table.temperatures:
        return None
    if wanted is not None and float(wanted) in table.temperatures:
        return float(wanted)
    return next((t for t in table.temperatures if table.at(t)), table.temperatures[0])


def about_html(table: SweepTable | None) -> str:
    """What was swept (models, prompts, seeds, length) and the fastest k at each temperature."""
    if table is None or not table.cells:
        return "<div class='sv-note'>No sweep to describe yet.</div>"
    meta = table.meta
    models = f"{meta.get('draft') or '?'} → {meta.get('target') or '?'}"
    if meta.get("drafter") == NGRAM_DRAFTER:
        models = f"n-gram prompt lookup → {meta.get('target') or '?'}"
    prompts, seeds = table.meta_list("prompts"), table.meta_list("seeds")
    facts = [f"{table.num_runs} runs", f"{len(prompts) or '?'} prompt{'s' if len(prompts) != 1 else ''}",
             f"{len(seeds) or '?'} seed{'s' if len(seeds) != 1 else ''}",
             f"{meta.get('max_new_tokens', '?')} new tokens each"]
    best = []
    for temperature in table.temperatures:
        k = table.best_k(temperature)
        cell = table.cell(k, temperature) if k is not None else None
        if cell is not None:
            best.append(f"<span class='sv-badge sv-ok'>T = {temperature:g}: k = {k} ({cell.speedup:.2f}×)</span>")
    prompt_list = "".join(f"<li>{escape(str(p))}</li>" for p in prompts)
    return (f"<div class='sv-about'><div><b>{escape(str(meta.get('preset') or 'custom pair'))}</b>: "
            f"{escape(models)} · {escape(' · '.join(facts))}</div>"
            f"<div>Fastest k by temperature: {''.join(best)}</div>"
            + (f"<details class='sv-prompt'><summary>Prompts</summary><ol>{prompt_list}</ol></details>"
               if prompt_list else "") + "</div>")


def progress_line(done: int, total: int, elapsed_s: float, eta_s: float | None) -> str:
    """'Sweep: 12 / 56 runs · 1 min 20 s so far · about 6 min left'."""
    left = "estimating the time left…" if eta_s is None else f"about {duration(eta_s)} left"
    return f"Sweep: **{done} / {total}** runs · {duration(elapsed_s)} so far · {left}"
