"""One name per quantity (issue #27): the acceptance rate r, the expected acceptance α and the tokens per step τ
carry the same name, symbol and tooltip on every tab (specviz/quantities.py), and no tab uses another letter for
them. Every HTML view that shows one (the Run and Lab cards, the Lab's tree table, Explore's introduction and
sweep summary, the comparison table) is collected, and each marked use must carry exactly its quantity's label
and definition; the figures' titles, legends and hovers use the same words. A planted second definition on one
tab is caught.
"""

from __future__ import annotations

import re
from html import escape, unescape

import pytest

from specviz.assets import ASSETS_DIR, load_demo_trace, load_lab_traces, load_recorded_sweep, load_tree_sweep
from specviz.explore.compare import Comparison, Side, comparison_table
from specviz.explore.tab import INTRO
from specviz.explore.views import render_sweep
from specviz.figures.acceptance import histogram_figure, per_step_figure, position_figure
from specviz.figures.sweep import heatmap_figure, theory_figure
from specviz.figures.tree_budget import tree_budget_figure
from specviz.lab.views import KEYS, recorded_lab, render_lab
from specviz.quantities import ACCEPTANCE_RATE, ALPHA, QUANTITIES, TOKENS_PER_STEP, Quantity
from specviz.run.output_view import metrics_html

BY_KEY = {quantity.key: quantity for quantity in QUANTITIES}


def views_by_tab() -> dict[str, str]:
    """Every HTML view that names a quantity, on each tab, as the page gets it."""
    greedy = load_demo_trace().trace
    lab = recorded_lab(load_lab_traces(KEYS))
    sweep = load_recorded_sweep(ASSETS_DIR).table
    comparison = Comparison({"A": Side(5, 0.0, "model"), "B": Side(3, 0.0, "model")}, {"A": greedy, "B": greedy})
    return {"Run": metrics_html(greedy),
            "Lab": render_lab(lab, "A", "").verdict + render_lab(lab, "T", "").verdict,
            "Explore": INTRO + render_sweep(sweep, "").about + comparison_table(comparison)}


def uses(html: str) -> list[tuple[str, str]]:
    """(quantity key, tooltip) of every marked use: a card or a span carrying data-quantity."""
    found = []
    for match in re.finditer(r"<[^>]*data-quantity='(\w+)'[^>]*>", html):
        tag = match.group(0)
        title = re.search(r"title='([^']*)'", tag)
        found.append((match.group(1), unescape(title.group(1)) if title else ""))
    return found


def test_every_tab_gives_each_quantity_the_same_name_symbol_and_tooltip():
    seen: dict[str, set[str]] = {}
    views = views_by_tab()
    for tab, html in views.items():
        marked = uses(html)
        assert {key for key, _ in marked} >= {"acceptance_rate", "tokens_per_step"}, tab
        for key, title in marked:
            assert title == BY_KEY[key].tip, f"{tab}: {key} has another tooltip"
            seen.setdefault(key, set()).add(tab)
        assert not re.search(r"\ba = \d", unescape(re.sub(r"<[^>]+>", "", html))), f"{tab} uses a letter 'a'"
    assert seen["alpha"] >= {"Run", "Explore"} and seen["tokens_per_step"] == {"Run", "Lab", "Explore"}
    cards = views["Run"]                                         # a card's label is the quantity's label
    for quantity in (ACCEPTANCE_RATE, TOKENS_PER_STEP):
        assert f"data-quantity='{quantity.key}'><div class='sv-card-label'>{escape(quantity.label)}</div>" in cards


def test_the_figures_use_the_same_names_and_symbols():
    greedy = load_demo_trace().trace
    sweep = load_recorded_sweep(ASSETS_DIR).table
    assert heatmap_figure(sweep, "acceptance").layout.title.text == f"<b>{ACCEPTANCE_RATE.title}</b>"
    assert heatmap_figure(sweep, "length").layout.title.text == f"<b>{TOKENS_PER_STEP.title}</b>"
    theory = theory_figure(sweep, 0.7)
    names = " ".join(trace.name for trace in theory.data if trace.name)
    assert f"{ALPHA.symbol} = " in names and TOKENS_PER_STEP.label in names and " a = " not in names
    assert ALPHA.name in theory.layout.title.subtitle.text
    for figure in (per_step_figure(greedy), position_figure(greedy), histogram_figure(greedy)):
        words = figure.layout.title.subtitle.text + " ".join(t.name or "" for t in figure.data)
        assert ALPHA.symbol in words and "a = " not in words
    assert f"{TOKENS_PER_STEP.label}" in str(tree_budget_figure(load_tree_sweep(ASSETS_DIR).table).to_dict())
    assert any(TOKENS_PER_STEP.tip.split(".")[0] in (t.hovertemplate or "").replace("<br>", " ")
               for t in per_step_figure(greedy).data)


def test_a_planted_second_definition_is_caught(monkeypatch):
    other = Quantity(TOKENS_PER_STEP.key, TOKENS_PER_STEP.name, TOKENS_PER_STEP.symbol, "tokens per forward, roughly")
    monkeypatch.setattr("specviz.lab.views.TOKENS_PER_STEP", other)
    with pytest.raises(AssertionError):
        test_every_tab_gives_each_quantity_the_same_name_symbol_and_tooltip()


def test_alpha_and_the_model_numbers_beside_it_reproduce_from_the_shown_digits():
    """Issue #33 item 2: 'α 0.96' beside 'E = 5.37', where 0.96 in the shown formula gives 5.43. Each view that
    shows α with E, a model speedup or a model curve is read back, and its own formula, fed the shown digits,
    must give the shown number."""
    from engine.metrics import expected_speedup, expected_tokens_per_step

    greedy = load_demo_trace().trace
    words = unescape(re.sub(r"<[^>]+>", " ", metrics_html(greedy)))
    alpha, e = re.search(r"at α = ([\d.]+) the i\.i\.d\. model expects E = \(1 − α\^\(k\+1\)\) / \(1 − α\) = ([\d.]+)",
                         words).groups()
    k = max(step.k for step in greedy.steps)
    assert f"{expected_tokens_per_step(float(alpha), k):.2f}" == e
    assert f" {ALPHA.label}  {alpha} " in words                             # the α card shows the same digits
    speedup, a, k2, c, v, at_one = re.search(
        r"predicted speedup\s+([\d.]+)× .*?α = Σ min\(p, q\) = ([\d.]+), k = (\d+), c = ([\d.]+) .*?v = ([\d.]+),"
        r".*?take v = 1: ([\d.]+)×", words).groups()
    ideal = expected_speedup(float(a), int(k2), float(c))
    assert a == alpha and f"{ideal:.2f}" == at_one and f"{ideal / float(v):.2f}" == speedup
    per_step = per_step_figure(greedy)
    (model,) = [t for t in per_step.data if t.meta == "model"]
    e, alpha, k = re.search(r"E = ([\d.]+) tokens per step at α = ([\d.]+), k = (\d+)", model.name).groups()
    assert f"{expected_tokens_per_step(float(alpha), int(k)):.2f}" == e
    sweep = load_recorded_sweep(ASSETS_DIR).table
    theory = theory_figure(sweep, 0.0)
    (curve,) = [t for t in theory.data if t.meta == "model.length"]
    alpha = float(re.search(r"α = ([\d.]+)", curve.name).group(1))
    assert all(abs(y - expected_tokens_per_step(alpha, x)) < 1e-12 for x, y in zip(curve.x, curve.y))


@pytest.mark.parametrize("module", ["specviz.run.output_view", "specviz.figures.acceptance", "specviz.figures.sweep"])
def test_a_planted_model_number_from_the_unrounded_alpha_is_caught(monkeypatch, module):
    monkeypatch.setattr(f"{module}.shown_alpha", lambda alpha: alpha)
    with pytest.raises(AssertionError):
        test_alpha_and_the_model_numbers_beside_it_reproduce_from_the_shown_digits()
