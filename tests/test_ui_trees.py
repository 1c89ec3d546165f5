"""The Explore tab's "Trees vs chain" (issue #19): the figure's numbers are the sweep's, per node budget,
the verdict names the budget where the extra verify cost stops paying, and a sweep without budgets
says so. Budget sweeps are written by the real writer (engine.formats.sweep_format.sweep_document) from
hand-made runs; the shipped recorded sweep is checked the same way."""

from __future__ import annotations

import json

import gradio as gr
import pytest

from engine.formats.sweep_format import RunResult, SweepFormatError, sweep_document
from engine.formats.sweep_reader import SweepTable
from specviz.assets import ASSETS_DIR, TREE_SWEEP, load_tree_sweep
from specviz.explore import trees
from specviz.figures import tree_budget
from specviz.figures.tree_budget import NO_BUDGETS, budget_verdicts, tree_budget_figure
from specviz.style import FigureStyle

BUDGETS = (0, 4, 8, 16, 32)
# tokens per forward, tokens/s, verify ms per budget at T = 0: the 8-node tree is fastest.
GREEDY = {0: (3.0, 5.0, 120.0), 4: (3.4, 5.6, 140.0), 8: (3.8, 6.1, 160.0), 16: (4.0, 5.2, 230.0),
          32: (4.1, 3.9, 400.0)}


def run(tree_nodes: int, temperature: float, prompt: int, length: float, speed: float, verify_ms: float) -> RunResult:
    nudge = 0.1 * prompt                     # two prompts, apart, so a mean is not any one run
    return RunResult(k=5, temperature=temperature, prompt_index=prompt, seed=0, acceptance_rate=0.7,
                     mean_accepted_length=length + nudge, per_position_acceptance=(0.8, 0.7, 0.6),
                     tokens_per_s=speed + nudge, baseline_tokens_per_s=4.0, target_forwards_per_token=0.3,
                     wall_s=2.0, estimated_alpha=0.75, cost_ratio=0.2, identical=True, tree_nodes=tree_nodes,
                     draft_ms=20.0, verify_ms=verify_ms + 10 * prompt, target_token_ms=100.0)


def budget_sweep(hot_speed: dict[int, float] | None = None) -> SweepTable:
    """T = 0 as GREEDY; T = 0.7 with the chain fastest (or `hot_speed` tokens/s per budget)."""
    hot_speed = hot_speed or {0: 4.5, 4: 4.2, 8: 3.9, 16: 3.5, 32: 2.8}
    results = [run(b, 0.0, p, *GREEDY[b]) for b in BUDGETS for p in (0, 1)]
    results += [run(b, 0.7, p, 2.0 + 0.1 * i, hot_speed[b], 120.0 + 40 * i) for i, b in enumerate(BUDGETS)
                for p in (0, 1)]
    meta = {"preset": "tiny-random", "machine": "Test CPU (x86_64, AVX2), 2 threads, torch 0", "draft": "d",
            "target": "t", "prompts": ["a", "b"], "ks": [5], "temperatures": [0.0, 0.7], "seeds": [0],
            "tree_budgets": list(BUDGETS), "max_new_tokens": 32}
    return SweepTable.from_dict(json.loads(json.dumps(sweep_document(results, meta))))


def mismatches(table: SweepTable, figure) -> list[str]:
    """Every mean line and run point of the figure against the table's cells and runs; [] when all agree."""
    found = []
    traces = {trace.meta: trace for trace in figure.data}
    for meta, field in (("length", "mean_accepted_length"), ("speed", "tokens_per_s"), ("verify", "verify_cost")):
        for temperature in table.temperatures:
            line = traces[f"{meta}.T={temperature:g}"]
            expected = [getattr(table.cell(5, temperature, b), field) for b in table.tree_budgets]
            if list(line.x) != list(range(len(expected))) or list(line.y) != pytest.approx(expected):
                found.append(f"{meta} at T = {temperature:g}: {list(line.y)} vs {expected}")
            points = traces[f"runs.{meta}.T={temperature:g}"]
            runs = [r for b in table.tree_budgets for r in table.runs_at(5, temperature, b)]
            values = [getattr(r, field if field != "mean_accepted_length" else "mean_accepted_length") for r in runs]
            if list(points.y) != pytest.approx(values):
                found.append(f"runs.{meta} at T = {temperature:g}")
    return found


def test_the_figures_numbers_are_the_sweeps_per_budget():
    table = budget_sweep()
    assert table.tree_budgets == list(BUDGETS)
    figure = tree_budget_figure(table)
    assert mismatches(table, figure) == []
    speed = next(trace for trace in figure.data if trace.meta == "speed.T=0")
    assert list(speed.y) == pytest.approx([GREEDY[b][1] + 0.05 for b in BUDGETS])       # mean of the two prompts
    verify = next(trace for trace in figure.data if trace.meta == "verify.T=0")
    assert list(verify.y) == pytest.approx([(GREEDY[b][2] + 5) / 100 for b in BUDGETS])  # verify_ms / target_token_ms
    assert list(figure.layout.xaxis.ticktext) == ["chain<br>5 tokens", "tree<br>4 nodes", "tree<br>8 nodes",
                                                  "tree<br>16 nodes", "tree<br>32 nodes"]
    baseline = next(trace for trace in figure.data if trace.meta == "target_only.T=0")
    assert list(baseline.y) == [4.0, 4.0]


def test_a_planted_wrong_number_is_caught(monkeypatch):
    table = budget_sweep()
    wrong = tuple((meta, title, (lambda c: c.tokens_per_s * 1.1) if meta == "speed" else mean, one, words)
                  for meta, title, mean, one, words in tree_budget.PANELS)
    monkeypatch.setattr(tree_budget, "PANELS", wrong)
    assert any(m.startswith("speed at T = 0") for m in mismatches(table, tree_budget_figure(table)))


def test_runs_are_looked_up_by_budget_and_old_runs_read_as_chains():
    table = budget_sweep()
    assert {r.tree_nodes for r in table.runs_at(5, 0.0, 16)} == {16} and len(table.runs_at(5, 0.0, 16)) == 2
    assert [r.tokens_per_s for r in table.runs_at(5, 0.0)] == pytest.approx([5.0, 5.1])      # the chain's
    old = SweepTable.load(ASSETS_DIR / "sweeps" / "qwen-coder.json")
    assert old.tree_budgets == [0] and all(r.tree_nodes == 0 for r in old.runs)
    document = json.loads(table.to_json())
    document["runs"][3]["tree_nodes"] = -1
    with pytest.raises(SweepFormatError, match=r"runs\[3\]\.tree_nodes: expected a whole number from 0 to 64"):
        SweepTable.from_dict(document)


def test_the_verdict_names_where_the_verify_cost_stops_paying():
    greedy, hot = budget_verdicts(budget_sweep())
    assert greedy.startswith("At T = 0 the extra verify cost stops paying after 8 nodes: that tree is fastest "
                             "(6.15 tokens/s against the chain's 5.05)")
    assert "at 16 nodes a verify forward costs 2.35× one target token's and brings τ = 4.05 tokens per step " \
           "(vs 3.85 for the tree of 8 nodes), for 5.25 tokens/s" in greedy
    assert hot.startswith("At T = 0.7 the chain of 5 is fastest (4.55 tokens/s): already at 4 nodes")
    assert "(vs 2.05 for the chain of 5 tokens)" in hot              # not "at 0 nodes"
    rising = budget_verdicts(budget_sweep({0: 3.0, 4: 3.2, 8: 3.4, 16: 3.6, 32: 3.8}))[1]
    assert rising == "At T = 0.7 every budget up to the largest paid: the 32-node tree is fastest (3.85 tokens/s " \
                     "against the chain's 3.05)."


def test_a_sweep_without_budgets_says_so_instead_of_an_empty_plot():
    old = SweepTable.load(ASSETS_DIR / "sweeps" / "qwen-coder.json")
    figure = tree_budget_figure(old)
    assert not figure.data and figure.layout.annotations[0].text == NO_BUDGETS
    assert "No tree budgets in this sweep" in NO_BUDGETS and budget_verdicts(old) == []
    about = trees.render_trees(old, "the uploaded sweep").about
    assert "No tree budgets in this sweep" in about and "sv-trees-none" in about


def test_the_words_name_the_machine_and_the_verdicts():
    about = trees.about_trees(budget_sweep(), "the recorded sweep x.json")
    assert "Test CPU (x86_64, AVX2), 2 threads" in about and "stops paying after 8 nodes" in about
    unnamed = budget_sweep()
    unnamed.meta.pop("machine")
    assert "does not say which machine measured it" in trees.about_trees(unnamed, "x")


def test_upload_shows_a_budget_sweep_and_refuses_a_bad_file():
    handlers = trees.TreeHandlers()
    table, figure, about = handlers.upload(budget_sweep().to_json().encode(), False, 1400)
    assert table.tree_budgets == list(BUDGETS) and "The uploaded sweep:" in about
    assert mismatches(table, figure) == []
    with pytest.raises(gr.Error, match="Not a SpecViz sweep: cells: expected a list"):
        handlers.upload(b'{"schema": "specviz.sweep/1", "cells": 3}', False, None)
    with pytest.raises(gr.Error, match="The uploaded file is empty"):
        handlers.upload(b"", False, None)


@pytest.mark.parametrize("large, width", [(False, 1400), (True, 1400), (False, 390)])
def test_every_screen_gets_all_three_panels(large, width):
    figure = tree_budget_figure(budget_sweep(), FigureStyle.for_screen(large, width))
    assert {trace.meta for trace in figure.data} >= {"length.T=0", "speed.T=0.7", "verify.T=0", "one_token"}
    assert figure.layout.xaxis3.anchor == "y3"


def test_the_shipped_budget_sweep_is_drawn_from_its_numbers():
    recorded = load_tree_sweep()
    assert recorded.table is not None, recorded.problems
    table = recorded.table
    assert recorded.name == TREE_SWEEP and table.meta.get("preset") == "qwen-coder" and table.meta.get("machine")
    assert table.tree_budgets == [0, 4, 8, 16, 32] and table.temperatures == [0.0, 0.7] and table.ks == [5]
    assert all(cell.verify_cost is not None for cell in table.cells)
    assert mismatches(table, tree_budget_figure(table)) == []
    assert len(budget_verdicts(table)) == 2
