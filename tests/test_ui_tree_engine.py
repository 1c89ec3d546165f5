"""The tree views on real tree runs: app.EngineRunner with the built-in tiny-random pair (seconds).

Every step of a greedy and a sampled tree run is drawn and checked with the layout and gather oracles of
tests/test_ui_tree.py; the KV chart's words match the step's cache record; an exported tree
trace uploads back and renders the same tree (issue #19).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app import EngineRunner
from engine.config import SpecConfig
from specviz.figures.tree import step_tree_figure
from specviz.run.handlers import Handlers
from specviz.run.views import Views
from specviz.serving.runner import ModelChoice, RunRequest
from test_ui_tree import cells, check_gather, check_layout

TINY = ModelChoice(preset="tiny-random")


@pytest.fixture(scope="module")
def runner():
    return EngineRunner(device="cpu")


def tree_run(runner, temperature: float):
    config = SpecConfig(k=4, tree_nodes=10, tree_branch=3, max_new_tokens=40, temperature=temperature, seed=3)
    generation = runner.start(RunRequest(TINY, "def fib(n):", config), lambda fraction, message: None)
    while not generation.is_done:
        generation.step()
    return generation.trace()


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_every_step_of_a_real_tree_run_is_drawn_as_recorded(runner, temperature):
    trace = tree_run(runner, temperature)
    assert trace.steps and all(step.tree is not None for step in trace.steps)
    for step in trace.steps:
        fig = step_tree_figure(step)
        check_layout(step, fig)
        for verdict in ("accepted", "rejected", "unreached"):
            assert len(cells(fig, verdict)) == sum(node.verdict == verdict for node in step.tree.nodes)
        extra = [kind for kind in ("recovered", "bonus") if cells(fig, kind)]
        assert extra == [token.kind for token in step.emitted if token.kind != "accepted"]
        caption = fig.layout.title.subtitle.text.replace("<br>", " ")
        assert (f"{len(step.tree.nodes)} nodes drafted" if step.tree.nodes else "No candidates drafted") in caption
        check_gather(step, fig)                           # the KV gather panel, row by row
        if step.tree.path:
            assert f"cropped the other {step.kv_target.cutoff}." in caption
        if temperature:                                   # the draw of the tree rule is in the hover of tried nodes
            tried = [n for n in step.tree.nodes if n.verdict != "unreached"]
            hovers = [h for v in ("accepted", "rejected") for *_, h in cells(fig, v)]
            assert sum("random draw u" in h for h in hovers) == sum(n.draw is not None for n in tried)


def test_a_tree_trace_exports_and_uploads_back_with_its_tree(runner):
    trace = tree_run(runner, 1.0)
    handlers = Handlers(runner)
    shown = dict(zip(Views.names(), handlers.upload(trace.to_json().encode(), False, None)))
    assert shown["trace"] == trace
    first = trace.steps[0]
    assert shown["tree"]["visible"]
    assert shown["tree"]["value"].layout.title.text == f"<b>Draft tree, step {first.index}</b>"
    tree = handlers.select_step(trace, trace.steps[-1].index, False, None)[3]
    assert tree["value"].layout.title.text == f"<b>Draft tree, step {trace.steps[-1].index}</b>"
    (page,) = [path for path in handlers.export(trace, first.index) if path.endswith("specviz-tree.html")]
    assert f"Draft tree, step {first.index}" in Path(page).read_text(encoding="utf-8")   # the selected step's tree
