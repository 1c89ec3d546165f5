"""The Lab's tree stage T (issue #19): the same prompt as a chain (D) and as a token tree, side by side.
The numbers on screen are the traces' (recorded with the real tiny-random pair), a planted wrong number
is caught, the selected step's tree follows the scrubber, and the shipped T trace is D's prompt as a tree."""

from __future__ import annotations

import dataclasses
import re
import statistics

import pytest

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.lab import TREE_STAGE, stage
from engine.loading.tiny import build_tiny_pair
from fakes import FakeRunner
from specviz.assets import load_lab_traces
from specviz.lab import tree_stage
from specviz.lab.handlers import LabHandlers
from specviz.lab.tree_stage import run_facts, tree_sentence
from specviz.lab.views import KEYS, REFERENCE, LabSet, LabViews, recorded_lab, render_lab, render_step

NAMES = LabViews.names()


@pytest.fixture(scope="module")
def lab() -> LabSet:
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    base = SpecConfig(k=4, max_new_tokens=24)
    traces = {key: engine.generate("def fib(n):", stage_of(key).apply(base)) for key in (REFERENCE, "T")}
    return LabSet(traces, "tiny-random")


def stage_of(key: str):
    return TREE_STAGE if key == "T" else stage(key)


def table_cells(html: str) -> dict[str, tuple[str, str]]:
    """Row label -> (chain, tree) cell texts of the comparison table."""
    rows = re.findall(r"<tr><th>((?:(?!</th>).)*?)<br><small>[^<]*</small></th><td>([^<]*)</td><td>([^<]*)</td></tr>",
                      html)
    return {re.sub(r"<[^>]+>", "", label): (chain, tree) for label, chain, tree in rows}


def wrong_cells(lab: LabSet) -> list[str]:
    """The comparison table's cells that differ from the two traces' own numbers; [] when all agree."""
    cells = table_cells(render_lab(lab, "T", "").verdict)
    wrong = []
    for column, trace in ((0, lab.traces[REFERENCE]), (1, lab.traces["T"])):
        summary = trace.summary
        reads = statistics.fmean(s.kv_target.after_forward - s.kv_target.before for s in trace.steps[1:])
        expected = {"tokens per step τ": f"{summary.mean_accepted_length:.2f}",
                    "target forwards": str(len(trace.steps)), "speed": f"{summary.tokens_per_s:.1f} tok/s",
                    "tokens a verify forward reads": f"{reads:.1f}"}
        wrong += [f"{label}[{column}]" for label, value in expected.items() if cells[label][column] != value]
    return wrong


def test_the_comparison_shows_each_runs_own_numbers(lab):
    chain, tree = lab.traces[REFERENCE], lab.traces["T"]
    assert tree.config.tree_nodes == 16 and tree.config.tree_branch == 3 and all(s.tree for s in tree.steps)
    assert wrong_cells(lab) == []
    views = render_lab(lab, "T", "")
    cells = table_cells(views.verdict)
    assert float(cells["tokens a verify forward reads"][1]) > float(cells["tokens a verify forward reads"][0])
    sentence = tree_sentence(run_facts(chain), run_facts(tree))
    assert sentence in views.verdict.replace("&#x27;", "'")
    assert f"{tree.summary.target_forwards} target forwards instead of {chain.summary.target_forwards}" in sentence
    assert "✓ output identical to target-only decoding" in views.verdict          # greedy: the tree is exact too


def test_a_planted_wrong_number_is_caught(lab, monkeypatch):
    real = run_facts
    monkeypatch.setattr(tree_stage, "run_facts",
                        lambda trace: dataclasses.replace(real(trace), target_forwards=real(trace).target_forwards + 1))
    assert wrong_cells(lab) == ["target forwards[0]", "target forwards[1]"]


def test_the_chain_beside_and_the_selected_steps_tree(lab):
    tree = lab.traces["T"]
    views = render_lab(lab, "T", "")
    chain_columns = {x for trace in views.chain_timeline.data for x in (trace.x or ()) if isinstance(x, (int, float))}
    assert chain_columns == {s.index for s in lab.traces[REFERENCE].steps}
    assert "Tree (stage T)" in views.timeline.layout.title.text
    assert "Chain (stage D)" in views.chain_timeline.layout.title.text
    step = tree.steps[-1]
    moved = render_step(lab, "T", step.index)
    assert moved.tree is not None and f"step {step.index}" in moved.tree.layout.title.text
    assert render_step(lab, "D", step.index).tree is None                     # a chain stage has no tree
    shown = dict(zip(NAMES, views.outputs()))
    assert shown["tree"]["visible"] is True and shown["chain_timeline"]["visible"] is True
    hidden = dict(zip(NAMES, render_lab(lab, "D", "").outputs()))
    assert hidden["tree"]["visible"] is False and hidden["chain_timeline"]["visible"] is False
    out = LabHandlers(FakeRunner()).select_step(lab, "T", step.index, False, None)
    assert out[-2]["visible"] is True and out[-1]["visible"] is True          # the tree, the chain
    assert list(moved.chain.layout.xaxis.range) == list(moved.timeline.layout.xaxis.range)


def test_the_shipped_tree_stage_is_ds_prompt_as_a_tree():
    recorded = recorded_lab(load_lab_traces(KEYS))
    assert recorded is not None and "T" in recorded.traces
    chain, tree = recorded.reference, recorded.traces["T"]
    assert TREE_STAGE.apply(tree.config) == tree.config and tree.config.tree_nodes == 16
    assert (tree.prompt.text, tree.config.k, tree.config.seed, tree.config.max_new_tokens) == \
        (chain.prompt.text, chain.config.k, chain.config.seed, chain.config.max_new_tokens)
    assert tree.output.token_ids == chain.output.token_ids and tree.summary.baseline.identical
    assert all(step.tree is not None for step in tree.steps)


def test_each_stage_s_cache_chart_runs_over_its_own_kind_of_steps():
    """Issue 41: the stale/missing chart of stage T (11 steps) ran its x axis to ~27, the chain stages' last step.
    The chain stages A-D share one axis (they line up); the tree stage has its own."""
    lab = recorded_lab(load_lab_traces(KEYS))
    chains = max(lab.traces[key].steps[-1].index for key in lab.traces if key != "T")
    tree = lab.traces["T"].steps
    assert tree[-1].index < chains                                  # the case the issue saw
    assert list(render_step(lab, "T", tree[0].index).drift.layout.xaxis.range) == [tree[0].index - 0.5,
                                                                                  tree[-1].index + 0.5]
    for key in ("A", "D"):
        first = lab.traces[key].steps[0].index
        assert list(render_step(lab, key, first).drift.layout.xaxis.range) == [first - 0.5, chains + 0.5]
