"""Everything the Explore tab shows for one sweep: heatmaps, theory overlay, the gap to the model split into
shares, per-position lines, a summary (with why τ and the acceptance rate r do not multiply out)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

import gradio as gr

from engine.config import NGRAM_DRAFTER
from engine.device_costs import DeviceCosts
from engine.formats.sweep_reader import SweepTable
from specviz.explore.gap import gap_sentence, gap_shares
from specviz.figures.common import Figure
from specviz.figures.gap import gap_figure
from specviz.figures.sweep import heatmap_figure, multiplied, positions_figure, theory_figure
from specviz.quantities import ACCEPTANCE_RATE, TOKENS_PER_STEP, alpha_text, shown_alpha
from specviz.serving.notices import duration
from specviz.style import FigureStyle
from specviz.updates import ComponentFields


@dataclass(frozen=True)
class ExploreViews(ComponentFields):
    """One value per output component of the sweep view, in the order of `names()`."""

    table: SweepTable | None
    status: str
    acceptance: Figure
    length: Figure
    speedup: Figure
    theory: Figure
    gap: Figure
    gap_words: str
    positions: Figure
    temperature: Any            # the theory temperature picker: a gr.update of its choices and value
    about: str


def render_sweep(table: SweepTable | None, status: str, temperature: float | None = None,
                 style: FigureStyle = FigureStyle(), device_costs: DeviceCosts | None = None) -> ExploreViews:
    """All sweep views; `temperature` picks the theory overlay's row (default: greedy, else the lowest);
    `device_costs` (a GPU server's, measured at load) adds the model at that device's costs."""
    shown = pick_temperature(table, temperature)
    choices = [(f"{t:g}", t) for t in table.temperatures] if table else []
    theory, gap, gap_words, positions = temperature_views(table, shown, style, device_costs)
    return ExploreViews(
        table=table, status=status,
        acceptance=heatmap_figure(table, "acceptance", style),
        length=heatmap_figure(table, "length", style),
        speedup=heatmap_figure(table, "speedup", style),
        theory=theory, gap=gap, gap_words=gap_words, positions=positions,
        temperature=gr.update(choices=choices, value=shown),
        about=about_html(table) + device_html(table, shown, device_costs))


def temperature_views(table: SweepTable | None, shown: float | None, style: FigureStyle,
                      device_costs: DeviceCosts | None) -> tuple[Figure, Figure, str, Figure]:
    """The views that depend on the picked temperature `shown` (pick_temperature's): the theory overlay, the gap's
    shares, their sentence and the per-position lines. The temperature picker redraws only these: the heatmaps
    hold every temperature already."""
    shares = gap_shares(table, shown) if shown is not None else []
    return (theory_figure(table, shown, style, device_costs), gap_figure(shares, shown, style),
            gap_html(shares, shown), positions_figure(table, shown, style))


def device_html(table: SweepTable | None, temperature: float | None, costs: DeviceCosts | None) -> str:
    """This server's device against the sweep: the best k at the sweep's α with the device's measured c and
    v, and, where none pays, the drafter that can (n-gram lookup runs no model to draft)."""
    fit = table.theory(temperature) if table is not None and temperature is not None else None
    if costs is None or costs.cost_ratio is None or fit is None:
        return ""
    k, speedup = costs.best(shown_alpha(fit.alpha))
    verdict = (f"the best k = {k} would run at {speedup:.2f}× target-only" if speedup > 1 else
               f"no k pays: the best, k = {k}, would run at {speedup:.2f}× target-only. Speculation with this "
               "draft cannot pay on this device; the n-gram drafter, which runs no model to draft, can where "
               "prompts quote what they edit")
    return (f"<p class='sv-note'>On this server's {escape(costs.device)} (measured when the pair loaded: c = "
            f"{costs.cost_ratio:.2f}, v = {costs.verify_cost(k):.2f}) at this sweep's α = {alpha_text(fit.alpha)} "
            f"(T = {temperature:g}), {escape(verdict)}. The dash-dotted line is the model at these costs.</p>")


def gap_html(shares: list, temperature: float | None) -> str:
    """The sentence under the gap chart (empty before any sweep)."""
    if temperature is None:
        return ""
    return f"<div class='sv-note sv-gap-words' id='sv-gap-sentence'>{escape(gap_sentence(shares, temperature))}</div>"


def multiply_note(table: SweepTable) -> str:
    """Why τ is not 1 + k × r, shown on the cell where the two differ most."""
    worst, gap = None, 0.0
    for cell in table.cells:
        product, drafts = multiplied(cell)
        if product is not None and drafts is not None and abs(product - cell.mean_accepted_length) > gap:
            worst, gap = cell, abs(product - cell.mean_accepted_length)
    if worst is None or gap < 0.005:
        return ""
    product, drafts = multiplied(worst)
    tau, r = TOKENS_PER_STEP.html("τ"), ACCEPTANCE_RATE.html("r")
    return (f"<div class='sv-multiply' id='sv-multiply-note'>Why {tau} ≠ 1 + k × {r}: at k = {worst.k}, "
            f"T = {worst.temperature:g}, τ = {worst.mean_accepted_length:.2f} but 1 + {worst.k} × "
            f"{worst.acceptance_rate:.2f} = {product:.2f}. r counts every drafted token (the unchecked ones after a "
            "rejection too), so the two would multiply out if every step drafted k; but a step drafts only what the "
            "run's token budget leaves room for (k = tokens left − 1), so each run's last steps draft fewer: these "
            f"runs drafted (τ − 1) / r ≈ {drafts:.2f} tokens a step, not {worst.k}. Each cell also averages its "
            "runs' r and τ apart (hover a τ cell for its numbers).</div>")


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
            f"<div>Fastest k by temperature: {''.join(best)}</div>{multiply_note(table)}"
            + (f"<details class='sv-prompt'><summary>Prompts</summary><ol>{prompt_list}</ol></details>"
               if prompt_list else "") + "</div>")


def progress_line(done: int, total: int, elapsed_s: float, eta_s: float | None) -> str:
    """'Sweep: 12 / 56 runs · 1 min 20 s so far · about 6 min left'."""
    left = "estimating the time left…" if eta_s is None else f"about {duration(eta_s)} left"
    return f"Sweep: **{done} / {total}** runs · {duration(elapsed_s)} so far · {left}"
